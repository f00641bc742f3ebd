//! closedloop's engine: the command lifecycle of DESIGN §2.
//!
//! - [`machine`]: the lifecycle as a pure state machine (event in, effects out).
//! - [`supervisor`]: the async shell that runs one command: queue, write, judge fresh reads,
//!   deadline, cancel plan, safe state.
//! - [`device`]: a device's poller, signal cache and liveness.
//! - [`engine`]: the API the MCP layer and the CLI use.
//!
//! The engine knows no MCP and no wire protocol: register devices are `dyn Driver`s, MQTT devices
//! are clients of a shared [`closedloop_mqtt::MqttBroker`].

mod admit;
pub mod api;
pub mod bridge;
pub mod clock;
pub mod code;
pub mod ctx;
pub mod detail;
pub mod device;
mod dispatch;
pub mod engine;
mod judge;
pub mod live;
pub mod machine;
pub mod plan;
pub mod raw;
mod recovery;
pub mod result;
mod submit;
mod supervisor;

pub use code::{ErrorCode, Status};
pub use ctx::Change;
pub use device::{DeviceIo, Liveness};
pub use engine::{DeviceInfo, DeviceState, Engine, SignalState, Submission, UnreadableSignal};
pub use result::CommandResult;

use closedloop_driver::Driver;
use closedloop_mqtt::BrokerConfig;
use closedloop_plant::{DriverConfig, Plant};
use closedloop_sim::SimDevice;
use std::collections::BTreeMap;
use std::sync::Arc;
use thiserror::Error;

/// What the engine itself cannot do (as opposed to a command's outcome, which is a result).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No device of that id in the plant.
    #[error("no device {0:?} in the plant")]
    UnknownDevice(String),
    /// The device has no action of that name.
    #[error("device {0:?} has no action {1:?}")]
    UnknownAction(String, String),
    /// No command has this id (contract code `UNKNOWN_COMMAND`).
    #[error("no command has id {0:?}")]
    UnknownCommand(String),
    /// A device has no driver.
    #[error("device {0:?} has no driver")]
    NoDriver(String),
    /// A driver kind this build cannot run yet.
    #[error(
        "device {device:?}: driver kind {kind:?} is not available in this build; use kind = \"sim\", \"modbus-tcp\", \"modbus-rtu\", \"mqtt\", \"opcua\" or \"can\""
    )]
    UnsupportedDriver {
        /// Device id.
        device: String,
        /// Driver kind.
        kind: String,
    },
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
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] closedloop_journal::JournalError),
}

