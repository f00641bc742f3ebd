//! [`SimDevice`]: a simulated device behind the [`Driver`] trait, with its faults.
//!
//! Every request reads `tokio::time::Instant::now()`, first lets any fault due by then strike
//! (in time order, each at its own instant), then decides: silent, lost, refused, or applied and
//! answered — late or with a bad checksum if the faults say so. There is no background task, so a
//! test under `tokio::time::pause()` controls every instant.

use crate::config::{FaultConfig, SimConfig};
use crate::error::SimConfigError;
use crate::faults::{Due, Fault, FaultKind, FaultSpec, Schedule};
use crate::model::{Model, ValidSim};
use crate::models::{Plant, SimState};
use crate::rng::Rng;
use crate::validate::validate_fault;
use closedloop_contract::{
    Answer, Area, BoxFuture, Data, Driver, Exception, TransportError, Write,
};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::{Duration, Instant};

/// Keeps the drop_rate stream apart from the sensor's noise stream of the same seed.
const DROP_STREAM: u64 = 0xD50F_0000_0000_0001;

/// A simulated relay, stepper, heater or sensor. Cheap to clone: clones share one device.
///
/// It answers register reads and writes exactly as docs/simulator.md maps them, so the engine
/// cannot tell it from a Modbus unit, and it can be made to fail in every way real hardware does
/// ([`SimDevice::inject`]). [`SimDevice::peek`] shows the physical truth to tests.
#[derive(Clone)]
pub struct SimDevice {
    inner: Arc<Inner>,
}

/// What never changes after construction, and the lock around what does.
struct Inner {
    model: Model,
    timeout_ms: u64,
    /// Never held across an `.await`.
    core: Mutex<Core>,
}

/// The mutable device: physics, faults, and the PRNG that decides lost requests.
struct Core {
    plant: Plant,
    schedule: Schedule,
    drop_rng: Rng,
}

impl Core {
    /// Lets every fault event due at or before `now` happen, each at its own instant.
    fn advance(&mut self, now: Instant) {
        while let Some((t, due)) = self.schedule.next_due(now) {
            match due {
                Due::Recover(i) => {
                    self.schedule.remove(i);
                    self.plant.after_reboot(t);
                }
                Due::Strike(i) => match self.schedule.strike(i, t) {
                    Some(Fault::PowerOff | Fault::Reboot { .. }) => self.plant.outputs_off(t),
                    Some(Fault::Stall { at_mm: None }) => {
                        self.plant.stall_now(t);
                        self.schedule.remove(i); // spent: it has done all it does
                    }
                    _ => {}
                },
            }
            self.plant.set_effects(t, &self.schedule.effects());
        }
    }

    /// Removes the fault of `kind` at `now`; power restored or a reboot cut short boots afresh.
    fn clear(&mut self, kind: FaultKind, now: Instant) {
        self.advance(now);
        if let Some((fault, struck)) = self.schedule.take(kind) {
            if struck && matches!(fault, Fault::PowerOff | Fault::Reboot { .. }) {
                self.plant.after_reboot(now);
            }
            self.plant.set_effects(now, &self.schedule.effects());
        }
    }

    /// Adds (or replaces) a fault at `now`; a static one strikes at once.
    fn inject(&mut self, spec: FaultSpec, now: Instant) {
        self.clear(spec.fault.kind(), now);
        self.schedule.push(spec, now);
        self.advance(now);
    }
}

impl SimDevice {
    /// Builds a validated device at rest at `Instant::now()`, its static faults in force.
    ///
    /// Refuses `mqtt-relay`, which runs only in `closedloop sim` over MQTT.
    pub fn new(valid: &ValidSim) -> Result<SimDevice, SimConfigError> {
        let now = Instant::now();
        let plant = Plant::new(&valid.model, valid.seed, now)?;
        let mut core = Core {
            plant,
            schedule: Schedule::default(),
            drop_rng: Rng::new(valid.seed ^ DROP_STREAM),
        };
        for spec in &valid.faults {
            core.inject(*spec, now);
        }
        let inner = Inner {
            model: valid.model.clone(),
            timeout_ms: valid.timeout_ms,
            core: Mutex::new(core),
        };
        Ok(SimDevice {
            inner: Arc::new(inner),
        })
    }

    /// Validates the plant file's sim table and builds the device.
    pub fn from_config(cfg: &SimConfig) -> Result<SimDevice, SimConfigError> {
        SimDevice::new(&cfg.validate()?)
    }

    /// The validated model and its options.
    pub fn model(&self) -> &Model {
        &self.inner.model
    }

    /// The engine's timeout for one request to this device (`timeout_ms`, default 500).
    pub fn request_timeout_ms(&self) -> u64 {
        self.inner.timeout_ms
    }

    /// The lock, recovered if a panicking test poisoned it (the state stays consistent: every
    /// mutation completes before anything can panic).
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.inner
            .core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Injects a fault now, replacing any fault of the same kind. With `after_ms`, it strikes
    /// that long after now if an actuating write already happened, else after the first one.
    ///
    /// Nothing is checked: a fault that does not apply to the model (a stall on a relay) has no
    /// effect. Use [`SimDevice::try_inject`] to have it checked like a plant-file entry.
    pub fn inject(&self, fault: FaultSpec) {
        self.lock().inject(fault, Instant::now());
    }

