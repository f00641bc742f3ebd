//! A plant file's `[device.sim]` tables, bound as Modbus TCP listeners, started as MQTT relays,
//! CAN nodes and OPC UA servers: what `closedloop sim PLANT` runs.
//!
//! Devices with the same `listen` address share one listener, each as its own unit (`unit`,
//! default 1). `listen = "127.0.0.1:0"` picks a free port: every device that writes exactly that
//! address shares the one listener it picks.
//!
//! An `mqtt-relay` runs as a client of the broker its table names (`broker = "mqtt://host:port"`),
//! with the client id `closedloop-sim-{device}` (so it never takes over the engine's session);
//! [`bind_plant`] returns once each relay is connected (or held off by a fault), waiting at most
//! [`RELAY_CONNECT_WAIT`]. Its faults are checked like any sim table's, and those with no MQTT
//! meaning (`nak`, `crc_error`, `stall`) are refused by key.
//!
//! A table with `can = { bus, dbc, status, command, period_ms }` runs as a CAN node on the
//! simulated bus of that name (one pty per bus: [`crate::can_node`]); it takes neither `listen`
//! nor `broker`.
//!
//! A table with `opcua = "127.0.0.1:PORT"` is served by a simulated OPC UA server on that
//! address, shared by every device naming the same one (`127.0.0.1:0`: one free port for all who
//! write exactly that); it takes none of `listen`, `broker` and `can` ([`crate::opcua_sim`] has
//! the nodes and how each fault looks).
//!
//! Tables without `listen` (Modbus), `broker` (`mqtt-relay`), `can` or `opcua` are not run and
//! are reported in [`BoundPlant::skipped`].

mod error;
mod tables;

pub use error::BindError;

use crate::Simulated;
use crate::can_node::{CanNodeSpec, SimBus, start_buses};
use crate::modbus::ModbusServer;
use crate::mqtt_relay::Presence;
use crate::opcua_sim::{self, OpcuaServers, ServedOpcua};
use crate::write_log::WriteLog;
use closedloop_plant::Plant;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tables::Tables;

/// The unit id of a `[device.sim]` table that gives none (as the `modbus-tcp` driver's default).
pub const DEFAULT_UNIT: u8 = 1;
/// How long [`bind_plant`] waits, in all, for its MQTT relays to connect to their brokers.
pub const RELAY_CONNECT_WAIT: Duration = Duration::from_secs(5);

/// One device served as a Modbus unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Device id.
    pub device: String,
    /// Its unit id.
    pub unit: u8,
    /// The address actually bound (the real port when the file says 0).
    pub addr: SocketAddr,
}

/// One `mqtt-relay` running as a client of its broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRelay {
    /// Device id.
    pub device: String,
    /// Its topic prefix (`{prefix}/set`, `/state`, `/status`).
    pub prefix: String,
    /// The broker, as `sim.broker` names it.
    pub broker: String,
}

/// One CAN node running on a simulated bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedCanNode {
    /// Device id.
    pub device: String,
    /// The bus it is on (`[device.sim] can.bus`).
    pub bus: String,
    /// What a `can` driver names to reach that bus: `slcan:/dev/pts/N`.
    pub interface: String,
}

/// A device with a `[device.sim]` table that is not served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Device id.
    pub device: String,
    /// Why, for the log.
    pub reason: String,
}

/// Every listener and relay of a plant, ready to [`run`](BoundPlant::run).
#[derive(Debug)]
pub struct BoundPlant {
    /// The devices served as Modbus units, in file order.
    pub served: Vec<Served>,
    /// The `mqtt-relay` devices running as MQTT clients, in file order.
    pub relays: Vec<ServedRelay>,
    /// The CAN nodes, in file order.
    pub can_nodes: Vec<ServedCanNode>,
    /// The devices served over OPC UA, in file order.
    pub opcua: Vec<ServedOpcua>,
    /// The devices not run, in file order.
    pub skipped: Vec<Skipped>,
    /// Every device run, by id (clones share the device), for the control endpoint. The relays
    /// run as long as a clone lives.
    pub devices: BTreeMap<String, Simulated>,
    servers: Vec<ModbusServer>,
    /// The simulated CAN buses; their nodes run until these are dropped.
    buses: Vec<SimBus>,
    /// The simulated OPC UA servers; they serve until these are dropped.
    opcua_servers: OpcuaServers,
}

