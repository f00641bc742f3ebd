//! What the devices physically did: the observation log (`Obs`, `ObsKind`, `Log`) and the
//! `Recorder` driver that wraps every simulated device and logs each request the engine makes
//! with the device's physical state (`SimDevice::peek`) at that instant.

use closedloop_contract::{Answer, Area, BoxFuture, Data, Driver, Exception, Write};
use closedloop_sim::{SimDevice, SimState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// One thing that happened at a device, with its physical state then.
#[derive(Debug, Clone)]
pub struct Obs {
    /// Microseconds since the case began (virtual time).
    pub t_us: u64,
    pub epoch: usize,
    pub dev: usize,
    pub kind: ObsKind,
    /// The physical truth at `t_us`, before a write takes effect.
    pub state: SimState,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ObsKind {
    /// A read the engine issued; `answered`: data came back (the engine saw the values);
    /// `lied`: it reported a relay's contact the other way round from the physical one.
    Read {
        block: (Area, u16, u16),
        answered: bool,
        lied: bool,
        /// Case time (ms) the answer (or error) came back; the issue time while none did.
        done_ms: i64,
        /// The device answered it with an exception (no data): the read failed, it did not
        /// merely go unanswered.
        refused: bool,
    },
    /// A write the engine sent (`Write`'s display).
    Write { what: String },
    /// The answer to the write logged at `sent`: `ok` when the device acknowledged it.
    WriteDone { sent: usize, ok: bool },
    /// The script injected or cleared a fault.
    Fault(String),
    /// A board's report (`board.rs`), logged at the time it was taken with the state then;
    /// `lied`: it reported the contact the other way round from the physical one; `no_value`:
    /// its payload carried no value (a garbled board), recorded as `Snapshot::no_value`.
    Report {
        delivered_ms: i64,
        lied: bool,
        no_value: bool,
    },
}

impl Obs {
    pub fn t_ms(&self) -> i64 {
        (self.t_us / 1000) as i64
    }

    /// A read whose answer (with data) was back by case time `t`.
    pub fn seen_by(&self, t: i64) -> bool {
        matches!(self.kind, ObsKind::Read { answered: true, done_ms, .. } if done_ms <= t)
    }
}

/// The shared log of every device.
#[derive(Clone)]
pub struct Log {
    pub(super) t0: Instant,
    pub(super) obs: Arc<Mutex<Vec<Obs>>>,
}

impl Log {
    pub(super) fn push(&self, epoch: usize, dev: usize, kind: ObsKind, state: SimState) -> usize {
        let t_us = Instant::now().duration_since(self.t0).as_micros() as u64;
        self.push_at(t_us, epoch, dev, kind, state)
    }

    /// Logs something that happened at `t_us` (a report delivered after it was taken).
    pub(super) fn push_at(
        &self,
        t_us: u64,
        epoch: usize,
        dev: usize,
        kind: ObsKind,
        state: SimState,
    ) -> usize {
        let mut obs = self.obs.lock().unwrap_or_else(|p| p.into_inner());
        obs.push(Obs {
            t_us,
            epoch,
            dev,
            kind,
            state,
        });
        obs.len() - 1
    }

    /// Records the answer to the read logged at `i`: data (`Some`), or an exception or a
    /// transport error (`None`).
    fn answered(&self, i: usize, data: Option<&Data>, refused: bool) {
        let done_ms = self.now_ms();
        let mut obs = self.obs.lock().unwrap_or_else(|p| p.into_inner());
        let contact = obs[i].state.contact;
        let ObsKind::Read { block, .. } = &mut obs[i].kind else {
            return;
        };
        let (area, start, _) = *block;
        let lied = match (data, contact) {
            (Some(Data::Bits(bits)), Some(contact))
                if area == Area::DiscreteInput && start == 0 =>
            {
                bits.first().is_some_and(|b| *b != contact)
            }
            _ => false,
        };
        obs[i].kind = ObsKind::Read {
            block: (area, start, data.map_or(0, data_len)),
            answered: data.is_some(),
            lied,
            done_ms,
            refused,
        };
    }

    pub fn now_ms(&self) -> i64 {
        Instant::now().duration_since(self.t0).as_millis() as i64
    }

    /// The instant `ms` milliseconds after the log began.
    pub fn instant_of(&self, ms: i64) -> Instant {
        self.t0 + std::time::Duration::from_millis(ms.max(0) as u64)
    }
}

fn data_len(d: &Data) -> u16 {
    match d {
        Data::Bits(b) => b.len() as u16,
        Data::Words(w) => w.len() as u16,
    }
}

/// A simulated device behind a driver that logs every request with the physical state.
pub(super) struct Recorder {
    pub(super) sim: SimDevice,
    pub(super) dev: usize,
    pub(super) epoch: usize,
    pub(super) log: Log,
    /// While set, a read of `feedback` (its area and first address) answers exception 4.
    pub(super) refuse: Arc<AtomicBool>,
    pub(super) feedback: (Area, u16),
}

impl Recorder {
    /// Logs a read about to be issued, with the physical state it is issued in: before the
    /// read, so a read issued before a write's acknowledgement is logged before it.
    fn issued(&self, area: Area, start: u16, count: u16) -> usize {
        let kind = ObsKind::Read {
            block: (area, start, count),
            answered: false,
            lied: false,
            done_ms: self.log.now_ms(),
            refused: false,
        };
        self.log.push(self.epoch, self.dev, kind, self.sim.peek())
    }

    fn came_back(&self, i: usize, answer: &Answer<Data>) {
        match answer {
            Ok(Ok(data)) => self.log.answered(i, Some(data), false),
            Ok(Err(_)) => self.log.answered(i, None, true),
            Err(_) => self.log.answered(i, None, false),
        }
    }

    /// Exception 4 for a read of the feedback block while it is refused.
    fn refused(&self, area: Area, start: u16) -> Option<Answer<Data>> {
        let on = self.refuse.load(Ordering::SeqCst) && (area, start) == self.feedback;
        on.then_some(Ok(Err(Exception(4))))
    }
}

impl Driver for Recorder {
    fn read(&self, area: Area, start: u16, count: u16) -> BoxFuture<'_, Answer<Data>> {
        Box::pin(async move {
            let i = self.issued(area, start, count);
            let answer = match self.refused(area, start) {
                Some(no) => no,
                None => self.sim.read(area, start, count).await,
            };
            self.came_back(i, &answer);
            answer
        })
    }

    /// The poller's synchronous path, logged as `read` is. A read that would have to wait
    /// stays logged as a read never answered (it counts for nothing); the poller then reads
    /// the waiting way, logged anew. A cycle given up between two blocks (a fault starting in
    /// those microseconds) leaves its earlier blocks logged as answered though unpublished.
    fn read_now(&self, area: Area, start: u16, count: u16) -> Option<Answer<Data>> {
        let i = self.issued(area, start, count);
        let answer = match self.refused(area, start) {
            Some(no) => no,
            None => self.sim.read_now(area, start, count)?,
        };
        self.came_back(i, &answer);
        Some(answer)
    }

    fn answers_at_once(&self) -> bool {
        self.sim.answers_at_once()
    }

    fn write(&self, write: Write) -> BoxFuture<'_, Answer<()>> {
        Box::pin(async move {
            let what = ObsKind::Write {
                what: write.to_string(),
            };
            let sent = self.log.push(self.epoch, self.dev, what, self.sim.peek());
            let answer = self.sim.write(write).await;
            let done = ObsKind::WriteDone {
                sent,
                ok: matches!(answer, Ok(Ok(()))),
            };
            self.log.push(self.epoch, self.dev, done, self.sim.peek());
            answer
        })
    }

    fn describe(&self) -> String {
        self.sim.describe()
    }
}
