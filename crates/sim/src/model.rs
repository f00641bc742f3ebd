//! The validated form of a sim table: the model with every option resolved, its faults, and the
//! device-wide settings. Produced only by [`crate::SimConfig::validate`], so holding one means
//! every value is one the simulator can honour.

use crate::faults::FaultSpec;

/// The engine's request timeout when the table gives none.
pub const DEFAULT_TIMEOUT_MS: u64 = 500;
/// The PRNG seed when the table gives none: fixed, so runs are reproducible by default.
pub const DEFAULT_SEED: u64 = 0x00C1_05ED_100B_5EED;

/// A sim table that passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidSim {
    /// The model with all its options resolved (defaults filled in).
    pub model: Model,
    /// The faults, in the order written.
    pub faults: Vec<FaultSpec>,
    /// The engine's request timeout for this device.
    pub timeout_ms: u64,
    /// Seed of the deterministic pseudo-random source (noise, drop_rate).
    pub seed: u64,
}

/// A simulated model with its options.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// A relay with an optional contact feedback.
    Relay(RelayOptions),
    /// A linear axis with an encoder and a fault output.
    Stepper(StepperOptions),
    /// A heater with a temperature sensor.
    Heater(HeaterOptions),
    /// A constant sensor with optional noise.
    Sensor(SensorOptions),
    /// An MQTT relay; runs only in `closedloop sim`, never in-process.
    MqttRelay(MqttRelayOptions),
}

impl Model {
    /// The plant-file name of the model.
    pub fn name(&self) -> &'static str {
        match self {
            Model::Relay(_) => "relay",
            Model::Stepper(_) => "stepper",
            Model::Heater(_) => "heater",
            Model::Sensor(_) => "sensor",
            Model::MqttRelay(_) => "mqtt-relay",
        }
    }
}

/// Options of `relay`.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayOptions {
    /// Whether discrete input 0 (the contact) exists.
    pub feedback: bool,
    /// How long the contact takes to follow the coil.
    pub pull_in_ms: u64,
}

/// Options of `stepper`.
#[derive(Debug, Clone, PartialEq)]
pub struct StepperOptions {
    /// Travel speed, > 0.
    pub speed_mm_s: f64,
    /// `[min, max]` with min < max; targets outside are refused with exception 3.
    pub travel_mm: [f64; 2],
}

/// Options of `heater`.
#[derive(Debug, Clone, PartialEq)]
pub struct HeaterOptions {
    /// Heating rate while enabled and below setpoint, > 0.
    pub rate_c_per_s: f64,
    /// Cooling rate toward ambient, > 0.
    pub cool_c_per_s: f64,
    /// Start temperature and floor of cooling.
    pub ambient_c: f64,
}

/// Options of `sensor`.
#[derive(Debug, Clone, PartialEq)]
pub struct SensorOptions {
    /// The constant reading.
    pub value: f64,
    /// Peak amplitude of uniform noise, >= 0.
    pub noise: f64,
}

/// Options of `mqtt-relay`.
#[derive(Debug, Clone, PartialEq)]
pub struct MqttRelayOptions {
    /// Topic prefix (`{prefix}/set`, `{prefix}/state`, `{prefix}/status`).
    pub prefix: String,
    /// Period of the state heartbeat.
    pub heartbeat_s: f64,
    /// How long the state takes to follow a set.
    pub pull_in_ms: u64,
}
