//! One `[[device]]`: its own keys, driver, liveness, `[device.sim]` and signals.

use super::Dev;
use super::register::{family, RegKeys, SourceFamily};
use crate::error::Sink;
use crate::model::{typed, RawCan, RawDeviceHead, RawLiveness, RawModbusRtu, RawModbusTcp, RawMqtt, RawOpcua, RawSignal};
use crate::plant::{DeviceSim, DriverConfig, Liveness, Parity, Secret, Signal, Source};
use closedloop_driver::ValueType;
use closedloop_sim::{SimConfig, SimConfigError};
use std::path::Path;

/// A device whose own keys and signals are checked; its actions wait for the catalog of
/// every device's signals.
pub(crate) struct Pending {
    pub dev: Dev,
    /// The id, when it is valid.
    pub id: Option<String>,
    /// The id as written, valid or not: expressions of the device still resolve against it,
    /// so one bad id does not bury the file in follow-on errors.
    pub label: Option<String>,
    /// Signals that were refused, with a guess of whether they are bools, so that expressions
    /// reading them report nothing more.
    pub broken_signals: Vec<(String, bool)>,
    pub description: String,
    pub driver: Option<DriverConfig>,
    pub poll_ms: u64,
    pub liveness: Liveness,
    pub raw_access: bool,
    pub sim: Option<DeviceSim>,
    pub signals: Vec<crate::plant::Signal>,
    pub actions: Vec<toml::Value>,
}

const DEFAULT_POLL_MS: u64 = 100;

pub(crate) fn device(index: usize, value: toml::Value, base: &Path, sink: &mut Sink) -> Option<Pending> {
    let toml::Value::Table(mut t) = value else {
        sink.push(None, &format!("device[{index}]"), "a device must be a [[device]] table");
        return None;
    };
    let raw_id = t.remove("id");
    let dev = match raw_id.as_ref().and_then(|v| v.as_str()) {
        Some(id) => Dev { id: Some(id.to_string()), prefix: String::new() },
        None => Dev { id: None, prefix: format!("device[{index}]") },
    };
    let raw_id = match raw_id {
        Some(toml::Value::String(id)) => Some(id),
        Some(_) => {
            dev.err(sink, "id", "the device id must be a string such as \"lamp\"");
            None
        }
        None => {
            dev.err(sink, "id", "missing key \"id\"; add id = \"...\" (lower-case letters, digits and _)");
            None
        }
    };
    let driver_t = t.remove("driver");
    let sim_t = t.remove("sim");
    let signals_t = t.remove("signals");
    let actions_t = t.remove("action");
    let head: Option<RawDeviceHead> = typed(toml::Value::Table(t), "").map_err(|(k, m)| dev.err(sink, &k, m)).ok();
    let label = raw_id.clone();
    let id = raw_id.filter(|id| {
        let ok = !id.is_empty() && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            dev.err(sink, "id", format!("\"{id}\" is not a valid device id; use lower-case letters, digits and _ (e.g. \"{}\")", suggest_id(id)));
        }
        ok
    });
    let poll_ms = head.as_ref().and_then(|h| h.poll_ms).unwrap_or(DEFAULT_POLL_MS);
    if poll_ms == 0 {
        dev.err(sink, "poll_ms", "poll_ms must be at least 1; the default is 100");
    }
    let driver = match driver_t {
        None => {
            dev.err(sink, "driver", "missing key \"driver\"; add e.g. driver = { kind = \"sim\", model = \"relay\" }");
            None
        }
        Some(toml::Value::Table(d)) => driver(d, base, &dev, sink),
        Some(_) => {
            dev.err(sink, "driver", "driver must be a table such as { kind = \"modbus-tcp\", address = \"host:502\" }");
            None
        }
    };
    let raw_live = head.as_ref().and_then(|h| h.liveness.as_ref());
    let liveness = liveness(raw_live, poll_ms, driver.as_ref(), &dev, sink);
    let sim = sim_t.and_then(|v| device_sim(v, &dev, sink));
    let mut broken_signals = Vec::new();
    let signals = signals(signals_t, driver.as_ref(), &dev, sink, &mut broken_signals);
    let actions = match actions_t {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a,
        Some(_) => {
            dev.err(sink, "action", "write each action as a [[device.action]] table");
            Vec::new()
        }
    };
    let (description, raw_access) = head.map(|h| (h.description, h.raw_access)).unwrap_or_default();
    Some(Pending { dev, id, label, broken_signals, description, driver, poll_ms, liveness, raw_access, sim, signals, actions })
}