/// How to reach one device, as built from the plant before the engine starts.
#[derive(Clone)]
pub enum Connection {
    /// A register driver, ready to use.
    Registers(Arc<dyn Driver>),
    /// The broker an MQTT device is a client of. [`Engine::start`] opens one connection per
    /// broker URL for all the devices on it (connecting needs the async runtime, which
    /// `closedloop check` does not start).
    Mqtt(BrokerConfig),
    /// An OPC UA server's nodes. [`Engine::start`] opens one session per endpoint.
    Opcua(Box<closedloop_opcua::OpcuaConfig>),
    /// A CAN node: the interface its bus is on and its DBC, loaded and checked against the
    /// plant's signals and writes. [`Engine::start`] opens one port per interface.
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

/// Builds a driver for every device of the plant. Modbus devices with the same address (or serial
/// port) share one connection, which serialises the units behind it; MQTT devices on one broker
/// share one client connection, so they must agree on its client id, credentials and TLS files.
pub fn build_drivers(plant: &Plant) -> Result<Drivers, EngineError> {
    let mut map: BTreeMap<String, Connection> = BTreeMap::new();
    // Broker URL -> (first device on it, its config).
    let mut brokers: BTreeMap<String, (String, BrokerConfig)> = BTreeMap::new();
    // OPC UA endpoint -> (first device on it, its config).
    let mut endpoints: BTreeMap<String, (String, closedloop_opcua::OpcuaConfig)> = BTreeMap::new();
    // CAN interface -> (first device on it, its bitrate).
    let mut buses: BTreeMap<String, (String, u32)> = BTreeMap::new();
    let mut sims = BTreeMap::new();
    let modbus = closedloop_modbus::Connections::new();
    let driver_error = |device: &str, e: &dyn std::fmt::Display| EngineError::Driver {
        device: device.to_string(),
        message: e.to_string(),
    };
    for d in &plant.devices {
        match &d.driver {
            DriverConfig::Sim(cfg) => {
                let sim = SimDevice::from_config(cfg).map_err(|e| EngineError::Sim {
                    device: d.id.clone(),
                    message: e.to_string(),
                })?;
                map.insert(d.id.clone(), Connection::Registers(Arc::new(sim.clone())));
                sims.insert(d.id.clone(), sim);
            }
            DriverConfig::ModbusTcp {
                address,
                unit,
                timeout_ms,
            } => {
                let dev = closedloop_modbus::modbus_tcp(&modbus, address, *unit, *timeout_ms)
                    .map_err(|e| driver_error(&d.id, &e))?;
                map.insert(d.id.clone(), Connection::Registers(Arc::new(dev)));
            }
            DriverConfig::ModbusRtu {
                port,
                baud,
                parity,
                unit,
                timeout_ms,
            } => {
                let parity = match parity {
                    closedloop_plant::Parity::None => closedloop_modbus::Parity::None,
                    closedloop_plant::Parity::Even => closedloop_modbus::Parity::Even,
                    closedloop_plant::Parity::Odd => closedloop_modbus::Parity::Odd,
                };
                let dev =
                    closedloop_modbus::modbus_rtu(&modbus, port, *baud, parity, *unit, *timeout_ms)
                        .map_err(|e| driver_error(&d.id, &e))?;
                map.insert(d.id.clone(), Connection::Registers(Arc::new(dev)));
            }
            DriverConfig::Mqtt {
                broker,
                client_id,
                username,
                password,
                tls,
            } => {
                closedloop_mqtt::parse_broker_url(broker).map_err(|e| driver_error(&d.id, &e))?;
                let mut config = BrokerConfig::new(broker.clone(), client_id.clone());
                config.username = username.clone();
                config.password = password.as_ref().map(|p| p.0.clone());
                config.tls.ca_file = tls.ca_file.clone();
                config.tls.client_cert = tls.client_cert.clone();
                config.tls.client_key = tls.client_key.clone();
                if let Some((first, seen)) = brokers.get(&broker_key(broker)) {
                    if seen.client_id != config.client_id
                        || seen.username != config.username
                        || seen.password != config.password
                        || seen.tls != config.tls
                    {
                        return Err(EngineError::Driver {
                            device: d.id.clone(),
                            message: format!(
                                "shares the broker {broker} with {first:?} but gives another client_id, username, password, ca_file, client_cert or client_key; \
                                 closedloop opens one connection per broker, so give every device on it the same client_id, credentials and TLS files"
                            ),
                        });
                    }
                } else {
                    brokers.insert(broker_key(broker), (d.id.clone(), config.clone()));
                }
                map.insert(d.id.clone(), Connection::Mqtt(config));
            }
            DriverConfig::Opcua {
                endpoint,
                security,
                server_cert,
                client_cert,
                client_key,
            } => {
                let mut config = closedloop_opcua::OpcuaConfig::new(endpoint.clone());
                if security != "none" {
                    let mode = closedloop_opcua::SecurityMode::parse(security)
                        .map_err(|e| driver_error(&d.id, &e))?;
                    let Some(server_cert) = server_cert.clone() else {
                        return Err(driver_error(&d.id, &"security needs server_cert"));
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
                config.validate().map_err(|e| driver_error(&d.id, &e))?;
                if let Some((first, seen)) = endpoints.get(endpoint) {
                    if seen.security != config.security {
                        return Err(EngineError::Driver {
                            device: d.id.clone(),
                            message: format!(
                                "shares the endpoint {endpoint} with {first:?} but with other security settings; closedloop keeps one session per endpoint, so give every device on it the same security, server_cert, client_cert and client_key"
                            ),
                        });
                    }
                } else {
                    endpoints.insert(endpoint.clone(), (d.id.clone(), config.clone()));
                }
                map.insert(d.id.clone(), Connection::Opcua(Box::new(config)));
            }
            DriverConfig::Can {
                interface,
                bitrate,
                dbc,
            } => {
                let iface = closedloop_can::Interface::parse(interface)
                    .map_err(|e| driver_error(&d.id, &e))?;
                let dbc = closedloop_can::Dbc::load(dbc).map_err(|e| driver_error(&d.id, &e))?;
                check_can(d, &dbc)?;
                if let Some((first, rate)) = buses.get(interface)
                    && rate != bitrate
                {
                    return Err(EngineError::Driver {
                        device: d.id.clone(),
                        message: format!(
                            "shares the CAN interface {interface} with {first:?} at another bitrate ({bitrate} vs {rate}); one bus has one bitrate"
                        ),
                    });
                }
                buses
                    .entry(interface.clone())
                    .or_insert_with(|| (d.id.clone(), *bitrate));
                map.insert(
                    d.id.clone(),
                    Connection::Can {
                        interface: iface,
                        bitrate: *bitrate,
                        dbc: Arc::new(dbc),
                    },
                );
            }
            other => {
                return Err(EngineError::UnsupportedDriver {
                    device: d.id.clone(),
                    kind: other.kind().into(),
                });
            }
        }
    }
    Ok(Drivers { map, sims })
}

/// Every CAN signal and write of a device must name a message and signals its DBC has, so that a
/// typo is refused at load (`closedloop check`), not at the first command.
fn check_can(d: &closedloop_plant::Device, dbc: &closedloop_can::Dbc) -> Result<(), EngineError> {
    let fail = |key: String, message: String| EngineError::Driver {
        device: d.id.clone(),
        message: format!("{key}: {message}"),
    };
    for s in &d.signals {
        if let closedloop_plant::Source::Can {
            message, signal, ..
        } = &s.source
        {
            let key = format!("signals.{}", s.name);
            let m = device::can::find_message(dbc, message).map_err(|e| fail(key.clone(), e))?;
            if m.signal(signal).is_none() {
                return Err(fail(
                    key,
                    format!(
                        "{} has no signal {signal:?} in message {}",
                        dbc.file(),
                        m.name()
                    ),
                ));
            }
        }
    }
    for a in &d.actions {
        for (plan, entries) in [("write", &a.write), ("cancel", &a.cancel)] {
            for e in entries.iter() {
                if let closedloop_plant::WriteEntry::Can {
                    message, signals, ..
                } = e
                {
                    let key = format!("action {}: {plan}", a.name);
                    let m = device::can::find_message(dbc, message)
                        .map_err(|e| fail(key.clone(), e))?;
                    if let Some((name, _)) = signals.iter().find(|(n, _)| m.signal(n).is_none()) {
                        return Err(fail(
                            key,
                            format!(
                                "{} has no signal {name:?} in message {}",
                                dbc.file(),
                                m.name()
                            ),
                        ));
                    }
                    if m.fd() || m.size() > 8 {
                        return Err(fail(
                            key,
                            format!(
                                "message {} is a CAN FD frame; slcan and SocketCAN here carry classic frames of up to 8 bytes",
                                m.name()
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// One key per broker however its URL is written (`mqtt://h`, `tcp://h:1883`): the devices on it
/// must share one connection, or the broker would drop one client for the other (same id).
pub(crate) fn broker_key(url: &str) -> String {
    let tls = url.starts_with("mqtts://") || url.starts_with("ssl://");
    match closedloop_mqtt::parse_broker_url(url) {
        Ok((host, port)) => format!("{}://{host}:{port}", if tls { "mqtts" } else { "mqtt" }),
        Err(_) => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_broker_however_its_url_is_written() {
        let k = super::broker_key;
        assert_eq!(k("mqtt://h"), k("tcp://h:1883"));
        assert_eq!(k("mqtts://h"), k("ssl://h:8883"));
        assert_ne!(k("mqtt://h:1883"), k("mqtts://h:1883"));
        assert_ne!(k("mqtt://h:1883"), k("mqtt://h:1884"));
    }
}
