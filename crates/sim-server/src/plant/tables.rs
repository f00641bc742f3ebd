//! A plant's `[device.sim]` tables sorted by how each is served (OPC UA, CAN, MQTT, Modbus TCP
//! or not at all), every table checked before anything listens, so a wrong table is reported
//! before any port is taken.

use super::{BindError, DEFAULT_UNIT, Served, ServedRelay, Skipped};
use crate::Simulated;
use crate::can_node::CanNodeSpec;
use crate::modbus::{ModbusServer, Units};
use crate::mqtt_relay::{self, MqttRelay, Presence, RelayError};
use crate::opcua_sim::{self, OpcuaSpec};
use closedloop_plant::{DeviceSim, Plant, SimCan};
use closedloop_sim::{Model, SimDevice};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Every `[device.sim]` table of a plant, checked and sorted by protocol, in file order within
/// each. The relays are already started (they connect in the background); nothing else runs yet.
#[derive(Default)]
pub(super) struct Tables {
    /// The Modbus units, grouped by the address they share.
    pub modbus: ModbusGroups,
    /// The started relays, each with its presence to wait on.
    pub relays: Vec<(ServedRelay, watch::Receiver<Presence>)>,
    /// The CAN nodes to start.
    pub can_specs: Vec<CanNodeSpec>,
    /// The devices to serve over OPC UA.
    pub opcua_specs: Vec<OpcuaSpec>,
    /// The tables that name no way of serving them.
    pub skipped: Vec<Skipped>,
    /// Every device built so far, by id. CAN nodes are missing: they are built with their bus.
    pub devices: BTreeMap<String, Simulated>,
}

impl Tables {
    /// Checks every table of `plant` in file order and sorts it; the first wrong table is the
    /// error.
    pub fn sort(plant: &Plant) -> Result<Tables, BindError> {
        let mut tables = Tables::default();
        for device in &plant.devices {
            if let Some(sim) = &device.sim {
                tables.add(&device.id, sim)?;
            }
        }
        Ok(tables)
    }

    /// Sorts one table: `opcua` first, then `can`, then an `mqtt-relay`'s `broker`, then
    /// Modbus TCP's `listen`.
    fn add(&mut self, device: &str, sim: &DeviceSim) -> Result<(), BindError> {
        if let Some(listen) = &sim.opcua {
            let spec = opcua_sim::prepare(device, sim, listen)?;
            let served = Simulated::Opcua(spec.sim.clone());
            self.devices.insert(device.to_string(), served);
            self.opcua_specs.push(spec);
            Ok(())
        } else if let Some(can) = &sim.can {
            self.add_can_node(device, sim, can)
        } else if sim.config.model == "mqtt-relay" {
            self.add_relay(device, sim)
        } else {
            self.add_modbus_unit(device, sim)
        }
    }

    /// A table with `can`, which must give neither `listen` nor `broker`.
    fn add_can_node(
        &mut self,
        device: &str,
        sim: &DeviceSim,
        can: &SimCan,
    ) -> Result<(), BindError> {
        let other = match (&sim.listen, &sim.broker) {
            (Some(_), _) => Some(("listen", "Modbus TCP")),
            (None, Some(_)) => Some(("broker", "MQTT")),
            (None, None) => None,
        };
        if let Some((other, protocol)) = other {
            return Err(BindError::CanAndOther {
                device: device.to_string(),
                other,
                protocol,
            });
        }
        self.can_specs.push(CanNodeSpec {
            device: device.to_string(),
            can: can.clone(),
            config: sim.config.clone(),
        });
        Ok(())
    }

