//! A link for every device of a plant: the simulator, Modbus, MQTT, OPC UA and CAN behind the
//! one seam of `closedloop-link`, so that the engine knows no protocol.
//!
//! [`build_drivers`] maps the plant's driver tables (addresses already typed by the plant loader)
//! to a [`Connection`] per device and checks what one device cannot know alone: devices sharing a
//! broker, an endpoint or a bus must agree on how it is reached, a CAN device's messages must be
//! in its DBC. `closedloop check` stops there. [`Drivers::open`] then opens what devices share and
//! makes one link per device:
//!
//! - [`registers::RegisterLink`]: a register [`closedloop_contract::Driver`] (the in-process
//!   simulator, Modbus TCP and RTU) read by a poller;
//! - [`mqtt::MqttLink`]: a client of a broker connection, fed by a listener;
//! - [`opcua::OpcuaLink`]: nodes of an OPC UA session, monitored and read on request;
//! - [`can::CanLink`]: a node on a CAN bus port, its frames decoded through the device's DBC.
//!
//! Each link encodes its own write entries (register words, a payload, a node write or method
//! call, a CAN frame) and says what a failed write means in the contract's words through its
//! protocol crate. [`bridge`] holds the read-only tools of one protocol each (`can_signals`,
//! `can_decode`, `opcua_browse`, `opcua_read`).
//!
//! Every link keeps a `base::Base`: the device's declaration, its `SnapshotTx`, the clock its
//! samples are stamped with (one for all links, which `Engine::start` keeps, so the journal's
//! times and the samples' agree), when reading began, and its request timeout. Devices on one
//! broker must agree on `client_id` and credentials: one connection is one identity; gateways
//! sharing a journal connect as `<client_id>-<instance>` (`Drivers::per_instance_client_ids`). An
//! MQTT device stays `unknown`, not offline, until its broker connection's first attempt has
//! ended (`mqtt::broker_down`). A CAN device's values and signs of life come only from the frames
//! of the messages its signals are in; a CAN write entry with `cycle_ms` answers `repeat_every`,
//! and the engine re-sends it while the command runs. `bridge::opcua_browse` pages hold
//! [`bridge::MAX_BROWSE`] nodes.

mod base;
pub mod bridge;
pub mod can;
mod connections;
pub mod mqtt;
pub mod opcua;
mod open;
pub mod registers;

pub use connections::{Connection, Drivers, build_drivers};

use closedloop_contract::ErrorCode;
use closedloop_link::{Encoded, WriteError};
use thiserror::Error;

/// Why a plant's devices could not be connected.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A device has no driver.
    #[error("device {0:?} has no driver")]
    NoDriver(String),
    /// A driver could not be set up (a bad address, a serial port opened twice with other settings).
    #[error("device {device:?}: {message}")]
    Driver {
        /// Device id.
        device: String,
        /// What is wrong.
        message: String,
    },
    /// A simulated device's options are invalid.
    #[error("device {device:?}: {message}")]
    Sim {
        /// Device id.
        device: String,
        /// What is wrong.
        message: String,
    },
}

/// A request handed to a link that did not encode it: nothing was sent.
pub(crate) fn misfit(request: &dyn Encoded, device: &str) -> WriteError {
    WriteError::refused(
        ErrorCode::BusNak,
        format!("{request} does not fit the driver of {device}"),
    )
}
