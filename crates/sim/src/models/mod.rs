//! The simulated models: their register maps and their physics (docs/simulator.md).
//!
//! Physics is evaluated lazily and exactly: each model keeps the state it had at its last change
//! (an anchor instant) and computes any later instant in closed form — position = start +
//! speed × elapsed, clamped — so results do not depend on how often anyone looks, and tests under
//! `tokio::time::pause()` are exact. Nothing here reads the clock; every method takes `now`.

mod heater;
mod relay;
mod sensor;
mod stepper;

use crate::error::SimConfigError;
use crate::faults::Effects;
use crate::model::Model;
use closedloop_contract::{Area, Data, Exception, Write};
use tokio::time::Instant;

pub(crate) use heater::Heater;
pub(crate) use relay::Relay;
pub(crate) use sensor::Sensor;
pub(crate) use stepper::Stepper;

/// Largest read of bits and of registers in one Modbus request.
const MAX_READ_BITS: u16 = 2000;
const MAX_READ_WORDS: u16 = 125;

/// The physical truth of a simulated device at one instant, for tests and the sim's control.
///
/// Unlike a register read, it is never faulted: a swapped contact shows the armature's real
/// state, a silent device still shows where its axis stands. Fields a model lacks are `None`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct SimState {
    /// The model's plant-file name.
    pub model: &'static str,
    /// Whether the device currently answers nothing (power_off, zombie, reboot in progress).
    pub silent: bool,
    /// Coil states as they would read back (relay: commanded; heater: enable; stepper: all false).
    pub coils: Vec<bool>,
    /// relay: whether the contact is physically closed.
    pub contact: Option<bool>,
    /// stepper: the latched target.
    pub target_mm: Option<f64>,
    /// stepper: the true position.
    pub position_mm: Option<f64>,
    /// stepper: whether the axis is moving.
    pub moving: Option<bool>,
    /// stepper: whether the driver's fault output is active.
    pub fault: Option<bool>,
    /// heater: the true temperature.
    pub temperature_c: Option<f64>,
    /// heater: the setpoint.
    pub setpoint_c: Option<f64>,
    /// sensor: the noiseless value.
    pub value: Option<f64>,
}

/// One simulated device's physics, whichever the model.
#[derive(Debug)]
pub(crate) enum Plant {
    Relay(Relay),
    Stepper(Stepper),
    Heater(Heater),
    Sensor(Sensor),
}

impl Plant {
    /// Builds the model at rest at `now`; `mqtt-relay` has no in-process form.
    pub fn new(model: &Model, seed: u64, now: Instant) -> Result<Plant, SimConfigError> {
        Ok(match model {
            Model::Relay(o) => Plant::Relay(Relay::new(o.clone(), now)),
            Model::Stepper(o) => Plant::Stepper(Stepper::new(o.clone(), now)),
            Model::Heater(o) => Plant::Heater(Heater::new(o.clone(), now)),
            Model::Sensor(o) => Plant::Sensor(Sensor::new(o.clone(), seed)),
            Model::MqttRelay(_) => {
                return Err(SimConfigError::NotInProcess {
                    model: model.name().to_string(),
                });
            }
        })
    }

    /// Answers a read of `count` items from `start`: exception 3 for a count Modbus forbids,
    /// exception 2 when any address of the block is outside the map.
    pub fn read(
        &mut self,
        now: Instant,
        area: Area,
        start: u16,
        count: u16,
        fx: &Effects,
    ) -> Result<Data, Exception> {
        let max = if area.is_bit() {
            MAX_READ_BITS
        } else {
            MAX_READ_WORDS
        };
        if count == 0 || count > max {
            return Err(Exception::ILLEGAL_DATA_VALUE);
        }
        let end = u32::from(start) + u32::from(count);
        if end > 0x1_0000 {
            return Err(Exception::ILLEGAL_DATA_ADDRESS);
        }
        let addrs = start..=(start + (count - 1));
        if area.is_bit() {
            let bits: Option<Vec<bool>> = addrs.map(|a| self.bit(now, area, a, fx)).collect();
            bits.map(Data::Bits).ok_or(Exception::ILLEGAL_DATA_ADDRESS)
        } else {
            let words: Option<Vec<u16>> = addrs.map(|a| self.word(now, area, a)).collect();
            words
                .map(Data::Words)
                .ok_or(Exception::ILLEGAL_DATA_ADDRESS)
        }
    }