    /// An `mqtt-relay`: started at once when it names a `broker`, skipped when not.
    fn add_relay(&mut self, device: &str, sim: &DeviceSim) -> Result<(), BindError> {
        let Some(broker) = &sim.broker else {
            self.skipped.push(Skipped {
                device: device.to_string(),
                reason: "its [device.sim] table has no `broker`: add \
                         broker = \"mqtt://127.0.0.1:1883\" to run the mqtt-relay as a client \
                         of that broker"
                    .into(),
            });
            return Ok(());
        };
        let relay = start_relay(device, sim, broker)?;
        self.relays.push((
            ServedRelay {
                device: device.to_string(),
                prefix: relay.prefix().to_string(),
                broker: broker.clone(),
            },
            relay.presence(),
        ));
        self.devices
            .insert(device.to_string(), Simulated::Mqtt(Arc::new(relay)));
        Ok(())
    }

    /// Any other model: a Modbus unit when the table names a `listen` address, skipped when not.
    fn add_modbus_unit(&mut self, device: &str, sim: &DeviceSim) -> Result<(), BindError> {
        let Some(listen) = &sim.listen else {
            self.skipped.push(Skipped {
                device: device.to_string(),
                reason: "its [device.sim] table has no `listen` (nor `opcua`): add \
                         listen = \"127.0.0.1:PORT\" to serve it over Modbus TCP, or \
                         opcua = \"127.0.0.1:PORT\" to serve it over OPC UA"
                    .into(),
            });
            return Ok(());
        };
        let built = self.modbus.add(device, sim, listen)?;
        self.devices
            .insert(device.to_string(), Simulated::Modbus(built));
        Ok(())
    }
}

/// Validates an `mqtt-relay` table (refusing faults with no MQTT meaning by key) and starts it.
fn start_relay(device: &str, sim: &DeviceSim, broker: &str) -> Result<MqttRelay, BindError> {
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

/// The Modbus units of a plant, grouped by `listen` address: devices naming the same address
/// share one listener, each as its own unit.
#[derive(Default)]
pub(super) struct ModbusGroups {
    /// Each address's units, and the (device, unit) pairs behind it in file order.
    groups: BTreeMap<SocketAddr, (Units, Vec<(String, u8)>)>,
    /// Every (device, unit, address as written) in file order.
    order: Vec<(String, u8, SocketAddr)>,
}

impl ModbusGroups {
    /// Builds the device of `sim` and adds it at `listen` as its unit; refuses an address that
    /// is not `ip:port` and a unit another device there already answers as.
    fn add(&mut self, device: &str, sim: &DeviceSim, listen: &str) -> Result<SimDevice, BindError> {
        let addr: SocketAddr = listen.parse().map_err(|_| BindError::Listen {
            device: device.to_string(),
            listen: listen.to_string(),
        })?;
        let built = SimDevice::from_config(&sim.config).map_err(|e| BindError::Sim {
            device: device.to_string(),
            message: e.to_string(),
        })?;
        let unit = sim.unit.unwrap_or(DEFAULT_UNIT);
        let (units, names) = self.groups.entry(addr).or_default();
        if let Some((first, _)) = names.iter().find(|(_, u)| *u == unit) {
            return Err(BindError::DuplicateUnit {
                listen: addr,
                unit,
                first: first.clone(),
                second: device.to_string(),
            });
        }
        units.insert(unit, built.clone());
        names.push((device.to_string(), unit));
        self.order.push((device.to_string(), unit, addr));
        Ok(built)
    }

    /// Binds one listener per address; returns every unit served (in file order, with the port
    /// actually bound) and the servers, which accept connections when this returns.
    pub async fn bind(self) -> Result<(Vec<Served>, Vec<ModbusServer>), BindError> {
        let mut bound = BTreeMap::new();
        let mut servers = Vec::new();
        for (addr, (units, names)) in self.groups {
            let list = || {
                let names: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
                names.join(", ")
            };
            let mut server =
                ModbusServer::bind(addr, units)
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
            server.name_units(names.iter().map(|(n, u)| (*u, n.clone())).collect());
            servers.push(server);
        }
        let served = self
            .order
            .into_iter()
            .map(|(device, unit, addr)| Served {
                device,
                unit,
                addr: bound.get(&addr).copied().unwrap_or(addr),
            })
            .collect();
        Ok((served, servers))
    }
}
