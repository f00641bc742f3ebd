//! The resolved plant: what the engine, the drivers and the MCP layer consume.
//!
//! Everything here has passed validation: defaults are filled in, paths are absolute, every
//! expression compiled and was dry-run. Consumers never re-check the file.

use crate::action::Action;
pub use closedloop_contract::Parity;
use closedloop_contract::{Area, Encoding, ValueType};
use closedloop_contract::{BrokerUrl, CanInterface, OpcuaSecurity};
use closedloop_sim::SimConfig;
use std::path::PathBuf;
use std::sync::Arc;

mod server;
mod sim;

pub use server::{Secret, Server, Token, TokenScope, ToolMode};
pub use sim::{DeviceSim, SimCan};

/// A validated plant file.
#[derive(Debug, Clone)]
pub struct Plant {
    /// The plant file (absolute when loaded with [`crate::load`]).
    pub file: PathBuf,
    /// The `[server]` table.
    pub server: Server,
    /// The devices, in file order. Shared: the engine and each device's link hold the same
    /// declaration (a hall of 8,000 devices would otherwise keep three copies of each).
    pub devices: Vec<Arc<Device>>,
    /// Standing alarms (`[[alarm]]`), in file order.
    pub alarms: Vec<Alarm>,
    /// Devices by id and actions by tool name, built once at load: every MCP request looks a
    /// device or a tool up, and a linear search made `tools/list` quadratic in the plant's size.
    /// The fields above are read, never changed, after load.
    index: Index,
}

#[derive(Debug, Clone, Default)]
struct Index {
    devices: std::collections::HashMap<String, usize>,
    tools: std::collections::HashMap<String, (usize, usize)>,
}

/// A standing condition that blocks devices while it holds (`[[alarm]]`): a guard door open,
/// an over-temperature — an area's interlock rather than one action's `requires`.
#[derive(Debug, Clone)]
pub struct Alarm {
    /// Its name, in capitals: the code a command it stops gets.
    pub name: String,
    /// The condition, over `devices.<id>.<signal>` only.
    pub when: crate::Expr,
    /// The condition that clears it once raised (hysteresis: raise above 60 °C, clear below
    /// 50 °C, so a value wavering at the threshold does not raise and clear it by turns).
    /// None: it clears as soon as `when` stops holding.
    pub clear_when: Option<crate::Expr>,
    /// How long `when` must hold on fresh values before the alarm is raised (ignores glitches).
    pub for_ms: u64,
    /// `warning`, `critical`, ... as written (for people and models).
    pub severity: String,
    /// The devices it blocks.
    pub blocks: Vec<String>,
    /// Written for a model: what it means and what to do.
    pub description: String,
    /// Whether a device it reads going offline counts as the alarm (fail safe) or not.
    pub when_offline: WhenOffline,
}

/// What an alarm does when a device its condition reads is offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenOffline {
    /// The alarm counts as active: nothing is known, so the devices stay blocked.
    Block,
    /// The alarm keeps its last state.
    Ignore,
}

impl Plant {
    /// A plant of validated parts, indexed.
    pub(crate) fn new(
        file: PathBuf,
        server: Server,
        devices: Vec<Device>,
        alarms: Vec<Alarm>,
    ) -> Plant {
        let devices: Vec<Arc<Device>> = devices.into_iter().map(Arc::new).collect();
        let mut index = Index::default();
        for (i, d) in devices.iter().enumerate() {
            index.devices.insert(d.id.clone(), i);
            for (j, a) in d.actions.iter().enumerate() {
                index.tools.insert(a.tool_name.clone(), (i, j));
            }
        }
        Plant {
            file,
            server,
            devices,
            alarms,
            index,
        }
    }

    /// The device with this id.
    pub fn device(&self, id: &str) -> Option<&Device> {
        self.index.devices.get(id).map(|&i| &*self.devices[i])
    }

    /// The devices that must share a gateway, joined by the exclusive groups their actions name
    /// ([`crate::Cells`]).
    pub fn cells(&self) -> crate::Cells {
        let devices: Vec<&Device> = self.devices.iter().map(|d| &**d).collect();
        crate::Cells::of(&devices)
    }

    /// Every action of every device, with its device, in file order.
    pub fn actions(&self) -> impl Iterator<Item = (&Device, &Action)> {
        self.devices
            .iter()
            .flat_map(|d| d.actions.iter().map(move |a| (&**d, a)))
    }

    /// The action behind a tool name (`slide_move_to`).
    pub fn tool(&self, tool_name: &str) -> Option<(&Device, &Action)> {
        let &(i, j) = self.index.tools.get(tool_name)?;
        let d = &self.devices[i];
        Some((d, &d.actions[j]))
    }
}

