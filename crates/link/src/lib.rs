//! The one seam between closedloop's engine and a device, whatever its protocol.
//!
//! The engine judges commands; it does not speak Modbus, MQTT, OPC UA or CAN. Everything it needs
//! from a device is a [`Link`]: a numbered stream of samples, a fence taken when a write is
//! acknowledged, a fresh read on request, and the encoding of an action's write entries into
//! requests the link alone knows how to send. `closedloop-connect` builds one link per device of a
//! plant (the simulator, Modbus, MQTT, OPC UA, CAN); a test can hand the engine a link of its own.
//!
//! The rule every link keeps, because the engine's honesty rests on it: a sample's number (`seq`)
//! says *when it was read*, and [`Link::send`] returns the fence — the number of the last sample
//! read before the device acknowledged the write. Only samples numbered above the fence count as
//! evidence that the write took effect; a poll already in flight during the write can never
//! confirm it. [`fence_passed`] is that rule in code.
//!
//! What the seam holds:
//!
//! - [`Link`]: `describe`, `reporting`, `samples` (the device's [`SnapshotTx`]), `current`,
//!   `fence`, `encode` (a write entry into a [`Request`], or a [`PlanError`]), `send` (→ the
//!   fence), `ask` (a read now), `fresh` (a read taken from now on, bounded), `read_back` (a
//!   written request read back, where the protocol can), `last_poll` (for metrics), `run` (the
//!   reader), `registers` (the raw register tools, register links only) and `as_any` (for the
//!   bridge tools of one protocol).
//! - [`Reporting`], which decides what a fresh read can be: `Polled` (the simulator, Modbus),
//!   `Frames` (CAN), `ChangesOnly` (OPC UA), `WhenItLikes` (MQTT, which cannot be asked).
//! - [`Encoded`]: a request as its link encoded it (`Display` for the journal, `repeat_every` for
//!   cyclic CAN frames); [`Evaluated`]: a write entry's expressions evaluated in order, or an MQTT
//!   payload rendered; [`ReadBack`], [`RawError`], [`Links`] (every device's link on one clock).
//! - [`ask_and_wait`], [`judge_liveness`], [`value_json`], and [`clock`], which maps the monotonic
//!   clock to wall-clock milliseconds (re-exported as `closedloop_engine::clock`).

pub mod clock;
pub mod shown;

use closedloop_contract::Value;
pub use closedloop_contract::contract::WriteError;
pub use closedloop_contract::sample::{Liveness, SignalValue, Snapshot, SnapshotTx};
use closedloop_contract::{BoxFuture, Driver};
use closedloop_plant::WriteEntry;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

pub use clock::Clock;
pub use shown::Shown;

/// How a device's values reach closedloop, which decides what a fresh read can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporting {
    /// Read every `poll_ms`; asking starts a read cycle now (the simulator, Modbus).
    Polled,
    /// Sends its values in frames of its own accord; asking waits for the next one (CAN).
    Frames,
    /// Sends changes only, and can be read on request (OPC UA): a value a write set and that
    /// then stays is never sent again, so the engine asks for reads while a command runs.
    ChangesOnly,
    /// Reports when it likes and cannot be asked (MQTT): its latest report is as fresh as it
    /// gets, and "already so" waits for a report sent after the expected duration.
    WhenItLikes,
}

impl Reporting {
    /// Whether the device can be asked for a read ([`Link::fresh`] waits for one).
    pub fn can_be_asked(self) -> bool {
        self != Reporting::WhenItLikes
    }
}

/// One request of a write plan, encoded by the link that will send it: registers, an MQTT
/// payload, a node write, a method call, a CAN frame. The engine shows it (`Display`, in the
/// journal's `dispatched` record) and hands it back to the same link; only the link looks inside.
pub trait Encoded: fmt::Display + fmt::Debug + Send + Sync + 'static {
    /// Re-sent at this period while the command runs (a CAN actuator that wants cyclic frames).
    fn repeat_every(&self) -> Option<Duration> {
        None
    }

    /// For the link's own downcast.
    fn as_any(&self) -> &dyn Any;
}

/// An encoded request, shared between the plan, the journal text and the cyclic re-send.
pub type Request = Arc<dyn Encoded>;

/// One write entry of an action with its expressions evaluated: the protocol-neutral plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// The value of each of the entry's expressions, in `WriteEntry::exprs` order.
    pub values: Vec<Value>,
    /// The rendered text of an entry that is a template (an MQTT payload).
    pub text: Option<String>,
}

/// Why a plan could not be built: nothing is sent.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A written value read back from the device after its acknowledgement.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// Whether the device holds what was written.
    pub matched: bool,
    /// Evidence for the result: what was read, keyed by its address.
    pub evidence: Option<(String, serde_json::Value)>,
}

