//! closedloop's simulated devices as their own process, over real protocols: what
//! `closedloop sim PLANT` runs, so that one plant file can be served by `closedloop serve`
//! through `modbus-tcp`, `mqtt`, `can` and `opcua` drivers across sockets and ptys, with the same
//! physics and faults as in-process.
//!
//! - [`ModbusServer`] serves [`closedloop_sim::SimDevice`]s as Modbus TCP units (FC01–06, 15,
//!   16); its module doc says how silence, exceptions, `crc_error` and unknown units look on the
//!   wire.
//! - [`bind_plant`] binds one listener per distinct `[device.sim] listen` address of a plant, and
//!   starts each `mqtt-relay` ([`MqttRelay`]) as a client of its `[device.sim] broker`
//!   ([`mqtt_relay`] says how each fault looks over MQTT).
//! - [`start_buses`] runs simulated CAN nodes ([`CanNode`]) on simulated slcan adapters reached
//!   through a pty, one [`SimBus`] per `[device.sim] can.bus` (the [`can_node`] module doc says
//!   how each fault looks on the bus); [`bind_plant`] starts them for tables with `can`.
//! - [`bind_plant`] serves tables with `opcua` through a simulated OPC UA server
//!   ([`opcua_sim::SimServer`]), one per distinct address; [`opcua_sim`] lists the nodes
//!   (`ns=2;s={device}.{Name}`) and how each fault looks over OPC UA.
//! - [`Simulated`] is one such device, Modbus unit, MQTT relay, CAN node or OPC UA device, as the
//!   control endpoint sees it.
//! - [`ControlServer`] and [`control::send`] inject and clear faults at run time over a
//!   loopback line protocol (see [`control`]).
//! - [`WriteLog`] records every write a Modbus unit receives and the client it came from
//!   (`closedloop sim --write-log`): who wrote, beside what the registers hold.
//! - [`codec`] is the Modbus TCP framing (MBAP) around closedloop-modbus's PDU codec, the one the
//!   driver uses; pure and unit-tested byte by byte.
//!
//! Every simulated protocol face lives here, so the driver crates (closedloop-mqtt,
//! closedloop-opcua, closedloop-can, closedloop-modbus) depend on neither the simulator nor the
//! plant: they only speak their protocol.

#![warn(missing_docs)]

pub mod can_node;
pub mod codec;
pub mod control;
pub mod modbus;
pub mod mqtt_relay;
pub mod opcua_sim;
mod plant;
mod simulated;
pub mod write_log;

pub use can_node::{
    BUS_FANOUT, BUS_QUEUE, CanNode, CanNodeSpec, CanSimError, SimBus, link_path, start_buses,
};
/// The CAN crate the nodes speak through: whoever talks to a [`SimBus`] needs its
/// [`CanBus`](closedloop_can::CanBus) and [`Dbc`](closedloop_can::Dbc).
pub use closedloop_can as can;
/// The MQTT crate the relays run on: whoever observes a [`MqttRelay`] needs its client.
pub use closedloop_mqtt as mqtt;
/// The OPC UA client crate: whoever talks to a simulated OPC UA server
/// ([`opcua_sim::SimServer`]) needs its [`OpcuaClient`](closedloop_opcua::OpcuaClient).
pub use closedloop_opcua as opcua;
pub use control::{ControlCommand, ControlError, ControlServer};
pub use modbus::{MAX_CONNECTIONS, MAX_IN_FLIGHT, ModbusServer, Units};
pub use mqtt_relay::{MqttRelay, Presence, RelayError};
pub use opcua_sim::ServedOpcua;
pub use plant::{
    BindError, BoundPlant, DEFAULT_UNIT, RELAY_CONNECT_WAIT, Served, ServedCanNode, ServedRelay,
    Skipped, bind_plant,
};
pub use simulated::Simulated;
pub use write_log::WriteLog;