/// One device of the plant.
#[derive(Debug, Clone)]
pub struct Device {
    /// `[a-z0-9_]+`, unique in the plant.
    pub id: String,
    /// What and where it is, for people and agents.
    pub description: String,
    /// How to reach it.
    pub driver: DriverConfig,
    /// Polling period of polled drivers.
    pub poll_ms: u64,
    /// When it counts as online.
    pub liveness: Liveness,
    /// Whether raw register tools may touch it.
    pub raw_access: bool,
    /// `max_rate` (+ `max_burst`) of the device: every actuating command of it counts.
    pub max_rate: Option<crate::RateLimit>,
    /// The gateway instances that can reach it (`gateways = ["cell_a"]`), when several share one
    /// PostgreSQL journal: only these may hold its lease. Empty (the default): every instance.
    pub gateways: Vec<String>,
    /// The simulated counterpart that `closedloop sim` serves, if any.
    pub sim: Option<DeviceSim>,
    /// Its signals, sorted by name.
    pub signals: Vec<Signal>,
    /// Its actions, in file order.
    pub actions: Vec<Action>,
}

impl Device {
    /// The signal with this name.
    pub fn signal(&self, name: &str) -> Option<&Signal> {
        self.signals.iter().find(|s| s.name == name)
    }

    /// The action with this name.
    pub fn action(&self, name: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// How long the engine waits for one answer of this device before counting it as none.
    pub fn request_timeout_ms(&self) -> u64 {
        match &self.driver {
            DriverConfig::Sim(c) => c.timeout_ms.unwrap_or(closedloop_sim::DEFAULT_TIMEOUT_MS),
            DriverConfig::ModbusTcp { timeout_ms, .. }
            | DriverConfig::ModbusRtu { timeout_ms, .. } => *timeout_ms,
            DriverConfig::Mqtt { .. } | DriverConfig::Opcua { .. } | DriverConfig::Can { .. } => {
                DEFAULT_TIMEOUT_MS
            }
        }
    }
}

/// Request timeout of drivers whose table has no `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 500;

/// The TLS files of an `mqtts://` driver (`ca_file`, `client_cert`, `client_key`), absolute
/// (relative ones are resolved against the plant file's directory).
///
/// # Invariants
/// After validation: every path named exists, the broker URL is `mqtts://` or `ssl://` when any
/// is set, and `client_cert` is set exactly when `client_key` is. Their contents (PEM) are
/// checked when the connection starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MqttTls {
    /// The CA certificate(s) to trust instead of the system's roots: for a self-signed broker
    /// or a private CA. `None`: the system's trusted roots.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM chain) for brokers that require one (mutual TLS).
    pub client_cert: Option<PathBuf>,
    /// The private key of `client_cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    pub client_key: Option<PathBuf>,
}

/// The `driver = { kind = ..., ... }` table, typed by kind.
///
/// Not `#[non_exhaustive]`: every crate of the workspace matches it, so a new kind fails to
/// compile at each site that must handle it (docs/develop.md, "Adding a protocol").
#[derive(Debug, Clone, PartialEq)]
pub enum DriverConfig {
    /// In-process simulator.
    Sim(SimConfig),
    /// Modbus TCP.
    ModbusTcp {
        /// `host:port`.
        address: String,
        /// Unit identifier.
        unit: u8,
        /// Request timeout.
        timeout_ms: u64,
    },
    /// Modbus RTU over a serial line.
    ModbusRtu {
        /// Serial port (`/dev/ttyUSB0`).
        port: String,
        /// Baud rate.
        baud: u32,
        /// Parity.
        parity: Parity,
        /// Unit address.
        unit: u8,
        /// Request timeout.
        timeout_ms: u64,
    },
    /// MQTT.
    Mqtt {
        /// `mqtt://host:1883` (or `tcp://`) plain, `mqtts://host:8883` (or `ssl://`) over TLS.
        broker: BrokerUrl,
        /// Client id.
        client_id: String,
        /// User name, if the broker wants one.
        username: Option<String>,
        /// Password, if the broker wants one.
        password: Option<Secret>,
        /// Whom to trust and who to be over `mqtts://`; all empty for a plain broker.
        tls: MqttTls,
    },
    /// OPC UA.
    Opcua {
        /// `opc.tcp://host:4840/path`.
        endpoint: String,
        /// `none`, or Basic256Sha256 in mode `sign` or `sign_and_encrypt`.
        security: OpcuaSecurity,
        /// The server's certificate (DER or PEM), pinned: required with security. Absolute.
        server_cert: Option<PathBuf>,
        /// closedloop's own certificate; generated once when absent. Absolute.
        client_cert: Option<PathBuf>,
        /// Its private key (with `client_cert`). Absolute.
        client_key: Option<PathBuf>,
        /// The user the session logs in as; `None` (with `password`) for an anonymous session.
        username: Option<String>,
        /// The user's password: given exactly when `username` is, never shown.
        password: Option<Secret>,
    },
    /// CAN with a DBC file.
    Can {
        /// `socketcan:can0` or `slcan:/dev/ttyACM0`.
        interface: CanInterface,
        /// Bus bit rate.
        bitrate: u32,
        /// The DBC file, absolute.
        dbc: PathBuf,
    },
}

