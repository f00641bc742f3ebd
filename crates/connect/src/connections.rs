//! From the plant's driver tables to a [`Connection`] per device, before anything is opened.
//!
//! The plant has already parsed every address (broker URL, OPC UA security, CAN interface) into
//! typed values at load; here they are only mapped onto the protocol crates' configurations, and
//! what one device cannot know alone is checked: devices sharing a broker, an endpoint or a bus
//! must agree on how it is reached, because each is opened once.

mod check;

use crate::ConnectError;
use check::check_can;
use closedloop_contract::Driver;
use closedloop_mqtt::BrokerConfig;
use closedloop_plant::{
    BrokerUrl, CanInterface, Device, DriverConfig, MqttTls, OpcuaSecurity, Plant, Secret,
};
use closedloop_sim::SimDevice;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// How to reach one device, as built from the plant before the engine starts.
#[derive(Clone)]
pub enum Connection {
    /// A register driver, ready to use.
    Registers(Arc<dyn Driver>),
    /// The broker an MQTT device is a client of. [`Drivers::open`] opens one connection per
    /// broker for all the devices on it (connecting needs the async runtime, which
    /// `closedloop check` does not start); its `url` names the broker one way however the plant
    /// wrote it.
    Mqtt(BrokerConfig),
    /// An OPC UA server's nodes. [`Drivers::open`] opens one session per endpoint.
    Opcua(Box<closedloop_opcua::OpcuaConfig>),
    /// A CAN node: the interface its bus is on and its DBC, loaded and checked against the
    /// plant's signals and writes. [`Drivers::open`] opens one port per interface.
    Can {
        /// The interface (`slcan:/dev/ttyACM0`, `socketcan:can0`).
        interface: closedloop_can::Interface,
        /// Bus bit rate.
        bitrate: u32,
        /// The device's DBC.
        dbc: Arc<closedloop_can::Dbc>,
    },
}

/// Drivers for a plant, with handles on the simulated ones (to inject faults, or peek at
/// physical truth in tests and the demo).
pub struct Drivers {
    /// One connection per device id.
    pub map: BTreeMap<String, Connection>,
    /// The simulated devices among them.
    pub sims: BTreeMap<String, SimDevice>,
}

/// What has been opened so far, by the first device on each shared thing.
#[derive(Default)]
struct Shared {
    /// Broker key -> (first device on it, its config).
    brokers: BTreeMap<String, (String, BrokerConfig)>,
    /// OPC UA endpoint -> (first device on it, its config).
    endpoints: BTreeMap<String, (String, closedloop_opcua::OpcuaConfig)>,
    /// CAN interface -> (first device on it, its bitrate).
    buses: BTreeMap<String, (String, u32)>,
}

/// Builds a driver for every device of the plant. Modbus devices with the same address (or serial
/// port) share one connection, which serialises the units behind it; MQTT devices on one broker
/// share one client connection, so they must agree on its client id, credentials and TLS files.
pub fn build_drivers(plant: &Plant) -> Result<Drivers, ConnectError> {
    let mut map = BTreeMap::new();
    let mut sims = BTreeMap::new();
    let mut shared = Shared::default();
    let modbus = closedloop_modbus::Connections::new();
    for d in &plant.devices {
        let fail = |e: &dyn std::fmt::Display| driver_error(d, e.to_string());
        let connection = match &d.driver {
            DriverConfig::Sim(cfg) => {
                let sim = SimDevice::from_config(cfg).map_err(|e| ConnectError::Sim {
                    device: d.id.clone(),
                    message: e.to_string(),
                })?;
                sims.insert(d.id.clone(), sim.clone());
                Connection::Registers(Arc::new(sim))
            }
            DriverConfig::ModbusTcp {
                address,
                unit,
                timeout_ms,
            } => closedloop_modbus::modbus_tcp(&modbus, address, *unit, *timeout_ms)
                .map(|dev| Connection::Registers(Arc::new(dev)))
                .map_err(|e| fail(&e))?,
            DriverConfig::ModbusRtu {
                port,
                baud,
                parity,
                unit,
                timeout_ms,
            } => closedloop_modbus::modbus_rtu(&modbus, port, *baud, *parity, *unit, *timeout_ms)
                .map(|dev| Connection::Registers(Arc::new(dev)))
                .map_err(|e| fail(&e))?,
            DriverConfig::Mqtt {
                broker,
                client_id,
                username,
                password,
                tls,
            } => {
                let config = broker_config(broker, client_id, username, password, tls);
                shared.broker(d, broker, &config)?;
                Connection::Mqtt(config)
            }
            DriverConfig::Opcua {
                endpoint,
                security,
                server_cert,
                client_cert,
                client_key,
                username,
                password,
            } => {
                let files = [server_cert, client_cert, client_key];
                let mut config = opcua_config(d, endpoint, *security, files)?;
                config.identity = opcua_identity(username, password);
                shared.endpoint(d, endpoint, &config)?;
                Connection::Opcua(Box::new(config))
            }
            DriverConfig::Can {
                interface,
                bitrate,
                dbc,
            } => {
                let dbc = closedloop_can::Dbc::load(dbc).map_err(|e| fail(&e))?;
                check_can(d, &dbc)?;
                shared.bus(d, interface, *bitrate)?;
                Connection::Can {
                    interface: interface.clone(),
                    bitrate: *bitrate,
                    dbc: Arc::new(dbc),
                }
            }
        };
        map.insert(d.id.clone(), connection);
    }
    Ok(Drivers { map, sims })
}

