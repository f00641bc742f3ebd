//! Opening what devices share — one broker connection per broker, one OPC UA session per
//! endpoint, one port per CAN interface — and a link per device over it. Opening needs the async
//! runtime (the connections run as tasks), which `closedloop check` does not start: it builds
//! [`Drivers`] only.

use crate::ConnectError;
use crate::can::CanLink;
use crate::connections::{Connection, Drivers};
use crate::mqtt::MqttLink;
use crate::opcua::OpcuaLink;
use crate::registers::{RegisterLink, Shards};
use closedloop_link::{Clock, Link, Links};
use closedloop_plant::Device;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What has been opened so far, by the first device on each shared thing.
#[derive(Default)]
struct Opened {
    brokers: BTreeMap<String, closedloop_mqtt::MqttBroker>,
    sessions: BTreeMap<String, closedloop_opcua::OpcuaClient>,
    ports: BTreeMap<String, Arc<closedloop_can::CanPort>>,
    /// The register devices' poll shards.
    shards: Shards,
}

impl Drivers {
    /// Makes every MQTT client id this gateway's own (`<client_id>-<instance>`): gateways that
    /// share a journal serve one plant file, and a broker keeps one connection per id, so with
    /// one id they would close each other's connections in turn. Call before [`Drivers::open`].
    pub fn per_instance_client_ids(&mut self, instance: &str) {
        for connection in self.map.values_mut() {
            if let Connection::Mqtt(config) = connection {
                config.client_id = format!("{}-{instance}", config.client_id);
            }
        }
    }

    /// A link for every device of `devices` (the plant the drivers were built from), on one
    /// clock; call inside a tokio runtime. Nothing reads yet: the engine runs each link.
    pub fn open(&self, devices: &[Arc<Device>]) -> Result<Links, ConnectError> {
        let clock = Clock::new();
        let mut opened = Opened::default();
        let mut map = BTreeMap::new();
        for d in devices {
            let connection = self
                .map
                .get(&d.id)
                .ok_or_else(|| ConnectError::NoDriver(d.id.clone()))?;
            let link = opened.link(Arc::clone(d), connection, clock)?;
            map.insert(d.id.clone(), link);
        }
        Ok(Links { clock, map })
    }
}

impl Opened {
    /// The link of device `spec` through `connection`, opening what its protocol shares the
    /// first time a device needs it.
    fn link(
        &mut self,
        spec: Arc<Device>,
        connection: &Connection,
        clock: Clock,
    ) -> Result<Arc<dyn Link>, ConnectError> {
        let fail = |e: &dyn std::fmt::Display| ConnectError::Driver {
            device: spec.id.clone(),
            message: e.to_string(),
        };
        Ok(match connection {
            Connection::Registers(driver) => {
                let shards = &mut self.shards;
                Arc::new(RegisterLink::new(spec, Arc::clone(driver), clock, shards))
            }
            Connection::Mqtt(config) => {
                let broker = match self.brokers.get(&config.url) {
                    Some(b) => b.clone(),
                    None => {
                        let b = closedloop_mqtt::MqttBroker::connect(config.clone())
                            .map_err(|e| fail(&e))?;
                        self.brokers.insert(config.url.clone(), b.clone());
                        b
                    }
                };
                Arc::new(MqttLink::new(spec, broker, clock))
            }
            Connection::Opcua(config) => {
                let client = match self.sessions.get(&config.endpoint) {
                    Some(c) => c.clone(),
                    None => {
                        let c = closedloop_opcua::OpcuaClient::connect((**config).clone())
                            .map_err(|e| fail(&e))?;
                        self.sessions.insert(config.endpoint.clone(), c.clone());
                        c
                    }
                };
                Arc::new(OpcuaLink::new(spec, client, clock))
            }
            Connection::Can {
                interface,
                bitrate,
                dbc,
            } => {
                let port = self
                    .ports
                    .entry(interface.to_string())
                    .or_insert_with(|| closedloop_can::CanPort::start(interface.clone(), *bitrate))
                    .clone();
                Arc::new(CanLink::new(spec, port, Arc::clone(dbc), clock))
            }
        })
    }
}