impl DriverConfig {
    /// The `kind` as written in the plant file.
    pub fn kind(&self) -> &'static str {
        match self {
            DriverConfig::Sim(_) => "sim",
            DriverConfig::ModbusTcp { .. } => "modbus-tcp",
            DriverConfig::ModbusRtu { .. } => "modbus-rtu",
            DriverConfig::Mqtt { .. } => "mqtt",
            DriverConfig::Opcua { .. } => "opcua",
            DriverConfig::Can { .. } => "can",
        }
    }

    /// Whether the device is register-mapped (sim or Modbus): coils, inputs, registers.
    pub fn is_register_based(&self) -> bool {
        matches!(
            self,
            DriverConfig::Sim(_) | DriverConfig::ModbusTcp { .. } | DriverConfig::ModbusRtu { .. }
        )
    }
}

/// When a device counts as online (docs/architecture.md, liveness).
#[derive(Debug, Clone, PartialEq)]
pub struct Liveness {
    /// Offline after this long without a valid answer. Default max(2, 5 × poll_ms / 1000).
    pub max_silence_s: f64,
    /// Modbus heartbeat: a holding register that must keep changing.
    pub counter: Option<u16>,
    /// MQTT status topic (the device's last will).
    pub status_topic: Option<String>,
    /// JSON pointer to the word in the status topic's payload, when the payload is JSON
    /// (Zigbee2MQTT's `{"state": "online"}`); the whole payload when absent.
    pub status_json: Option<String>,
    /// Payload of the status topic meaning online.
    pub online: String,
    /// Payload of the status topic meaning offline.
    pub offline: String,
    /// The device publishes its state right after every command it carries out (Home
    /// Assistant's contract for an entity with a state topic): a deadline shorter than
    /// `max_silence_s` still sees its report, so `check` does not warn about it. MQTT only.
    pub reports_after_command: bool,
}

/// A named value read from a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// Its name, read by expressions.
    pub name: String,
    /// Where it is read from.
    pub source: Source,
    /// Engineering unit.
    pub unit: Option<String>,
    /// What it means.
    pub description: Option<String>,
}

/// Where a signal is read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A coil, discrete input, holding or input register.
    Register {
        /// The data area.
        area: Area,
        /// 0-based PDU address.
        address: u16,
        /// How the registers become a value.
        encoding: Encoding,
    },
    /// An MQTT topic.
    Topic {
        /// The topic.
        topic: String,
        /// JSON pointer into the payload; the raw payload when absent.
        json: Option<String>,
        /// JSON pointer to the time the payload says its value was taken (`time_json`): a
        /// retained message is then as old as that, and a live one never younger.
        time_json: Option<String>,
        /// Plain payloads that mean `true` (then the signal is a bool).
        true_values: Vec<String>,
        /// Plain payloads that mean `false`: named beside `true_values`, so that a payload in
        /// neither (`None`, `unknown`) is no value instead of `false`.
        false_values: Vec<String>,
        /// `bool` or a number type.
        ty: ValueType,
    },
    /// An OPC UA node.
    Node {
        /// The NodeId (`ns=2;s=Speed`).
        node: String,
        /// `bool` or a number type.
        ty: ValueType,
    },
    /// A signal of a CAN message described by the DBC file.
    Can {
        /// Message name or id (`0x1F0`).
        message: String,
        /// The DBC signal.
        signal: String,
        /// `bool` or a number type.
        ty: ValueType,
    },
}

impl Source {
    /// Short form for evidence: `holding:2`, `lab/lamp/state /on`, `ns=2;s=Speed`, `CAN 0x1F0 Speed`.
    pub fn describe(&self) -> String {
        match self {
            Source::Register { area, address, .. } => format!("{}:{address}", area.key()),
            Source::Topic {
                topic,
                json: Some(p),
                ..
            } => format!("{topic} {p}"),
            Source::Topic { topic, .. } => topic.clone(),
            Source::Node { node, .. } => node.clone(),
            Source::Can {
                message, signal, ..
            } => format!("CAN {message} {signal}"),
        }
    }

    /// Whether the signal is a bool (else a number).
    pub fn is_bool(&self) -> bool {
        match self {
            Source::Register { area, encoding, .. } => {
                area.is_bit() || encoding.bit.is_some() || encoding.ty == ValueType::Bool
            }
            Source::Topic {
                ty, true_values, ..
            } => *ty == ValueType::Bool || !true_values.is_empty(),
            Source::Node { ty, .. } | Source::Can { ty, .. } => *ty == ValueType::Bool,
        }
    }
}
