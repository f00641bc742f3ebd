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

use crate::Simulated;
use crate::can_node::{CanNodeSpec, CanSimError, SimBus, start_buses};
use crate::modbus::{ModbusServer, Units};
use crate::mqtt_relay::{self, MqttRelay, Presence, RelayError};
use crate::opcua_sim::{self, OpcuaServers, ServedOpcua};
use closedloop_plant::Plant;
use closedloop_sim::{Model, SimDevice};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// The unit id of a `[device.sim]` table that gives none (as the `modbus-tcp` driver's default).
pub const DEFAULT_UNIT: u8 = 1;
/// How long [`bind_plant`] waits, in all, for its MQTT relays to connect to their brokers.
pub const RELAY_CONNECT_WAIT: Duration = Duration::from_secs(5);

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
    let mut groups: BTreeMap<SocketAddr, (Units, Vec<(String, u8)>)> = BTreeMap::new();
    let mut order = Vec::new();
    let mut skipped = Vec::new();
    let mut devices = BTreeMap::new();
    let mut relays = Vec::new();
    let mut can_specs = Vec::new();
    let mut opcua_specs = Vec::new();
    for d in &plant.devices {
        let Some(sim) = &d.sim else { continue };
        if let Some(listen) = &sim.opcua {
            let spec = opcua_sim::prepare(&d.id, sim, listen)?;
            devices.insert(d.id.clone(), Simulated::Opcua(spec.sim.clone()));
            opcua_specs.push(spec);
            continue;
        }
        if let Some(can) = &sim.can {
            let other = match (&sim.listen, &sim.broker) {
                (Some(_), _) => Some(("listen", "Modbus TCP")),
                (None, Some(_)) => Some(("broker", "MQTT")),
                (None, None) => None,
            };
            if let Some((other, protocol)) = other {
                return Err(BindError::CanAndOther {
                    device: d.id.clone(),
                    other,
                    protocol,
                });
            }
            can_specs.push(CanNodeSpec {
                device: d.id.clone(),
                can: can.clone(),
                config: sim.config.clone(),
            });
            continue;
        }
        if sim.config.model == "mqtt-relay" {
            let Some(broker) = &sim.broker else {
                skipped.push(Skipped {
                    device: d.id.clone(),
                    reason: "its [device.sim] table has no `broker`: add \
                             broker = \"mqtt://127.0.0.1:1883\" to run the mqtt-relay as a client \
                             of that broker"
                        .into(),
                });
                continue;
            };
            let relay = start_relay(&d.id, sim, broker)?;
            relays.push((
                ServedRelay {
                    device: d.id.clone(),
                    prefix: relay.prefix().to_string(),
                    broker: broker.clone(),
                },
                relay.presence(),
            ));
            devices.insert(d.id.clone(), Simulated::Mqtt(Arc::new(relay)));
            continue;
        }
        let Some(listen) = &sim.listen else {
            skipped.push(Skipped {
                device: d.id.clone(),
                reason: "its [device.sim] table has no `listen` (nor `opcua`): add \
                         listen = \"127.0.0.1:PORT\" to serve it over Modbus TCP, or \
                         opcua = \"127.0.0.1:PORT\" to serve it over OPC UA"
                    .into(),
            });
            continue;
        };
        let addr: SocketAddr = listen.parse().map_err(|_| BindError::Listen {
            device: d.id.clone(),
            listen: listen.clone(),
        })?;
        let device = SimDevice::from_config(&sim.config).map_err(|e| BindError::Sim {
            device: d.id.clone(),
            message: e.to_string(),
        })?;
        let unit = sim.unit.unwrap_or(DEFAULT_UNIT);
        let (units, names) = groups.entry(addr).or_default();
        if let Some((first, _)) = names.iter().find(|(_, u)| *u == unit) {
            return Err(BindError::DuplicateUnit {
                listen: addr,
                unit,
                first: first.clone(),
                second: d.id.clone(),
            });
        }
        units.insert(unit, device.clone());
        names.push((d.id.clone(), unit));
        order.push((d.id.clone(), unit, addr));
        devices.insert(d.id.clone(), Simulated::Modbus(device));
    }
    let mut bound = BTreeMap::new();
    let mut servers = Vec::new();
    for (addr, (units, names)) in groups {
        let list = || {
            let names: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
            names.join(", ")
        };
        let server = ModbusServer::bind(addr, units)
            .await
            .map_err(|source| BindError::Bind {
                listen: addr,
                devices: list(),
                source,
            })?;
        let real = server.local_addr().map_err(|source| BindError::Bind {
            listen: addr,
            devices: list(),
            source,
        })?;
        bound.insert(addr, real);
        servers.push(server);
    }
    let served = order
        .into_iter()
        .map(|(device, unit, addr)| Served {
            device,
            unit,
            addr: bound.get(&addr).copied().unwrap_or(addr),
        })
        .collect();
    let (opcua, opcua_servers) = opcua_sim::start(&opcua_specs).await?;
    let relays = connected(relays).await?;
    let buses = start_buses(&can_specs).await?;
    let mut can_nodes = Vec::with_capacity(can_specs.len());
    for spec in &can_specs {
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

/// Validates an `mqtt-relay` table (refusing faults with no MQTT meaning by key) and starts it.
fn start_relay(
    device: &str,
    sim: &closedloop_plant::DeviceSim,
    broker: &str,
) -> Result<MqttRelay, BindError> {
    let refused = |message: String| BindError::Sim {
        device: device.to_string(),
        message,
    };
    let valid = sim.config.validate().map_err(|e| refused(e.to_string()))?;
    mqtt_relay::check_faults(&valid.faults).map_err(|e| refused(e.to_string()))?;
    let Model::MqttRelay(options) = &valid.model else {
        return Err(refused(format!(
            "model `{}` is not an mqtt-relay",
            valid.model.name()
        )));
    };
    let client_id = format!("closedloop-sim-{device}");
    MqttRelay::start(broker, &client_id, options, &valid.faults, valid.seed).map_err(|e| match e {
        RelayError::Broker(source) => BindError::Broker {
            device: device.to_string(),
            broker: broker.to_string(),
            source,
        },
        // Not reached: `check_faults` above refused such a fault by key.
        refusal => refused(refusal.to_string()),
    })
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
