//! A relay board that reports when it likes (an MQTT board: `Reporting::WhenItLikes`) over a
//! simulated relay. It reports its contact and commanded coil on every heartbeat and on every
//! change it reads; each report may arrive `late_ms` after it was taken (a slow broker, a queue
//! on the board) and then carries no time of its own, as an MQTT message does not. A write is
//! acknowledged at once (a broker's PUBACK) and reaches the relay afterwards — unless the board
//! is deaf. The script can silence it or make it deaf (`Op::Board`), and a board may be silent
//! from the start. Every report is logged with the relay's physical state when it was taken
//! (`ObsKind::Report`), every write as the register recorder logs one.

use super::record::{Log, ObsKind};
use crate::spec::{BoardMode, Push};
use closedloop_driver::{Area, BoxFuture, Data, Driver, ErrorCode, Value, Write};
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, PlanError, Reporting, Request, Snapshot, SnapshotTx,
    WriteError, judge_liveness,
};
use closedloop_plant::WriteEntry;
use closedloop_sim::{SimDevice, SimState};
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How often the board looks at its relay.
const TICK: Duration = Duration::from_millis(10);

/// The board's mode, shared across engine restarts (it is the board's own state).
pub type ModeCell = Arc<Mutex<BoardMode>>;

/// A switch of coil 0, shown as the register recorder shows one.
#[derive(Debug)]
struct Switch(bool);

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "coil:0 <- [{}]", self.0)
    }
}

impl Encoded for Switch {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A report taken and not yet delivered.
struct Taken {
    at: Instant,
    state: SimState,
    contact: bool,
    commanded: bool,
}

pub(crate) struct Board {
    pub(super) sim: SimDevice,
    pub(super) dev: usize,
    pub(super) epoch: usize,
    pub(super) log: Log,
    pub(super) push: Push,
    pub(super) mode: ModeCell,
    pub(super) window: Duration,
    /// How long the board waits for its relay to answer one read.
    pub(super) timeout: Duration,
    pub(super) clock: Clock,
    pub(super) started: Instant,
    pub(super) tx: SnapshotTx,
    /// The number of the last report delivered.
    pub(super) seq: AtomicU64,
}

impl Board {
    fn mode(&self) -> BoardMode {
        *self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the relay as the board's firmware does: `None` while it answers nothing.
    async fn take(&self) -> Option<Taken> {
        let state = self.sim.peek();
        let at = Instant::now();
        let bit = |d: Data| match d {
            Data::Bits(b) => b.first().copied(),
            Data::Words(_) => None,
        };
        let read = |area| tokio::time::timeout(self.timeout, self.sim.read(area, 0, 1));
        let contact = bit(read(Area::DiscreteInput).await.ok()?.ok()?.ok()?)?;
        let commanded = bit(read(Area::Coil).await.ok()?.ok()?.ok()?)?;
        Some(Taken {
            at,
            state,
            contact,
            commanded,
        })
    }

    /// Publishes one report as it arrives, numbered and timed by its arrival.
    fn deliver(&self, t: Taken) {
        let now = Instant::now();
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let at_ms = self.clock.wall_ms(now);
        self.tx.send_modify(|snap| {
            snap.record("contact", Value::Bool(t.contact), at_ms, seq, || {
                "board/contact".into()
            });
            snap.record("commanded", Value::Bool(t.commanded), at_ms, seq, || {
                "board/commanded".into()
            });
            snap.seq = seq;
            snap.last_valid = Some(now);
            snap.last_seen_ms = Some(at_ms);
            snap.liveness = judge_liveness(snap, self.window, self.started);
        });
        let kind = ObsKind::Report {
            delivered_ms: self.log.now_ms(),
            lied: t.state.contact.is_some_and(|c| c != t.contact),
        };
        let t_us = t.at.duration_since(self.log.t0).as_micros() as u64;
        self.log.push_at(t_us, self.epoch, self.dev, kind, t.state);
    }

    async fn listen(self: Arc<Self>, stop: Arc<Notify>) {
        let mut in_flight: VecDeque<Taken> = VecDeque::new();
        let mut last: Option<(Instant, bool)> = None;
        let heartbeat = Duration::from_millis(self.push.heartbeat_ms);
        let late = Duration::from_millis(self.push.late_ms);
        loop {
            if self.mode() != BoardMode::Silent
                && let Some(t) = self.take().await
            {
                let due = last.is_none_or(|(at, c)| at.elapsed() >= heartbeat || c != t.contact);
                if due {
                    last = Some((t.at, t.contact));
                    in_flight.push_back(t);
                }
            }
            while in_flight
                .front()
                .is_some_and(|t| t.at + late <= Instant::now())
            {
                let t = in_flight.pop_front().expect("a report in flight");
                self.deliver(t);
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = stop.notified() => return,
            }
        }
    }
}

impl Link for Board {
    fn describe(&self) -> String {
        format!("board over {}", self.sim.describe())
    }

    fn reporting(&self) -> Reporting {
        Reporting::WhenItLikes
    }

    fn samples(&self) -> &SnapshotTx {
        &self.tx
    }

    fn current(&self) -> Snapshot {
        let mut snap = self.tx.borrow().clone();
        snap.liveness = judge_liveness(&snap, self.window, self.started);
        snap
    }

    fn fence(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        match values.values.first() {
            Some(v) => Ok(Arc::new(Switch(v.as_bool()))),
            None => Err(PlanError(format!("{} has no value", entry.describe()))),
        }
    }

    /// Acknowledged at once, as a broker does; the board applies it afterwards, unless deaf.
    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        _expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            let Some(Switch(on)) = request.as_any().downcast_ref::<Switch>() else {
                return Err(WriteError::refused(ErrorCode::BusNak, "not a switch"));
            };
            let what = ObsKind::Write {
                what: request.to_string(),
            };
            let sent = self.log.push(self.epoch, self.dev, what, self.sim.peek());
            let done = ObsKind::WriteDone { sent, ok: true };
            self.log.push(self.epoch, self.dev, done, self.sim.peek());
            let fence = self.fence();
            if self.mode() != BoardMode::Deaf {
                let sim = self.sim.clone();
                let write = Write::Coils {
                    start: 0,
                    values: vec![*on],
                };
                tokio::spawn(async move {
                    let _ = sim.write(write).await;
                });
            }
            Ok(fence)
        })
    }

    fn ask(&self) {}

    fn fresh(&self, _within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move { self.current() })
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(self.listen(stop))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
