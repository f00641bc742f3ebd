//! `heater`: holding 0 setpoint and input 0 temperature, both i16 in 0.1 °C; coil 0 enable.
//!
//! A heater is the slow case: a command that is correctly "running" for many seconds, which the
//! engine must neither fail early nor report done before the temperature says so.

use super::{SimState, tenths, within};
use crate::model::HeaterOptions;
use closedloop_contract::{Area, Exception, Write};
use tokio::time::Instant;

/// A heater with a thermostat, evaluated in closed form from its last change.
///
/// # Invariants
/// The temperature never goes below `ambient_c` (it starts there; heating only raises it;
/// cooling stops at the ambient or, while enabled, at the setpoint if that is higher).
#[derive(Debug)]
pub(crate) struct Heater {
    opts: HeaterOptions,
    /// Coil 0.
    enable: bool,
    /// Holding 0, in 0.1 °C.
    setpoint_raw: i16,
    /// Temperature at `t0`.
    temp0: f64,
    /// The last change of enable or setpoint.
    t0: Instant,
}

impl Heater {
    /// A disabled heater at ambient, with its setpoint at ambient.
    pub fn new(opts: HeaterOptions, now: Instant) -> Heater {
        let temp0 = opts.ambient_c;
        let setpoint_raw = tenths(temp0) as i16;
        Heater {
            opts,
            enable: false,
            setpoint_raw,
            temp0,
            t0: now,
        }
    }

    fn setpoint(&self) -> f64 {
        f64::from(self.setpoint_raw) / 10.0
    }

    /// The temperature at `t`: heat toward the setpoint at `rate_c_per_s` while enabled and
    /// below it, hold there; otherwise cool at `cool_c_per_s` toward the ambient (or toward the
    /// setpoint, if enabled and it is above the ambient), never below.
    pub fn temperature(&self, t: Instant) -> f64 {
        let dt = t.saturating_duration_since(self.t0).as_secs_f64();
        let sp = self.setpoint();
        if self.enable && self.temp0 < sp {
            (self.temp0 + self.opts.rate_c_per_s * dt).min(sp)
        } else {
            let floor = if self.enable {
                sp.max(self.opts.ambient_c)
            } else {
                self.opts.ambient_c
            };
            let floor = floor.min(self.temp0);
            (self.temp0 - self.opts.cool_c_per_s * dt).max(floor)
        }
    }

    /// Starts a new closed-form piece at `now`.
    fn reanchor(&mut self, now: Instant) {
        self.temp0 = self.temperature(now);
        self.t0 = now;
    }

    /// Coil 0; also de-energised by power loss.
    pub fn set_enable(&mut self, now: Instant, on: bool) {
        self.reanchor(now);
        self.enable = on;
    }

    /// Coil 0.
    pub fn bit(&self, area: Area, addr: u16) -> Option<bool> {
        (area == Area::Coil && addr == 0).then_some(self.enable)
    }

    /// Holding 0 setpoint; input 0 temperature.
    pub fn word(&self, now: Instant, area: Area, addr: u16) -> Option<u16> {
        match (area, addr) {
            (Area::Holding, 0) => Some(self.setpoint_raw as u16),
            (Area::Input, 0) => Some(tenths(self.temperature(now))),
            _ => None,
        }
    }

    /// Coil 0 and holding 0 are writable.
    pub fn write(&mut self, now: Instant, write: &Write) -> Result<(), Exception> {
        match write {
            Write::Coils { values, .. } if within(write, Area::Coil, 0..1) => {
                self.set_enable(now, values[0]);
                Ok(())
            }
            Write::Registers { values, .. } if within(write, Area::Holding, 0..1) => {
                self.reanchor(now);
                self.setpoint_raw = values[0] as i16;
                Ok(())
            }
            _ => Err(Exception::ILLEGAL_DATA_ADDRESS),
        }
    }

    /// Enable, temperature and setpoint.
    pub fn peek(&self, now: Instant) -> SimState {
        SimState {
            model: "heater",
            coils: vec![self.enable],
            temperature_c: Some(self.temperature(now)),
            setpoint_c: Some(self.setpoint()),
            ..SimState::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Duration;

    fn heater(now: Instant) -> Heater {
        Heater::new(
            HeaterOptions {
                rate_c_per_s: 2.0,
                cool_c_per_s: 0.5,
                ambient_c: 25.0,
            },
            now,
        )
    }

    #[test]
    fn lowering_the_setpoint_while_enabled_cools_to_it_and_holds() {
        let t0 = Instant::now();
        let mut h = heater(t0);
        h.setpoint_raw = 600;
        h.set_enable(t0, true);
        let t1 = t0 + Duration::from_secs(20);
        assert_eq!(h.temperature(t1), 60.0);
        h.reanchor(t1);
        h.setpoint_raw = 500;
        assert_eq!(h.temperature(t1 + Duration::from_secs(10)), 55.0);
        assert_eq!(h.temperature(t1 + Duration::from_secs(100)), 50.0);
    }
}
