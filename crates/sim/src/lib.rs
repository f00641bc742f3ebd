//! closedloop's simulator: relays, steppers, heaters and sensors that take time, can fail, and
//! answer at register level through the [`closedloop_contract::Driver`] trait.
//!
//! The simulator exists so that every promise closedloop makes — never "done" before the hardware
//! confirmed it — can be tested without hardware, including the ways hardware lies: a contact
//! that never closes, an axis that stalls at 70 mm, a unit that goes silent mid-command.
//!
//! - [`SimConfig`] is the plant file's `driver = { kind = "sim", ... }` table as written;
//!   [`SimConfig::validate`] turns it into a [`ValidSim`] or a [`SimConfigError`] naming the key.
//! - [`SimDevice`] runs one device in-process. Its register maps are those of docs/simulator.md,
//!   the same as `closedloop sim` serves over Modbus TCP.
//! - [`Fault`] / [`FaultSpec`] describe what goes wrong and when; [`SimDevice::inject`] and
//!   [`SimDevice::clear`] change it at run time; [`SimDevice::peek`] shows the physical truth.
//! - [`Schedule`] keeps the time of a device's faults (`after_ms`, a reboot's `down_ms`); it is
//!   public so that simulated devices outside this crate (the `mqtt-relay`) follow the same rules.
//!
//! Time is `tokio::time::Instant`, read at each request; there are no background tasks, so under
//! `tokio::time::pause()` everything is deterministic:
//!
//! ```
//! use closedloop_contract::{Area, Data, Driver, Write};
//! use closedloop_sim::{SimConfig, SimDevice};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let cfg = SimConfig { model: "relay".into(), ..SimConfig::default() };
//! let lamp = SimDevice::from_config(&cfg).expect("a valid table");
//! let on = Write::Coils { start: 0, values: vec![true] };
//! assert_eq!(lamp.write(on).await, Ok(Ok(())));
//! // Commanded, not yet done: the contact follows after pull_in_ms (10 ms).
//! assert_eq!(lamp.read(Area::DiscreteInput, 0, 1).await, Ok(Ok(Data::Bits(vec![false]))));
//! tokio::time::advance(std::time::Duration::from_millis(10)).await;
//! assert_eq!(lamp.read(Area::DiscreteInput, 0, 1).await, Ok(Ok(Data::Bits(vec![true]))));
//! # }
//! ```

#![warn(missing_docs)]

pub mod config;
mod device;
mod error;
mod faults;
mod model;
mod models;
mod rng;
mod validate;

pub use config::{FaultConfig, SimConfig};
pub use device::SimDevice;
pub use error::SimConfigError;
pub use faults::{Due, Fault, FaultKind, FaultSpec, Schedule, UnknownFaultKind};
pub use model::{
    DEFAULT_SEED, DEFAULT_TIMEOUT_MS, HeaterOptions, Model, MqttRelayOptions, RelayOptions,
    SensorOptions, StepperOptions, ValidSim,
};
pub use models::SimState;
