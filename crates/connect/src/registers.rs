//! Register devices (the simulator, Modbus): a [`Driver`] read by a poller.
//!
//! A poll cycle reads every declared signal (neighbouring addresses of one area merged into one
//! request, never across gaps) and publishes a sample; the devices of one `poll_ms` are polled
//! together by shards ([`Shards`]), a task per few hundred devices. Each read cycle gets its
//! number *when it is issued*; a write's fence is the number of the last cycle issued before its
//! acknowledgement, so a cycle already in flight during the write can never confirm it.

mod poller;
mod shard;

pub use poller::poll_requests;
pub use shard::{SHARD_SIZE, Shards};

use crate::base::Base;
use closedloop_contract::{Answer, Area, BoxFuture, Data, Driver, TransportError, Value, Write};
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, PlanError, ReadBack, Reporting, Request, Snapshot, SnapshotTx,
    WriteError,
};
use closedloop_plant::{Device, WriteEntry};
use serde_json::json;
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// A register write, as the engine's journal shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterWrite(pub Write);

impl fmt::Display for RegisterWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Encoded for RegisterWrite {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A polled register device.
pub struct RegisterLink {
    base: Base,
    driver: Arc<dyn Driver>,
    blocks: Vec<poller::Block>,
    issued: AtomicU64,
    /// `closedloop_device_poll_duration_seconds`, every polled device's cycles together (a
    /// histogram per device would be thousands of series in a hall).
    poll_time: metrics::Histogram,
    /// How long this device's last cycle took, µs (`closedloop_device_last_poll_seconds`
    /// read at scrape time: a gauge set on every poll cost a hall 4 % of its CPU at rest).
    last_poll_us: AtomicU64,
    /// Ticks its shard reached while its previous cycle still ran (`Link::polls_missed`).
    missed: AtomicU64,
    /// Its place in the shard that polls it.
    seat: shard::Seat,
}

impl RegisterLink {
    /// A link over `driver` for the device `spec`, seated in one of `shards` (the plant's);
    /// [`Link::run`] starts polling.
    pub fn new(
        spec: Arc<Device>,
        driver: Arc<dyn Driver>,
        clock: Clock,
        shards: &mut Shards,
    ) -> RegisterLink {
        RegisterLink {
            seat: shards.seat(spec.poll_ms),
            blocks: poller::plan_blocks(&spec),
            base: Base::new(spec, clock),
            driver,
            issued: AtomicU64::new(0),
            poll_time: metrics::histogram!("closedloop_device_poll_duration_seconds"),
            last_poll_us: AtomicU64::new(u64::MAX),
            missed: AtomicU64::new(0),
        }
    }

    /// Sends one register write with the device's timeout.
    pub async fn write(&self, w: Write) -> Answer<()> {
        let timeout = self.base.timeout;
        match tokio::time::timeout(timeout, self.driver.write(w)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(timeout.as_millis() as u64)),
        }
    }

    /// Reads one block with the device's timeout.
    pub async fn read(&self, area: Area, start: u16, count: u16) -> Answer<Data> {
        let timeout = self.base.timeout;
        match tokio::time::timeout(timeout, self.driver.read(area, start, count)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(timeout.as_millis() as u64)),
        }
    }

    /// Reads one written block back: whether it holds what was written, and what it held.
    async fn read_back_block(&self, w: &Write) -> ReadBack {
        let (area, start, count) = match w {
            Write::Coils { start, values } => (w.area(), *start, values.len() as u16),
            Write::Registers { start, values } => (w.area(), *start, values.len() as u16),
        };
        // Self-clearing outputs (a start coil) cannot be read back as written; a plant that
        // wants readback declares registers that hold their value.
        let Ok(Ok(data)) = self.read(area, start, count).await else {
            return ReadBack {
                matched: false,
                evidence: None,
            };
        };
        let value = match &data {
            Data::Bits(b) => json!(b),
            Data::Words(ws) => json!(ws),
        };
        let source = format!("{area}:{start}");
        let shown = closedloop_link::Shown::now(value, self.base.clock.now_ms(), &source);
        ReadBack {
            matched: matches(&data, w),
            evidence: Some((source.clone(), shown.evidence())),
        }
    }
}

/// Whether read-back data equals what was written.
pub fn matches(data: &Data, w: &Write) -> bool {
    match (data, w) {
        (Data::Bits(b), Write::Coils { values, .. }) => b == values,
        (Data::Words(ws), Write::Registers { values, .. }) => ws == values,
        _ => false,
    }
}

