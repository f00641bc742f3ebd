//! `[device.sim]`: how `closedloop sim` serves a device's simulated counterpart.

use closedloop_sim::SimConfig;
use std::path::PathBuf;

/// `[device.sim]`: the simulated counterpart `closedloop sim` serves over real protocols.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSim {
    /// Model, options and faults.
    pub config: SimConfig,
    /// Modbus TCP listen address (`127.0.0.1:PORT`).
    pub listen: Option<String>,
    /// Modbus unit id it answers as.
    pub unit: Option<u8>,
    /// Broker of an `mqtt-relay`.
    pub broker: Option<String>,
    /// The CAN node `closedloop sim` runs for it on a simulated slcan bus.
    pub can: Option<SimCan>,
    /// Where `closedloop sim` serves it as OPC UA variables and methods (`127.0.0.1:PORT`);
    /// devices naming the same address share one server.
    pub opcua: Option<String>,
}

/// `[device.sim] can = { ... }`: a simulated CAN node. Nodes naming the same `bus` share one
/// simulated slcan adapter (one pty pair), as devices on one real bus share one adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimCan {
    /// The bus it is on.
    pub bus: String,
    /// The DBC file describing its frames (absolute).
    pub dbc: PathBuf,
    /// The message the node sends its state in, every `period_ms`.
    pub status: String,
    /// The message the node takes its commands from.
    pub command: String,
    /// Period of the status message.
    pub period_ms: u64,
}
