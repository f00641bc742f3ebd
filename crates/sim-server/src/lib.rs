//! closedloop's simulated devices as their own process, over real protocols: what
//! `closedloop sim PLANT` runs, so that one plant file can be served by `closedloop serve`
//! through `modbus-tcp` drivers across sockets, with the same physics and faults as in-process.
//!
//! - [`ModbusServer`] serves [`closedloop_sim::SimDevice`]s as Modbus TCP units (FC01–06, 15,
//!   16); its module doc says how silence, exceptions, `crc_error` and unknown units look on the
//!   wire.
//! - [`bind_plant`] binds one listener per distinct `[device.sim] listen` address of a plant.
//! - [`ControlServer`] and [`control::send`] inject and clear faults at run time over a
//!   loopback line protocol (see [`control`]).
//! - [`codec`] is the Modbus TCP framing, pure and unit-tested byte by byte.
//!
//! MQTT (`mqtt-relay`) is not served yet: [`bind_plant`] reports such devices as skipped.

#![warn(missing_docs)]

pub mod codec;
pub mod control;
pub mod modbus;
mod plant;

pub use control::{ControlCommand, ControlError, ControlServer};
pub use modbus::{MAX_CONNECTIONS, MAX_IN_FLIGHT, ModbusServer, Units};
pub use plant::{BindError, BoundPlant, DEFAULT_UNIT, Served, Skipped, bind_plant};
