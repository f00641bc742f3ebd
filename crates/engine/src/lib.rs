//! closedloop's engine: the command lifecycle of DESIGN §2, from a submission to an outcome the
//! journal holds and the hardware confirmed (or the reason it could not).
//!
//! The engine knows no MCP and no wire protocol. Register devices (sim, Modbus) are
//! [`closedloop_driver::Driver`]s; MQTT devices are clients of a shared
//! [`closedloop_mqtt::MqttBroker`], OPC UA devices nodes of a shared
//! [`closedloop_opcua::OpcuaClient`] session, CAN devices nodes on a shared bus port: one
//! [`DeviceIo`] variant each. [`build_drivers`] turns a plant into a [`Connection`] per device;
//! [`Engine::start`] opens them, starts every device's poller or listener and recovers the
//! journal's unfinished commands.
//!
//! Modules, roughly in the order a command meets them (docs/architecture.md follows one tool
//! call through them, function by function):
//!
//! - [`api`]: the shapes the API takes and returns ([`Submission`], [`DeviceState`],
//!   [`DeviceInfo`]), apart from the result object.
//! - [`engine`]: the API the MCP layer and the CLI use: submit, status with a bounded wait,
//!   cancel, list, devices, device state, changes, shutdown.
//! - `submit`: a submission in small steps (scope, idempotency key, parameters,
//!   `Engine::admit`), ending journaled `accepted` with its supervisor started, or `rejected`.
//! - `admit`: admission checks shared by submission and dispatch (`requires` read afresh, a
//!   failure already on, the expected duration), each saying in words why nothing is written.
//! - [`ctx`]: what the engine's tasks share: devices, exclusive groups and their queues, live
//!   commands, the journal, a command's scope of other devices (`Ctx::scope_for`: only those its
//!   action reads), and `Ctx::record`, through which every change is journaled first.
//! - [`live`]: a command held in memory (its journaled row and timeline), the handles callers
//!   wait on (`wait_terminal`) and cancel through.
//! - `supervisor`: one task per command: queue for the exclusive group, dispatch, judge samples
//!   until a terminal status, carry out the machine's effects (cancel plan, safe state).
//! - `dispatch`: a fresh read, the `dispatched` record committed before anything is sent, then
//!   the write plan, re-sent only as the machine allows.
//! - [`plan`]: write plans from the plant's entries and CEL values to requests (register writes,
//!   publishes, OPC UA writes and calls, CAN frames), all encoded before anything is sent; driver
//!   answers to contract error codes.
//! - [`device`]: one device at run time: its connection, poller or listener, signal cache,
//!   numbered samples and liveness; `DeviceRt::send` returns each write's fence. Submodules
//!   `device::mqtt`, `device::opcua` and [`device::can`] hold the push-fed protocols'
//!   listeners, `device::samples` the channel that lets a supervisor see every sample.
//! - `judge`: which values may count (the fence of every device an expression reads) and what a
//!   fresh sample says (done, failed, started, stopped, moved, early); readback.
//! - `others`: wakes a supervisor when another device its criteria read delivers a sample.
//! - [`machine`]: the lifecycle as a pure state machine (event in, effects out); no I/O, no
//!   clock, so every transition is unit-tested.
//! - [`detail`]: the `detail` and `hint` of a result, in words, from the machine's reason and
//!   the evidence.
//! - [`result`]: the result object an agent sees, built from the journal's rows, and
//!   `CommandResult::for_model`, sized for a model.
//! - [`code`]: the contract's statuses and error codes, each code with its hint.
//! - [`clock`]: one monotonic base mapped to wall-clock milliseconds, so timelines follow a
//!   paused test clock.
//! - `terminal`: the one place a terminal row is made from the machine's outcome (`Ending`).
//! - `recovery`: start-up recovery of what the journal says was unfinished.
//! - [`raw`]: raw register reads and writes for `raw_access` devices, outside the lifecycle.
//! - [`bridge`]: read-only bridge tools for `raw_access` devices (`can_signals`, `can_decode`,
//!   `opcua_browse`, `opcua_read`).

mod admit;
pub mod alarms;
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
mod others;
pub mod plan;
pub mod raw;
mod recovery;
pub mod result;
mod submit;
mod supervisor;
mod terminal;

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