fn suggest_id(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

fn driver(mut t: toml::Table, base: &Path, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    const KINDS: &str = "sim, modbus-tcp, modbus-rtu, mqtt, opcua, can";
    let kind = match t.remove("kind") {
        Some(toml::Value::String(k)) => k,
        _ => {
            dev.err(sink, "driver.kind", format!("missing or not a string; write kind = one of {KINDS}"));
            return None;
        }
    };
    let v = toml::Value::Table(t);
    let mut fail = |(k, m): (String, String)| dev.err(sink, &k, m);
    let cfg = match kind.as_str() {
        "sim" => {
            let c: SimConfig = typed(v, "driver").map_err(&mut fail).ok()?;
            if let Err(e) = c.validate() {
                dev.err(sink, &format!("driver.{}", e.key()), e.to_string());
                return None;
            }
            DriverConfig::Sim(c)
        }
        "modbus-tcp" => {
            let c: RawModbusTcp = typed(v, "driver").map_err(&mut fail).ok()?;
            if c.address.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
                dev.err(sink, "driver.address", format!("\"{}\" is not host:port; write e.g. \"192.168.1.20:502\"", c.address));
            }
            DriverConfig::ModbusTcp { address: c.address, unit: c.unit.unwrap_or(1), timeout_ms: timeout(c.timeout_ms, dev, sink) }
        }
        "modbus-rtu" => {
            let c: RawModbusRtu = typed(v, "driver").map_err(&mut fail).ok()?;
            let parity = match c.parity.as_deref().unwrap_or("N") {
                "N" | "n" => Parity::None,
                "E" | "e" => Parity::Even,
                "O" | "o" => Parity::Odd,
                other => {
                    dev.err(sink, "driver.parity", format!("\"{other}\" is not a parity; write \"N\", \"E\" or \"O\""));
                    Parity::None
                }
            };
            let baud = c.baud.unwrap_or(19200);
            if baud == 0 {
                dev.err(sink, "driver.baud", "baud must be above 0; the default is 19200");
            }
            DriverConfig::ModbusRtu { port: c.port, baud, parity, unit: c.unit.unwrap_or(1), timeout_ms: timeout(c.timeout_ms, dev, sink) }
        }
        "mqtt" => {
            let c: RawMqtt = typed(v, "driver").map_err(&mut fail).ok()?;
            if !["mqtt://", "mqtts://", "tcp://", "ssl://"].iter().any(|s| c.broker.starts_with(s)) {
                dev.err(sink, "driver.broker", format!("\"{}\" is not a broker URL; write e.g. \"mqtt://localhost:1883\"", c.broker));
            }
            if c.client_id.is_empty() {
                dev.err(sink, "driver.client_id", "client_id must not be empty; the broker tells clients apart by it");
            }
            DriverConfig::Mqtt { broker: c.broker, client_id: c.client_id, username: c.username, password: c.password.map(Secret) }
        }
        "opcua" => {
            let c: RawOpcua = typed(v, "driver").map_err(&mut fail).ok()?;
            if !c.endpoint.starts_with("opc.tcp://") {
                dev.err(sink, "driver.endpoint", format!("\"{}\" is not an OPC UA endpoint; write e.g. \"opc.tcp://host:4840/path\"", c.endpoint));
            }
            let security = c.security.unwrap_or_else(|| "none".into());
            if !["none", "sign", "sign_and_encrypt"].contains(&security.as_str()) {
                dev.err(sink, "driver.security", format!("\"{security}\" is not a security mode; write \"none\", \"sign\" or \"sign_and_encrypt\""));
            }
            DriverConfig::Opcua { endpoint: c.endpoint, security }
        }
        "can" => {
            let c: RawCan = typed(v, "driver").map_err(&mut fail).ok()?;
            if !c.interface.starts_with("socketcan:") && !c.interface.starts_with("slcan:") {
                dev.err(sink, "driver.interface", format!("\"{}\" is not a CAN interface; write \"socketcan:can0\" or \"slcan:/dev/ttyACM0\"", c.interface));
            }
            DriverConfig::Can { interface: c.interface, bitrate: c.bitrate.unwrap_or(500_000), dbc: base.join(c.dbc) }
        }
        other => {
            let hint = crate::error::did_you_mean(other, KINDS.split(", ")).map(|b| format!(" (did you mean \"{b}\"?)")).unwrap_or_default();
            dev.err(sink, "driver.kind", format!("unknown driver kind \"{other}\"{hint}; write one of {KINDS}"));
            return None;
        }
    };
    Some(cfg)
}