    /// Like [`SimDevice::inject`], after the checks of the plant file (keys prefixed `fault.`).
    pub fn try_inject(&self, fault: FaultSpec) -> Result<(), SimConfigError> {
        self.inject_config(&fault.to_config())
    }

    /// Checks a fault written as in the plant file (the sim control's input) and injects it.
    pub fn inject_config(&self, fault: &FaultConfig) -> Result<(), SimConfigError> {
        let spec = validate_fault(fault, &self.inner.model, "fault")?;
        self.inject(spec);
        Ok(())
    }

    /// Removes the fault of `kind`, if any. Clearing `power_off` or a reboot still down brings the
    /// device back as after a boot (outputs off, stepper fault cleared, target = position).
    pub fn clear(&self, kind: FaultKind) {
        self.lock().clear(kind, Instant::now());
    }

    /// Removes every fault.
    pub fn clear_all(&self) {
        let mut core = self.lock();
        let now = Instant::now();
        for kind in FaultKind::ALL {
            core.clear(kind, now);
        }
    }

    /// The faults pending or in force (spent ones — a finished reboot, a struck position-less
    /// stall — are gone).
    pub fn faults(&self) -> Vec<FaultSpec> {
        let mut core = self.lock();
        core.advance(Instant::now());
        core.schedule.specs()
    }

    /// The physical truth now, whatever the registers would say.
    pub fn peek(&self) -> SimState {
        let mut core = self.lock();
        let now = Instant::now();
        core.advance(now);
        let mut state = core.plant.peek(now);
        state.silent = core.schedule.effects().silent;
        state
    }

    /// One request through the faults: `op` runs at arrival unless the device is silent, the
    /// request is lost, or nak refuses it; the answer then waits out any latency.
    async fn exchange<T: Send>(
        &self,
        actuating: bool,
        op: impl FnOnce(&mut Plant, Instant, &crate::faults::Effects) -> Result<T, Exception> + Send,
    ) -> Answer<T> {
        let decided = {
            let mut core = self.lock();
            let now = Instant::now();
            core.advance(now);
            let fx = core.schedule.effects();
            let lost = fx.drop_p > 0.0 && core.drop_rng.next_f64() < fx.drop_p;
            if fx.silent || lost {
                None
            } else {
                let result = arrive(&mut core.plant, now, &fx, op);
                if actuating {
                    core.schedule.on_write(now);
                    core.advance(now);
                }
                Some((result, fx.latency_ms, fx.crc))
            }
        };
        let Some((result, latency_ms, crc)) = decided else {
            return std::future::pending().await;
        };
        if latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(latency_ms)).await;
            let silent_now = {
                let mut core = self.lock();
                core.advance(Instant::now());
                core.schedule.effects().silent
            };
            if silent_now {
                // The device went quiet while the answer was on its way: it never comes.
                return std::future::pending().await;
            }
        }
        if crc {
            Err(TransportError::Crc)
        } else {
            Ok(result)
        }
    }
}

/// A request that reached the device: nak refuses it, else `op` runs on the plant.
fn arrive<T>(
    plant: &mut Plant,
    now: Instant,
    fx: &crate::faults::Effects,
    op: impl FnOnce(&mut Plant, Instant, &crate::faults::Effects) -> Result<T, Exception>,
) -> Result<T, Exception> {
    if fx.nak {
        Err(Exception::SERVER_DEVICE_FAILURE)
    } else {
        op(plant, now, fx)
    }
}

impl Driver for SimDevice {
    fn read(&self, area: Area, start: u16, count: u16) -> BoxFuture<'_, Answer<Data>> {
        Box::pin(self.exchange(false, move |plant, now, fx| {
            plant.read(now, area, start, count, fx)
        }))
    }

    fn answers_at_once(&self) -> bool {
        true
    }

    /// The read `read` makes, at once — unless a fault would silence, lose, delay or corrupt
    /// it: then `None`, and `read` applies the fault (nothing is decided or drawn here).
    fn read_now(&self, area: Area, start: u16, count: u16) -> Option<Answer<Data>> {
        let mut core = self.lock();
        let now = Instant::now();
        core.advance(now);
        let fx = core.schedule.effects();
        if fx.silent || fx.drop_p > 0.0 || fx.latency_ms > 0 || fx.crc {
            return None;
        }
        let read = |plant: &mut Plant, now, fx: &_| plant.read(now, area, start, count, fx);
        Some(Ok(arrive(&mut core.plant, now, &fx, read)))
    }

    fn write(&self, write: Write) -> BoxFuture<'_, Answer<()>> {
        Box::pin(self.exchange(true, move |plant, now, _| plant.write(now, &write)))
    }

    fn describe(&self) -> String {
        format!("sim {}", self.inner.model.name())
    }
}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("model", &self.inner.model.name())
            .finish_non_exhaustive()
    }
}