/// How the engine reaches one device. Implementations live beside their protocol
/// (`closedloop-connect`); the engine holds an `Arc<dyn Link>` per device and never asks which
/// protocol is behind it.
pub trait Link: Send + Sync + 'static {
    /// A short description for logs, e.g. `modbus-tcp 127.0.0.1:502 unit 1`.
    fn describe(&self) -> String;

    /// How the device's values arrive.
    fn reporting(&self) -> Reporting;

    /// The channel the link publishes every sample on (the latest, and each one in turn).
    fn samples(&self) -> &SnapshotTx;

    /// The latest sample with its liveness judged now rather than when it was taken, so a
    /// device whose window ran out between two samples is already offline.
    fn current(&self) -> Snapshot;

    /// Only the liveness of [`Link::current`], without copying the sample and its signals: what
    /// a page of `list_devices` asks of every device on it.
    fn liveness(&self) -> Liveness {
        self.current().liveness
    }

    /// The number of the last sample read so far: samples numbered above it are read later.
    fn fence(&self) -> u64;

    /// Encodes one evaluated write entry into a request this link can send, or says why the
    /// value does not fit (a coil given 0.3, a register too small, a DBC without the message).
    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError>;

    /// Sends one request and returns its fence once the device (or its broker, or its adapter)
    /// acknowledged it. `expiry` bounds the wait and, where the protocol has one, the request's
    /// own lifetime (an MQTT message expiry).
    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>>;

    /// Asks for a read now instead of at the next poll (nothing for a device that cannot be
    /// asked).
    fn ask(&self);

    /// A sample read after this call, bounded by `within`; the latest one on timeout or when
    /// the device cannot be asked.
    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot>;

    /// Reads back what `request` wrote; `None` when this kind of request cannot be read back
    /// (a publish, a frame, a method call) — the default, for links that write nothing readable.
    fn read_back<'a>(&'a self, _request: &'a dyn Encoded) -> BoxFuture<'a, Option<ReadBack>> {
        Box::pin(async { None })
    }

    /// How long the last poll cycle took, for `/metrics` (read at scrape time); `None` for a
    /// link that does not poll, or before its first cycle.
    fn last_poll(&self) -> Option<Duration> {
        None
    }

    /// Poll ticks at which the device's previous cycle was still running, so none was issued
    /// (a slow or silent device, a serial line asked more than it carries): its reads come less
    /// often than its `poll_ms` says. For `/metrics`; 0 for a link that does not poll.
    fn polls_missed(&self) -> u64 {
        0
    }

    /// Reads (or listens) and publishes samples until `stop` is notified.
    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()>;

    /// The device's registers, for raw register tools (sim and Modbus only).
    fn registers(&self) -> Option<&dyn Driver> {
        None
    }

    /// For tools that belong to one protocol (`can_signals`, `opcua_browse`): the concrete link.
    fn as_any(&self) -> &dyn Any;
}

/// Why a tool outside the command lifecycle (a raw register read or write, a bridge tool such as
/// `can_signals`) did not succeed: the contract's code and what happened.
#[derive(Debug, Clone, PartialEq)]
pub struct RawError {
    /// The contract code.
    pub code: closedloop_contract::ErrorCode,
    /// What happened.
    pub detail: String,
}

/// A value as the JSON a timeline or a tool answer shows.
pub fn value_json(v: Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => serde_json::Value::Bool(b),
        Value::Number(n) => serde_json::json!(n),
    }
}

/// The inverse of [`value_json`]: a journaled or published value as an expression reads it;
/// `None` for what is no value (null, a string, a list).
pub fn value_of_json(v: &serde_json::Value) -> Option<Value> {
    match v {
        serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
        serde_json::Value::Number(n) => n.as_f64().map(Value::Number),
        _ => None,
    }
}

/// Every device's link, and the clock their timestamps were taken on (the engine keeps time by
/// the same clock, so the journal's times and the samples' agree).
pub struct Links {
    /// The clock.
    pub clock: Clock,
    /// One link per device id.
    pub map: BTreeMap<String, Arc<dyn Link>>,
}

/// Whether `snap` holds a sample numbered above `fence` (read after the write it fences).
pub fn fence_passed(snap: &Snapshot, fence: u64) -> bool {
    snap.seq > fence
}

/// [`Link::fresh`] for a link that can be asked: ask, then wait for a sample numbered above the
/// fence taken before asking, bounded by `within`; the link's current sample either way.
pub async fn ask_and_wait(link: &dyn Link, within: Duration) -> Snapshot {
    let mut rx: watch::Receiver<Snapshot> = link.samples().subscribe();
    let after = link.fence();
    link.ask();
    let _ = tokio::time::timeout(within, rx.wait_for(|s| fence_passed(s, after))).await;
    link.current()
}

/// Liveness from a sample's last sign of life, judged now: offline when the link is down, when
/// nothing valid came for `window`, or when nothing ever came within `window` of `started`.
pub fn judge_liveness(
    snap: &Snapshot,
    window: Duration,
    started: tokio::time::Instant,
) -> Liveness {
    match snap.last_valid {
        _ if snap.down => Liveness::Offline,
        // Silent for a whole liveness window since reading began: that is offline, not merely
        // "not heard from yet".
        None if started.elapsed() > window => Liveness::Offline,
        None => Liveness::Unknown,
        Some(t) if t.elapsed() <= window => Liveness::Online,
        Some(_) => Liveness::Offline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn liveness_is_judged_from_the_last_sign_of_life() {
        let started = tokio::time::Instant::now();
        let window = Duration::from_secs(2);
        let mut snap = Snapshot::before_first_read();
        assert_eq!(judge_liveness(&snap, window, started), Liveness::Unknown);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(judge_liveness(&snap, window, started), Liveness::Offline);
        snap.last_valid = Some(tokio::time::Instant::now());
        assert_eq!(judge_liveness(&snap, window, started), Liveness::Online);
        snap.down = true;
        assert_eq!(judge_liveness(&snap, window, started), Liveness::Offline);
        snap.down = false;
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(judge_liveness(&snap, window, started), Liveness::Offline);
    }

    #[test]
    fn only_a_sample_numbered_above_the_fence_passes_it() {
        let mut snap = Snapshot::before_first_read();
        snap.seq = 7;
        assert!(!fence_passed(&snap, 7));
        assert!(fence_passed(&snap, 6));
    }
}