fn timeout(ms: Option<u64>, dev: &Dev, sink: &mut Sink) -> u64 {
    let ms = ms.unwrap_or(crate::plant::DEFAULT_TIMEOUT_MS);
    if ms == 0 {
        dev.err(sink, "driver.timeout_ms", "timeout_ms must be at least 1; the default is 500");
    }
    ms
}

fn liveness(raw: Option<&RawLiveness>, poll_ms: u64, driver: Option<&DriverConfig>, dev: &Dev, sink: &mut Sink) -> Liveness {
    let default = (5.0 * poll_ms as f64 / 1000.0).max(2.0);
    let empty = RawLiveness::default();
    let raw = raw.unwrap_or(&empty);
    let max_silence_s = raw.max_silence_s.unwrap_or(default);
    if !(max_silence_s.is_finite() && max_silence_s > 0.0) {
        dev.err(sink, "liveness.max_silence_s", format!("must be a number of seconds above 0; the default here is {default}"));
    }
    if raw.counter.is_some() && driver.is_some_and(|d| !d.is_register_based()) {
        dev.err(sink, "liveness.counter", "a heartbeat counter register needs a Modbus or sim driver; for MQTT use status_topic");
    }
    if raw.status_topic.is_some() && driver.is_some_and(|d| !matches!(d, DriverConfig::Mqtt { .. })) {
        dev.err(sink, "liveness.status_topic", "status_topic needs an mqtt driver; for Modbus use counter = { holding = N }");
    }
    Liveness {
        max_silence_s,
        counter: raw.counter.as_ref().map(|c| c.holding),
        status_topic: raw.status_topic.clone(),
        online: raw.online.clone().unwrap_or_else(|| "online".into()),
        offline: raw.offline.clone().unwrap_or_else(|| "offline".into()),
    }
}

fn device_sim(v: toml::Value, dev: &Dev, sink: &mut Sink) -> Option<DeviceSim> {
    let toml::Value::Table(mut t) = v else {
        dev.err(sink, "sim", "[device.sim] must be a table with model = \"...\" and its options");
        return None;
    };
    let listen = t.remove("listen");
    let unit = t.remove("unit");
    let broker = t.remove("broker");
    let config: SimConfig = typed(toml::Value::Table(t), "sim").map_err(|(k, m)| dev.err(sink, &k, m)).ok()?;
    match config.validate() {
        Ok(_) | Err(SimConfigError::NotInProcess { .. }) => {}
        Err(e) => dev.err(sink, &format!("sim.{}", e.key()), e.to_string()),
    }
    let text = |v: Option<toml::Value>, key: &str, sink: &mut Sink| match v {
        None => None,
        Some(toml::Value::String(s)) => Some(s),
        Some(_) => {
            dev.err(sink, &format!("sim.{key}"), "must be a string such as \"127.0.0.1:5020\"");
            None
        }
    };
    let listen = text(listen, "listen", sink);
    let broker = text(broker, "broker", sink);
    let unit = match unit {
        None => None,
        Some(toml::Value::Integer(u)) if (0..=255).contains(&u) => Some(u as u8),
        Some(_) => {
            dev.err(sink, "sim.unit", "must be a Modbus unit id from 0 to 255");
            None
        }
    };
    if let Some(l) = &listen {
        if l.parse::<std::net::SocketAddr>().is_err() {
            dev.err(sink, "sim.listen", format!("\"{l}\" is not an ip:port address; write e.g. \"127.0.0.1:5020\""));
        }
    }
    Some(DeviceSim { config, listen, unit, broker })
}