impl BoundPlant {
    /// Logs every write that reaches a served Modbus unit to `log` (MQTT, CAN and OPC UA writes
    /// are not logged).
    pub fn log_writes(&mut self, log: &WriteLog) {
        for server in &mut self.servers {
            server.log_writes(log.clone());
        }
    }

    /// Serves every listener and keeps every relay running until dropped.
    pub async fn run(self) {
        // The relays, the CAN buses and the OPC UA servers run on their own tasks for as long as
        // `devices`, `buses` and `opcua_servers` live: as long as this does.
        let BoundPlant {
            servers,
            devices: _running,
            buses: _buses,
            opcua_servers: _opcua_servers,
            ..
        } = self;
        let mut tasks = tokio::task::JoinSet::new();
        for server in servers {
            tasks.spawn(server.run());
        }
        while tasks.join_next().await.is_some() {}
        std::future::pending::<()>().await;
    }
}

/// Builds the simulated devices of `plant`, binds their listeners and starts their relays. Every
/// address is bound before this returns, so the ports in [`BoundPlant::served`] accept
/// connections at once, and every relay in [`BoundPlant::relays`] is connected to its broker
/// (or held off by a `power_off` or `reboot` fault it was given), every CAN node in
/// [`BoundPlant::can_nodes`] is on a bus whose pty accepts a host, and every OPC UA server of
/// [`BoundPlant::opcua`] accepts sessions.
pub async fn bind_plant(plant: &Plant) -> Result<BoundPlant, BindError> {
    // Each table is checked (and each relay started) in file order, so the first wrong table
    // is the one reported; then each protocol is brought up in turn.
    let Tables {
        modbus,
        relays,
        can_specs,
        opcua_specs,
        skipped,
        mut devices,
    } = Tables::sort(plant)?;
    let (served, servers) = modbus.bind().await?;
    let (opcua, opcua_servers) = opcua_sim::start(&opcua_specs).await?;
    let relays = connected(relays).await?;
    let buses = start_buses(&can_specs).await?;
    let can_nodes = can_nodes_on(&buses, &can_specs, &mut devices);
    Ok(BoundPlant {
        served,
        relays,
        can_nodes,
        opcua,
        skipped,
        devices,
        servers,
        buses,
        opcua_servers,
    })
}

/// The CAN node of each of `specs` (in their order) on the bus it was started on, each added to
/// `devices` for the control endpoint: a node exists only once its bus runs.
fn can_nodes_on(
    buses: &[SimBus],
    specs: &[CanNodeSpec],
    devices: &mut BTreeMap<String, Simulated>,
) -> Vec<ServedCanNode> {
    let mut can_nodes = Vec::with_capacity(specs.len());
    for spec in specs {
        let on_bus = buses.iter().find_map(|b| Some((b, b.node(&spec.device)?)));
        if let Some((bus, node)) = on_bus {
            devices.insert(spec.device.clone(), Simulated::Can(node.clone()));
            can_nodes.push(ServedCanNode {
                device: spec.device.clone(),
                bus: bus.name().to_string(),
                interface: bus.interface(),
            });
        }
    }
    can_nodes
}

/// Waits, [`RELAY_CONNECT_WAIT`] in all, until every relay is connected or held off by a fault.
async fn connected(
    relays: Vec<(ServedRelay, tokio::sync::watch::Receiver<Presence>)>,
) -> Result<Vec<ServedRelay>, BindError> {
    let deadline = tokio::time::Instant::now() + RELAY_CONNECT_WAIT;
    let mut out = Vec::with_capacity(relays.len());
    for (served, mut presence) in relays {
        let settled = presence.wait_for(|p| *p != Presence::Connecting);
        if !matches!(tokio::time::timeout_at(deadline, settled).await, Ok(Ok(_))) {
            return Err(BindError::Unreachable {
                device: served.device,
                broker: served.broker,
                waited: RELAY_CONNECT_WAIT,
            });
        }
        out.push(served);
    }
    Ok(out)
}
