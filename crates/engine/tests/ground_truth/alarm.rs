//! A standing alarm in a case: `[[alarm]] HOT` on one device's feedback signal (a relay's
//! contact, a stepper's position past a level, a heater's temperature past a level), blocking
//! another device; the block its signal is read from (which `Op::Refuse` makes answer exception
//! 4); and whether its `when` holds physically in a device's state, for the checks.

use super::spec::{DeviceSpec, Model, device_id};
use closedloop_contract::Area;
use closedloop_sim::SimState;

/// The alarm of a case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlarmSpec {
    /// The device its `when` reads.
    pub device: usize,
    /// The device it blocks.
    pub blocks: usize,
    /// Where its level lies in the device's range (0–1): a stepper's travel, a heater's span.
    pub level: f64,
}

/// The block a model's feedback signal is read from: a relay's contact, a stepper's position,
/// a heater's temperature.
pub fn feedback_block(model: &Model) -> (Area, u16) {
    match model {
        Model::Relay { .. } => (Area::DiscreteInput, 0),
        Model::Stepper { .. } => (Area::Holding, 2),
        Model::Heater { .. } => (Area::Input, 0),
    }
}

impl AlarmSpec {
    /// The level `when` compares with, for steppers and heaters.
    fn threshold(&self, devices: &[DeviceSpec]) -> f64 {
        match devices[self.device].model {
            Model::Relay { .. } => 0.5,
            Model::Stepper { travel, .. } => {
                (travel[0] + self.level * (travel[1] - travel[0])).round()
            }
            Model::Heater { ambient_c, .. } => (ambient_c + 5.0 + self.level * 40.0).round(),
        }
    }

    /// Its `[[alarm]]` table.
    pub fn toml(&self, devices: &[DeviceSpec]) -> String {
        let id = device_id(devices, self.device);
        let t = self.threshold(devices);
        let when = match devices[self.device].model {
            Model::Relay { .. } => format!("devices.{id}.contact"),
            Model::Stepper { .. } => format!("devices.{id}.position_mm > {t:?}"),
            Model::Heater { .. } => format!("devices.{id}.temperature_c > {t:?}"),
        };
        format!(
            "\n[[alarm]]\nname = \"HOT\"\nwhen = \"{when}\"\nblocks = [\"{}\"]\ndescription = \"Too hot.\"\n",
            device_id(devices, self.blocks)
        )
    }

    /// The block its signal is read from.
    pub fn block(&self, devices: &[DeviceSpec]) -> (Area, u16) {
        feedback_block(&devices[self.device].model)
    }

    /// Whether `when` holds physically in `state` (`None` when the state does not say).
    pub fn holds(&self, devices: &[DeviceSpec], state: &SimState) -> Option<bool> {
        let t = self.threshold(devices);
        match devices[self.device].model {
            Model::Relay { .. } => state.contact,
            // As the registers hold them: 0.01 mm, 0.1 °C, rounded (27.04 °C reads 27.0,
            // which `> 27.0` rightly finds clear).
            Model::Stepper { .. } => state.position_mm.map(|p| (p * 100.0).round() / 100.0 > t),
            Model::Heater { .. } => state.temperature_c.map(|c| (c * 10.0).round() / 10.0 > t),
        }
    }
}
