//! The plant file's `driver = { kind = "sim", model = "...", ... }` table, as typed options.
//!
//! The table is flat (model options sit beside `model`), so it is read into [`SimConfig`] with
//! every option optional and then checked by [`SimConfig::validate`], which knows which options
//! belong to which model and names the offending key in its error.

use serde::Deserialize;

/// The options of a simulated device, exactly as written in the plant file (without `kind`).
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// `relay`, `stepper`, `heater`, `sensor` or `mqtt-relay`.
    pub model: String,
    /// relay: whether discrete input 0 (the contact) exists. Default true.
    pub feedback: Option<bool>,
    /// relay: how long the contact takes to follow the coil. Default 10 ms.
    pub pull_in_ms: Option<u64>,
    /// stepper: travel speed. Default 100 mm/s.
    pub speed_mm_s: Option<f64>,
    /// stepper: `[min, max]` travel; targets outside are refused with exception 3. Default [0, 300].
    pub travel_mm: Option<[f64; 2]>,
    /// heater: heating rate while enabled and below setpoint. Default 2 °C/s.
    pub rate_c_per_s: Option<f64>,
    /// heater: cooling rate toward ambient. Default 0.5 °C/s.
    pub cool_c_per_s: Option<f64>,
    /// heater: ambient temperature, the floor of cooling and the start value. Default 25 °C.
    pub ambient_c: Option<f64>,
    /// sensor: the constant value. Default 0.
    pub value: Option<f64>,
    /// sensor: peak amplitude of uniform noise added to each read. Default 0.
    pub noise: Option<f64>,
    /// mqtt-relay: topic prefix.
    pub prefix: Option<String>,
    /// mqtt-relay: heartbeat period in seconds. Default 1.
    pub heartbeat_s: Option<f64>,
    /// The engine's request timeout for this device. Default 500 ms.
    pub timeout_ms: Option<u64>,
    /// Seed of the deterministic pseudo-random source used by `noise` and `drop_rate`.
    pub seed: Option<u64>,
    /// Faults present from the start (or striking `after_ms` after the first actuating write).
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
}

/// One entry of `faults = [...]`, as written. Checked into a [`crate::Fault`] by validation.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// `stall`, `brownout`, `swapped_contacts`, `power_off`, `zombie`, `nak`, `reboot`,
    /// `latency_ms`, `drop_rate` or `crc_error`.
    pub kind: String,
    /// Strike this long after the device's first actuating write instead of from the start.
    pub after_ms: Option<u64>,
    /// stall: the position where the axis stops (without it: wherever the axis is when it strikes).
    pub at_mm: Option<f64>,
    /// reboot: how long the device stays silent.
    pub down_ms: Option<u64>,
    /// latency_ms: the delay added to every answer.
    pub ms: Option<u64>,
    /// drop_rate: probability (0..=1) that a request is lost.
    pub p: Option<f64>,
}

impl SimConfig {
    /// The model-specific options present in this table, by plant-file key.
    ///
    /// Validation compares these against the options the model takes, so that an option written
    /// for another model (`speed_mm_s` on a relay) is refused by name instead of being ignored.
    pub fn given_options(&self) -> Vec<&'static str> {
        let given = [
            ("feedback", self.feedback.is_some()),
            ("pull_in_ms", self.pull_in_ms.is_some()),
            ("speed_mm_s", self.speed_mm_s.is_some()),
            ("travel_mm", self.travel_mm.is_some()),
            ("rate_c_per_s", self.rate_c_per_s.is_some()),
            ("cool_c_per_s", self.cool_c_per_s.is_some()),
            ("ambient_c", self.ambient_c.is_some()),
            ("value", self.value.is_some()),
            ("noise", self.noise.is_some()),
            ("prefix", self.prefix.is_some()),
            ("heartbeat_s", self.heartbeat_s.is_some()),
        ];
        given
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| key)
            .collect()
    }
}

impl FaultConfig {
    /// The kind-specific options present in this entry (`at_mm`, `down_ms`, `ms`, `p`).
    ///
    /// `after_ms` is not listed: every fault kind takes it.
    pub fn given_options(&self) -> Vec<&'static str> {
        let given = [
            ("at_mm", self.at_mm.is_some()),
            ("down_ms", self.down_ms.is_some()),
            ("ms", self.ms.is_some()),
            ("p", self.p.is_some()),
        ];
        given
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(key, _)| key)
            .collect()
    }
}