fn driver_error(d: &Device, message: String) -> ConnectError {
    ConnectError::Driver {
        device: d.id.clone(),
        message,
    }
}

/// The client configuration of an MQTT device, named by its broker's key so that devices that
/// write one broker two ways share one connection.
fn broker_config(
    broker: &BrokerUrl,
    client_id: &str,
    username: &Option<String>,
    password: &Option<Secret>,
    tls: &MqttTls,
) -> BrokerConfig {
    let mut config = BrokerConfig::new(broker.key(), client_id.to_string());
    config.username = username.clone();
    config.password = password.as_ref().map(|p| p.0.clone());
    config.tls.ca_file = tls.ca_file.clone();
    config.tls.client_cert = tls.client_cert.clone();
    config.tls.client_key = tls.client_key.clone();
    config
}

/// Who an OPC UA device's session logs in as: the plant loader has already checked that
/// `username` and `password` come together.
fn opcua_identity(
    username: &Option<String>,
    password: &Option<Secret>,
) -> closedloop_opcua::Identity {
    match (username, password) {
        (Some(user), Some(password)) => closedloop_opcua::Identity::UserName {
            user: user.clone(),
            password: password.0.clone(),
        },
        _ => closedloop_opcua::Identity::Anonymous,
    }
}

/// The session configuration of an OPC UA device; with security, its PKI directory sits next to
/// the pinned server certificate.
fn opcua_config(
    d: &Device,
    endpoint: &str,
    security: OpcuaSecurity,
    [server_cert, client_cert, client_key]: [&Option<PathBuf>; 3],
) -> Result<closedloop_opcua::OpcuaConfig, ConnectError> {
    let mut config = closedloop_opcua::OpcuaConfig::new(endpoint.to_string());
    let mode = match security {
        OpcuaSecurity::None => None,
        OpcuaSecurity::Sign => Some(closedloop_opcua::SecurityMode::Sign),
        OpcuaSecurity::SignAndEncrypt => Some(closedloop_opcua::SecurityMode::SignAndEncrypt),
    };
    if let Some(mode) = mode {
        let Some(server_cert) = server_cert.clone() else {
            return Err(driver_error(d, "security needs server_cert".into()));
        };
        let pki_dir = server_cert
            .parent()
            .map(|p| p.join("closedloop-pki"))
            .unwrap_or_else(|| std::env::temp_dir().join("closedloop-pki"));
        config.security = closedloop_opcua::Security::Basic256Sha256 {
            mode,
            server_cert,
            client_cert: client_cert.clone(),
            client_key: client_key.clone(),
            pki_dir,
        };
    }
    config
        .validate()
        .map_err(|e| driver_error(d, e.to_string()))?;
    Ok(config)
}

impl Shared {
    /// The first device on a broker sets its client; the others must give the same.
    fn broker(
        &mut self,
        d: &Device,
        url: &BrokerUrl,
        config: &BrokerConfig,
    ) -> Result<(), ConnectError> {
        let Some((first, seen)) = self.brokers.get(&url.key()) else {
            self.brokers
                .insert(url.key(), (d.id.clone(), config.clone()));
            return Ok(());
        };
        if seen.client_id != config.client_id
            || seen.username != config.username
            || seen.password != config.password
            || seen.tls != config.tls
        {
            return Err(driver_error(
                d,
                format!(
                    "shares the broker {url} with {first:?} but gives another client_id, username, password, ca_file, client_cert or client_key; \
                 closedloop opens one connection per broker, so give every device on it the same client_id, credentials and TLS files"
                ),
            ));
        }
        Ok(())
    }

    /// The first device on an endpoint sets its session's security and identity; the others
    /// must agree.
    fn endpoint(
        &mut self,
        d: &Device,
        endpoint: &str,
        config: &closedloop_opcua::OpcuaConfig,
    ) -> Result<(), ConnectError> {
        let Some((first, seen)) = self.endpoints.get(endpoint) else {
            self.endpoints
                .insert(endpoint.to_string(), (d.id.clone(), config.clone()));
            return Ok(());
        };
        if seen.security != config.security || seen.identity != config.identity {
            return Err(driver_error(
                d,
                format!(
                    "shares the endpoint {endpoint} with {first:?} but with other security settings or credentials; closedloop keeps one session per endpoint, so give every device on it the same security, server_cert, client_cert, client_key, username and password"
                ),
            ));
        }
        Ok(())
    }

    /// One bus has one bitrate.
    fn bus(
        &mut self,
        d: &Device,
        interface: &CanInterface,
        bitrate: u32,
    ) -> Result<(), ConnectError> {
        let key = interface.to_string();
        if let Some((first, rate)) = self.buses.get(&key)
            && *rate != bitrate
        {
            return Err(driver_error(
                d,
                format!(
                    "shares the CAN interface {interface} with {first:?} at another bitrate ({bitrate} vs {rate}); one bus has one bitrate"
                ),
            ));
        }
        self.buses
            .entry(key)
            .or_insert_with(|| (d.id.clone(), bitrate));
        Ok(())
    }
}
