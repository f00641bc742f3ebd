//! [`BindError`]: every way a plant's `[device.sim]` tables can fail to be served, each naming
//! the device (or the address) and the key to fix.

use crate::can_node::CanSimError;
use crate::opcua_sim;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use thiserror::Error;

/// Why a plant's simulated devices cannot be served.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BindError {
    /// The `[device.sim]` table's model or options are invalid.
    #[error("device {device:?}: [device.sim]: {message}")]
    Sim {
        /// Device id.
        device: String,
        /// What is wrong.
        message: String,
    },
    /// `listen` is not an `ip:port` address.
    #[error(
        "device {device:?}: sim.listen = {listen:?} is not an ip:port address; write e.g. \"127.0.0.1:1502\""
    )]
    Listen {
        /// Device id.
        device: String,
        /// As written.
        listen: String,
    },
    /// Two devices answer as the same unit behind one address.
    #[error(
        "devices {first:?} and {second:?} both answer as unit {unit} on {listen}: give each its own sim.unit"
    )]
    DuplicateUnit {
        /// The shared address.
        listen: SocketAddr,
        /// The unit id.
        unit: u8,
        /// The device that had it first.
        first: String,
        /// The device that wants it too.
        second: String,
    },
    /// `sim.broker` of an `mqtt-relay` is not a broker URL the relay can use.
    #[error("device {device:?}: sim.broker = {broker:?}: {source}")]
    Broker {
        /// Device id.
        device: String,
        /// As written.
        broker: String,
        /// What is wrong with it.
        source: closedloop_mqtt::Error,
    },
    /// An `mqtt-relay` did not get a connection to its broker in time.
    #[error(
        "device {device:?}: no connection to the broker sim.broker = {broker:?} within {waited:?}: \
         start the broker, or fix sim.broker"
    )]
    Unreachable {
        /// Device id.
        device: String,
        /// As written.
        broker: String,
        /// How long it was given.
        waited: Duration,
    },
    /// A table gives `can` together with `listen` or `broker`.
    #[error(
        "device {device:?}: [device.sim] gives `can` and `{other}`: a simulated device is either \
         a CAN node (`can`) or served over {protocol} (`{other}`); remove one"
    )]
    CanAndOther {
        /// Device id.
        device: String,
        /// `listen` or `broker`.
        other: &'static str,
        /// `Modbus TCP` or `MQTT`.
        protocol: &'static str,
    },
    /// A table gives `opcua` together with `listen`, `broker` or `can`.
    #[error(
        "device {device:?}: [device.sim] gives `opcua` and `{other}`: a simulated device is served \
         either over OPC UA (`opcua`) or over {protocol} (`{other}`); remove one"
    )]
    OpcuaAndOther {
        /// Device id.
        device: String,
        /// `listen`, `broker` or `can`.
        other: &'static str,
        /// `Modbus TCP`, `MQTT` or `CAN`.
        protocol: &'static str,
    },
    /// `sim.opcua` is not an `ip:port` address.
    #[error(
        "device {device:?}: sim.opcua = {opcua:?} is not an ip:port address; write e.g. \"127.0.0.1:4840\""
    )]
    OpcuaListen {
        /// Device id.
        device: String,
        /// As written.
        opcua: String,
    },
    /// The simulated OPC UA server refused its devices or did not start.
    #[error("cannot serve OPC UA on {listen} (for {devices}): {source}")]
    Opcua {
        /// The address.
        listen: SocketAddr,
        /// The devices meant to be served there.
        devices: String,
        /// Why.
        source: opcua_sim::SimError,
    },
    /// A CAN node could not be started.
    #[error(transparent)]
    Can(#[from] CanSimError),
    /// The address could not be bound (in use, not local, no permission).
    #[error("cannot listen on {listen} (for {devices}): {source}")]
    Bind {
        /// The address.
        listen: SocketAddr,
        /// The devices meant to be served there.
        devices: String,
        /// Why.
        source: io::Error,
    },
}
