//! One device at run time: its plant declaration and the [`Link`] that reaches it.
//!
//! The engine knows no protocol: everything it asks of a device goes through the link — the
//! numbered samples, the fence a write's acknowledgement returns, a fresh read, the encoding of
//! a write plan. The rule that makes a value evidence is the link's to keep: a sample numbered
//! above a write's fence was read after the write was acknowledged (`closedloop-link`).

use crate::dispatch::plan::WriteError;
use closedloop_contract::{Answer, Area, Data, TransportError, Write};
use closedloop_link::{Link, ReadBack, Reporting, Request};
use closedloop_plant::{Device, DriverConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

pub use closedloop_contract::sample::{
    Failure, Freshness, Liveness, Reading, SignalValue, Snapshot, Unusable,
};

/// A device's runtime.
pub struct DeviceRuntime {
    /// The plant's declaration.
    pub spec: Arc<Device>,
    link: Arc<dyn Link>,
    timeout: Duration,
}

impl DeviceRuntime {
    /// Wraps a link; call [`DeviceRuntime::spawn_reader`] to start reading.
    pub fn new(spec: Arc<Device>, link: Arc<dyn Link>) -> Arc<DeviceRuntime> {
        Arc::new(DeviceRuntime {
            timeout: Duration::from_millis(spec.request_timeout_ms()),
            spec,
            link,
        })
    }

    /// Device id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The rule a decider holds this device's values to at `now_ms` (`closedloop_contract`'s
    /// `sample::Freshness`): read no longer ago than its liveness window — unless it reports
    /// when it likes (MQTT), whose values stand while it is online.
    pub fn freshness(&self, now_ms: i64) -> Freshness {
        let window = (self.spec.liveness.max_silence_s * 1000.0).ceil() as i64;
        Freshness {
            now_ms,
            within_ms: self.can_be_asked().then_some(window),
        }
    }

    /// The values of `snap` (this device's) a decider may use now, by name: an expression's
    /// scope.
    pub fn usable_values(
        &self,
        snap: &Snapshot,
        now_ms: i64,
    ) -> std::collections::BTreeMap<String, closedloop_contract::Value> {
        snap.usable_values(self.freshness(now_ms))
    }

    /// The link (for the bridge tools of one protocol).
    pub fn link(&self) -> &Arc<dyn Link> {
        &self.link
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.link.samples().borrow().clone()
    }

    /// The latest snapshot with its liveness judged now rather than at the end of its cycle, so
    /// a device whose window ran out between two cycles (a slow, timing-out cycle) is already
    /// offline.
    pub fn current(&self) -> Snapshot {
        self.link.current()
    }

    /// Looks at the latest snapshot where it lies, without copying it: what an alarm's watcher
    /// reads every period. `f` must not wait (it holds the channel's lock).
    pub fn with_snapshot<T>(&self, f: impl FnOnce(&Snapshot) -> T) -> T {
        f(&self.link.samples().borrow())
    }

    /// [`DeviceRuntime::current`]'s liveness alone, without copying the sample.
    pub fn liveness(&self) -> Liveness {
        self.link.liveness()
    }

    /// A receiver that wakes on every sample (holding the latest only).
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.link.samples().subscribe()
    }

    /// A receiver of every sample published from now on, for judging each one.
    pub fn samples(&self) -> tokio::sync::broadcast::Receiver<Snapshot> {
        self.link.samples().samples()
    }

    /// The number of the last sample read so far: values numbered higher are fresh.
    pub fn issued_seq(&self) -> u64 {
        self.link.fence()
    }

    /// How the device's values arrive.
    pub fn reporting(&self) -> Reporting {
        self.link.reporting()
    }

    /// Whether the device can be asked for a read now ([`DeviceRuntime::fresh`]); a device that
    /// reports when it likes cannot.
    pub fn can_be_asked(&self) -> bool {
        self.reporting().can_be_asked()
    }

    /// Sends one request of a plan. Returns the fence: values numbered above it arrived after
    /// the acknowledgement. `expiry` (the command's deadline) bounds the wait.
    pub async fn send(&self, req: &Request, expiry: Duration) -> Result<u64, WriteError> {
        self.link.send(req.as_ref(), expiry).await
    }

    /// Reads back what `req` wrote, where the link can.
    pub async fn read_back(&self, req: &Request) -> Option<ReadBack> {
        self.link.read_back(req.as_ref()).await
    }

    /// Asks the link for a read now instead of at its next poll.
    pub fn poll_now(&self) {
        self.link.ask();
    }

    /// A snapshot read after this call: the values a write is about to be judged against. A
    /// cached value may be up to one poll period old — older than a fault that struck just
    /// before the command — so the link is asked for a read now, bounded by `within`. A device
    /// that reports when it likes cannot be asked: its cache is as fresh as it gets.
    pub async fn fresh(&self, within: Duration) -> Snapshot {
        self.link.fresh(within).await
    }

    /// Whether the device has registers (raw register access applies).
    pub fn has_registers(&self) -> bool {
        self.link.registers().is_some()
    }

    /// Sends one raw register write with the device's timeout.
    pub async fn write(&self, w: Write) -> Answer<()> {
        let Some(driver) = self.link.registers() else {
            return Err(TransportError::Io(format!(
                "{} has no registers",
                self.id()
            )));
        };
        match tokio::time::timeout(self.timeout, driver.write(w)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    /// Reads one raw register block with the device's timeout.
    pub async fn read(&self, area: Area, start: u16, count: u16) -> Answer<Data> {
        let Some(driver) = self.link.registers() else {
            return Err(TransportError::Io(format!(
                "{} has no registers",
                self.id()
            )));
        };
        match tokio::time::timeout(self.timeout, driver.read(area, start, count)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    /// Starts the link's reader (a poller or a listener); it ends when `stop` is notified.
    pub fn spawn_reader(&self, stop: Arc<Notify>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(Arc::clone(&self.link).run(stop))
    }
}

/// Why a device counts as offline, in words.
pub(crate) fn offline_detail(dev: &DeviceRuntime, snap: &Snapshot) -> String {
    offline_detail_of(&dev.spec, snap)
}

/// [`offline_detail`] of a device declared as `spec`: its silence in its protocol's words
/// ([`silent_means`]).
pub(crate) fn offline_detail_of(spec: &Device, snap: &Snapshot) -> String {
    let (id, silence) = (&spec.id, spec.liveness.max_silence_s);
    if snap.liveness == Liveness::Unknown && !snap.down {
        return format!(
            "{id} has never been heard since the gateway started (unknown, not yet offline)."
        );
    }
    if snap.down {
        // Not a silence: the device said so (its last will), or its broker is unreachable.
        let why = snap.last_error.as_deref().unwrap_or("it is unreachable");
        return format!("{id} is offline: {why}.");
    }
    let silent = silent_means(&spec.driver);
    match &snap.last_error {
        Some(e) => format!("{id} {silent} for more than {silence} s (last error: {e})."),
        None => format!("{id} {silent} for more than {silence} s."),
    }
}

/// What "offline" means for a device on `driver`, in its protocol's words: how it fell silent
/// ("pump gave no valid answer for more than 1 s", "relay1 sent no message … for more than
/// 5 s"). A board that publishes when it likes is never asked, so it cannot fail to answer.
pub fn silent_means(driver: &DriverConfig) -> &'static str {
    match driver {
        DriverConfig::Sim(_) | DriverConfig::ModbusTcp { .. } | DriverConfig::ModbusRtu { .. } => {
            "gave no valid answer"
        }
        DriverConfig::Mqtt { .. } => "sent no message (no reading, heartbeat or status message)",
        DriverConfig::Opcua { .. } => "gave no good value, read or notified,",
        DriverConfig::Can { .. } => "sent no frame of its messages",
    }
}