/// A register or coil write: a coil takes a bool or exactly 0 or 1, a register the value
/// encoded as the entry declares (refused, never saturated).
pub fn encode(entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
    let WriteEntry::Register {
        area,
        address,
        encoding,
        value,
    } = entry
    else {
        return Err(PlanError(format!(
            "{} is not a register write; a register device takes coil and holding writes",
            entry.describe()
        )));
    };
    let v = values.values.first().copied().unwrap_or(Value::Bool(false));
    if !area.is_bit() {
        let words = encoding.encode(v).map_err(|e| {
            PlanError(format!(
                "{area}:{address} cannot take `{}` = {v}: {e}",
                value.source()
            ))
        })?;
        return Ok(Arc::new(RegisterWrite(Write::Registers {
            start: *address,
            values: words,
        })));
    }
    // A coil takes a bool, or exactly 0 or 1: 0.3 is a mistake, not "on".
    if let Value::Number(n) = v
        && n != 0.0
        && n != 1.0
    {
        return Err(PlanError(format!(
            "{area}:{address} is a coil and cannot take `{}` = {n}; give true/false or 0/1",
            value.source()
        )));
    }
    Ok(Arc::new(RegisterWrite(Write::Coils {
        start: *address,
        values: vec![v.as_bool()],
    })))
}

impl Link for RegisterLink {
    fn describe(&self) -> String {
        self.driver.describe()
    }

    fn reporting(&self) -> Reporting {
        Reporting::Polled
    }

    fn samples(&self) -> &SnapshotTx {
        &self.base.tx
    }

    fn current(&self) -> Snapshot {
        self.base.current()
    }

    fn liveness(&self) -> closedloop_link::Liveness {
        self.base.liveness()
    }

    fn fence(&self) -> u64 {
        self.issued.load(Ordering::SeqCst)
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        encode(entry, values)
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        _expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            let Some(RegisterWrite(w)) = request.as_any().downcast_ref::<RegisterWrite>() else {
                return Err(crate::misfit(request, self.base.id()));
            };
            closedloop_contract::contract::register_write(self.write(w.clone()).await, w)?;
            Ok(self.fence())
        })
    }

    fn ask(&self) {
        self.seat.ask();
    }

    fn last_poll(&self) -> Option<Duration> {
        match self.last_poll_us.load(Ordering::Relaxed) {
            u64::MAX => None,
            us => Some(Duration::from_micros(us)),
        }
    }

    fn polls_missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }

    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(closedloop_link::ask_and_wait(self, within))
    }

    fn read_back<'a>(&'a self, request: &'a dyn Encoded) -> BoxFuture<'a, Option<ReadBack>> {
        Box::pin(async move {
            let RegisterWrite(w) = request.as_any().downcast_ref::<RegisterWrite>()?;
            Some(self.read_back_block(w).await)
        })
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(self.poll(stop))
    }

    fn registers(&self) -> Option<&dyn Driver> {
        Some(self.driver.as_ref())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_contract::Encoding;
    use closedloop_plant::Expr;

    fn coil() -> WriteEntry {
        WriteEntry::Register {
            area: Area::Coil,
            address: 0,
            encoding: Encoding::default(),
            value: Expr::compile("x").expect("compiles"),
        }
    }

    fn of(v: Value) -> Evaluated {
        Evaluated {
            values: vec![v],
            text: None,
        }
    }

    fn write_of(r: &Request) -> Write {
        r.as_any()
            .downcast_ref::<RegisterWrite>()
            .expect("a register write")
            .0
            .clone()
    }

    #[test]
    fn a_coil_takes_a_bool_or_exactly_zero_or_one() {
        let on = Write::Coils {
            start: 0,
            values: vec![true],
        };
        assert_eq!(
            write_of(&encode(&coil(), &of(Value::Number(1.0))).unwrap()),
            on
        );
        assert_eq!(
            write_of(&encode(&coil(), &of(Value::Bool(true))).unwrap()),
            on
        );
        let e = encode(&coil(), &of(Value::Number(0.3))).unwrap_err();
        assert!(e.0.contains("coil"), "{e}");
    }

    #[test]
    fn readback_compares_exactly() {
        let wr = Write::Registers {
            start: 0,
            values: vec![1, 2],
        };
        assert!(matches(&Data::Words(vec![1, 2]), &wr));
        assert!(!matches(&Data::Words(vec![1, 3]), &wr));
        assert!(!matches(&Data::Bits(vec![true]), &wr));
    }
}
