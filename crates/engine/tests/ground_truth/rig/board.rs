//! A relay board that reports when it likes (an MQTT board: `Reporting::WhenItLikes`) over a
//! simulated relay. It reports its contact and commanded coil on every heartbeat and on every
//! change it reads; each report may arrive `late_ms` after it was taken (a slow broker, a queue
//! on the board) and then carries no time of its own, as an MQTT message does not. A write is
//! acknowledged at once (a broker's PUBACK) and reaches the relay afterwards — unless the board
//! is deaf. The script can silence it, make it deaf or garble its payloads (`Op::Board`), and a
//! board may be silent or garbled from the start: a garbled board reports as often, but what it
//! sends is no value (`None`, an empty payload, `null`, `nan`), recorded as an MQTT link records
//! one (`Snapshot::no_value`, the board still heard). Every report is logged with the relay's
//! physical state when it was taken (`ObsKind::Report`, `no_value` set for a garbled one), every
//! write as the register recorder logs one.

use super::record::{Log, ObsKind};
use crate::spec::{BoardMode, Push};
use closedloop_contract::{Area, BoxFuture, Data, Driver, ErrorCode, Value, Write};
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
    /// Sent by a garbled board: its payload carries no value.
    garbled: bool,
}

/// What a garbled board sends instead of a value, by report number: each a payload an MQTT
/// decoder finds no value in.
const GARBAGE: [&str; 4] = [
    "\"None\", in neither true_values nor false_values",
    "an empty payload",
    "JSON null",
    "\"nan\", which is not a number",
];

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
    async fn take(&self, garbled: bool) -> Option<Taken> {
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
            garbled,
        })
    }

    /// Publishes one report as it arrives, numbered and timed by its arrival.
    fn deliver(&self, t: Taken) {
        let now = Instant::now();
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let at_ms = self.clock.wall_ms(now);
        self.tx.send_modify(|snap| {
            for (name, value) in [("contact", t.contact), ("commanded", t.commanded)] {
                if t.garbled {
                    let what = GARBAGE[seq as usize % GARBAGE.len()];
                    let why = format!("a message on board/{name} held {what}");
                    snap.no_value(name, why, at_ms, seq);
                } else {
                    snap.record(name, Value::Bool(value), at_ms, seq, || {
                        format!("board/{name}")
                    });
                }
            }
            snap.seq = seq;
            snap.last_valid = Some(now);
            snap.last_seen_ms = Some(at_ms);
            snap.liveness = judge_liveness(snap, self.window, self.started);
        });
        let kind = ObsKind::Report {
            delivered_ms: self.log.now_ms(),
            lied: !t.garbled && t.state.contact.is_some_and(|c| c != t.contact),
            no_value: t.garbled,
        };
        let t_us = t.at.duration_since(self.log.t0).as_micros() as u64;
        self.log.push_at(t_us, self.epoch, self.dev, kind, t.state);
    }

    async fn listen(self: Arc<Self>, stop: Arc<Notify>) {
        let mut in_flight: VecDeque<Taken> = VecDeque::new();
        let mut last: Option<(Instant, bool, bool)> = None;
        let heartbeat = Duration::from_millis(self.push.heartbeat_ms);
        let late = Duration::from_millis(self.push.late_ms);
        loop {
            let mode = self.mode();
            if mode != BoardMode::Silent
                && let Some(t) = self.take(mode == BoardMode::Garbled).await
            {
                // On its heartbeat, on a change it reads, and as soon as its payloads turn
                // garbled or whole again.
                let due = last.is_none_or(|(at, c, g)| {
                    at.elapsed() >= heartbeat || c != t.contact || g != t.garbled
                });
                if due {
                    last = Some((t.at, t.contact, t.garbled));
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