    fn bit(&mut self, now: Instant, area: Area, addr: u16, fx: &Effects) -> Option<bool> {
        match self {
            Plant::Relay(m) => m.bit(now, area, addr, fx),
            Plant::Stepper(m) => m.bit(now, area, addr),
            Plant::Heater(m) => m.bit(area, addr),
            Plant::Sensor(_) => None,
        }
    }

    fn word(&mut self, now: Instant, area: Area, addr: u16) -> Option<u16> {
        match self {
            Plant::Relay(_) => None,
            Plant::Stepper(m) => m.word(now, area, addr),
            Plant::Heater(m) => m.word(now, area, addr),
            Plant::Sensor(m) => m.word(area, addr),
        }
    }

    /// Applies a write, all or nothing: exception 3 for an empty block, exception 2 when any
    /// address is not writable on this model, exception 3 for a value the model refuses.
    pub fn write(&mut self, now: Instant, write: &Write) -> Result<(), Exception> {
        let len = match write {
            Write::Coils { values, .. } => values.len(),
            Write::Registers { values, .. } => values.len(),
        };
        if len == 0 || len > 0x7B0 {
            return Err(Exception::ILLEGAL_DATA_VALUE);
        }
        match self {
            Plant::Relay(m) => m.write(now, write),
            Plant::Stepper(m) => m.write(now, write),
            Plant::Heater(m) => m.write(now, write),
            Plant::Sensor(_) => Err(Exception::ILLEGAL_DATA_ADDRESS),
        }
    }

    /// Power is lost: coils drop, motion stops where it is.
    pub fn outputs_off(&mut self, now: Instant) {
        match self {
            Plant::Relay(m) => m.set_coil(now, false),
            Plant::Stepper(m) => m.stop(now),
            Plant::Heater(m) => m.set_enable(now, false),
            Plant::Sensor(_) => {}
        }
    }

    /// The controller starts afresh: outputs off, stepper fault cleared and target = position.
    pub fn after_reboot(&mut self, now: Instant) {
        self.outputs_off(now);
        if let Plant::Stepper(m) = self {
            m.reset_after_boot(now);
        }
    }

    /// A stall without a position strikes: the axis stops where it is, fault active.
    pub fn stall_now(&mut self, now: Instant) {
        if let Plant::Stepper(m) = self {
            m.stall_now(now);
        }
    }

    /// The faults in force changed: brownout and obstacles alter the physics from `now`.
    pub fn set_effects(&mut self, now: Instant, fx: &Effects) {
        match self {
            Plant::Relay(m) => m.set_brownout(now, fx.brownout),
            Plant::Stepper(m) => m.set_obstacles(now, &fx.obstacles),
            Plant::Heater(_) | Plant::Sensor(_) => {}
        }
    }

    /// The physical truth at `now`.
    pub fn peek(&self, now: Instant) -> SimState {
        match self {
            Plant::Relay(m) => m.peek(now),
            Plant::Stepper(m) => m.peek(now),
            Plant::Heater(m) => m.peek(now),
            Plant::Sensor(m) => m.peek(),
        }
    }
}

/// Whether `write` touches only addresses in `valid` of its own area `area`.
pub(crate) fn within(write: &Write, area: Area, valid: std::ops::Range<u16>) -> bool {
    let len = match write {
        Write::Coils { values, .. } => values.len(),
        Write::Registers { values, .. } => values.len(),
    };
    let start = usize::from(write.start());
    write.area() == area
        && start >= usize::from(valid.start)
        && start + len <= usize::from(valid.end)
}

/// A number in tenths as an i16 register, saturated at the register's limits (the models keep
/// their values inside those limits; saturation only guards the conversion).
pub(crate) fn tenths(v: f64) -> u16 {
    let raw = (v * 10.0)
        .round()
        .clamp(f64::from(i16::MIN), f64::from(i16::MAX)) as i16;
    raw as u16
}