fn signals(v: Option<toml::Value>, driver: Option<&DriverConfig>, dev: &Dev, sink: &mut Sink, broken: &mut Vec<(String, bool)>) -> Vec<Signal> {
    let t = match v {
        None => return Vec::new(),
        Some(toml::Value::Table(t)) => t,
        Some(_) => {
            dev.err(sink, "signals", "signals must be a table: [device.signals] name = { holding = 0 }");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (name, value) in t {
        let key = format!("signals.{name}");
        if let Err(m) = super::exprs::check_name(&name) {
            dev.err(sink, &key, format!("\"{name}\" cannot be a signal name: {m}"));
            continue;
        }
        let keys: Vec<String> = value.as_table().map(|t| t.keys().cloned().collect()).unwrap_or_default();
        let guess = ["coil", "discrete_input", "true_values", "bit"].iter().any(|k| keys.iter().any(|x| x == k))
            || value.get("type").and_then(|t| t.as_str()) == Some("bool");
        let typed_raw = typed::<RawSignal>(value, &key).map_err(|(k, m)| dev.err(sink, &k, m));
        match typed_raw.ok().and_then(|raw| source(&raw, &keys, driver, &key, dev, sink).map(|s| (raw, s))) {
            Some((raw, source)) => out.push(Signal { name, source, unit: raw.unit, description: raw.description }),
            None => broken.push((name, guess)),
        }
    }
    out
}

fn source(raw: &RawSignal, keys: &[String], driver: Option<&DriverConfig>, key: &str, dev: &Dev, sink: &mut Sink) -> Option<Source> {
    let fam = family(keys, SIGNAL_KEYS).map_err(|m| dev.err(sink, key, m)).ok()?;
    if let Some(d) = driver {
        if let Err(m) = fam.fits(d) {
            dev.err(sink, key, m);
            return None;
        }
    }
    Some(match fam {
        SourceFamily::Register => {
            let reg = RegKeys::from(raw);
            let (area, address, encoding) = reg.resolve().map_err(|(k, m)| dev.err(sink, &crate::error::join(key, &k), m)).ok()?;
            Source::Register { area, address, encoding }
        }
        SourceFamily::Topic => {
            let true_values = raw.true_values.clone().unwrap_or_default();
            let default = if true_values.is_empty() { ValueType::F64 } else { ValueType::Bool };
            if let Some(p) = raw.json.as_deref().filter(|p| !p.is_empty() && !p.starts_with('/')) {
                dev.err(sink, &format!("{key}.json"), format!("\"{p}\" is not a JSON pointer; write it with a leading slash, e.g. \"/{p}\""));
            }
            let ty = raw.ty.unwrap_or(default);
            Source::Topic { topic: raw.topic.clone().unwrap_or_default(), json: raw.json.clone(), true_values, ty }
        }
        SourceFamily::Node | SourceFamily::Method => Source::Node { node: raw.node.clone().unwrap_or_default(), ty: raw.ty.unwrap_or(ValueType::F64) },
        SourceFamily::Can => {
            let Some(signal) = raw.signal.clone() else {
                dev.err(sink, &format!("{key}.signal"), "a CAN source needs signal = \"<DBC signal name>\" beside message");
                return None;
            };
            let message = raw.message.clone().map(|m| m.0).unwrap_or_default();
            Source::Can { message, signal, ty: raw.ty.unwrap_or(ValueType::F64) }
        }
    })
}

/// The keys a signal source may have, by family.
const SIGNAL_KEYS: &[(SourceFamily, &[&str])] = &[
    (SourceFamily::Register, &["coil", "discrete_input", "holding", "input", "type", "word_order", "byte_swap", "bit", "scale", "offset", "unit", "description"]),
    (SourceFamily::Topic, &["topic", "json", "true_values", "type", "unit", "description"]),
    (SourceFamily::Node, &["node", "type", "unit", "description"]),
    (SourceFamily::Can, &["message", "signal", "type", "unit", "description"]),
];
