//! A plant file's `[device.sim]` tables, bound as Modbus TCP listeners: what `closedloop sim
//! PLANT` runs.
//!
//! Devices with the same `listen` address share one listener, each as its own unit (`unit`,
//! default 1). `listen = "127.0.0.1:0"` picks a free port: every device that writes exactly that
//! address shares the one listener it picks. `mqtt-relay` devices and tables without `listen`
//! are not served and are reported in [`BoundPlant::skipped`].

use crate::modbus::{ModbusServer, Units};
use closedloop_plant::Plant;
use closedloop_sim::SimDevice;
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use thiserror::Error;

/// The unit id of a `[device.sim]` table that gives none (as the `modbus-tcp` driver's default).
pub const DEFAULT_UNIT: u8 = 1;

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

/// A device with a `[device.sim]` table that is not served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Device id.
    pub device: String,
    /// Why, for the log.
    pub reason: String,
}

/// Every listener of a plant, bound and ready to [`run`](BoundPlant::run).
#[derive(Debug)]
pub struct BoundPlant {
    /// The served devices, in file order.
    pub served: Vec<Served>,
    /// The devices not served, in file order.
    pub skipped: Vec<Skipped>,
    /// The served devices by id (clones share the device), for the control endpoint.
    pub devices: BTreeMap<String, SimDevice>,
    servers: Vec<ModbusServer>,
}

impl BoundPlant {
    /// Serves every listener until dropped.
    pub async fn run(self) {
        let mut tasks = tokio::task::JoinSet::new();
        for server in self.servers {
            tasks.spawn(server.run());
        }
        while tasks.join_next().await.is_some() {}
    }
}

/// Builds the simulated devices of `plant` and binds their listeners. Every address is bound
/// before this returns, so the ports in [`BoundPlant::served`] accept connections at once.
pub async fn bind_plant(plant: &Plant) -> Result<BoundPlant, BindError> {
    let mut groups: BTreeMap<SocketAddr, (Units, Vec<(String, u8)>)> = BTreeMap::new();
    let mut order = Vec::new();
    let mut skipped = Vec::new();
    let mut devices = BTreeMap::new();
    for d in &plant.devices {
        let Some(sim) = &d.sim else { continue };
        if sim.config.model == "mqtt-relay" {
            skipped.push(Skipped {
                device: d.id.clone(),
                reason: "mqtt-relay runs over MQTT, which `closedloop sim` does not serve yet \
                         (MQTT comes later); not started"
                    .into(),
            });
            continue;
        }
        let Some(listen) = &sim.listen else {
            skipped.push(Skipped {
                device: d.id.clone(),
                reason: "its [device.sim] table has no `listen`: add listen = \"127.0.0.1:PORT\" \
                         to serve it over Modbus TCP"
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
        devices.insert(d.id.clone(), device);
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
    Ok(BoundPlant {
        served,
        skipped,
        devices,
        servers,
    })
}
