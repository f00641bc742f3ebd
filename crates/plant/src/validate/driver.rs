//! `driver = { kind = ..., ... }`: one typed table per kind, each checked for what its
//! connection needs (a `host:port`, a broker URL, an OPC UA endpoint, a CAN interface).

use super::Dev;
use crate::error::Sink;
use crate::model::{RawCan, RawModbusRtu, RawModbusTcp, RawMqtt, RawOpcua, typed_keys};
use crate::plant::{DriverConfig, MqttTls, Parity, Secret};
use closedloop_contract::{BrokerUrl, CanInterface, OpcuaSecurity};
use closedloop_sim::SimConfig;
use std::path::{Path, PathBuf};

/// Every driver kind, in the order messages list them.
const KINDS: &str = "sim, modbus-tcp, modbus-rtu, mqtt, opcua, can";

/// Types and checks a `driver` table: its `kind` picks the checker for the rest of its keys.
pub(crate) fn driver(
    mut t: toml::Table,
    base: &Path,
    dev: &Dev,
    sink: &mut Sink,
) -> Option<DriverConfig> {
    let kind = match t.remove("kind") {
        Some(toml::Value::String(k)) => k,
        _ => {
            dev.err(
                sink,
                "driver.kind",
                format!("missing or not a string; write kind = one of {KINDS}"),
            );
            return None;
        }
    };
    let v = toml::Value::Table(t);
    match kind.as_str() {
        "sim" => sim(v, dev, sink),
        "modbus-tcp" => modbus_tcp(v, dev, sink),
        "modbus-rtu" => modbus_rtu(v, dev, sink),
        "mqtt" => mqtt(v, base, dev, sink),
        "opcua" => opcua(v, base, dev, sink),
        "can" => can(v, base, dev, sink),
        other => {
            let hint = crate::suggest::did_you_mean(other, KINDS.split(", "))
                .map(|b| format!(" (did you mean \"{b}\"?)"))
                .unwrap_or_default();
            dev.err(
                sink,
                "driver.kind",
                format!("unknown driver kind \"{other}\"{hint}; write one of {KINDS}"),
            );
            None
        }
    }
}

/// The kind's own typed table (`kind` already taken out); a key the kind does not take is
/// reported here, so each checker starts from typed values.
fn keys<T: serde::de::DeserializeOwned>(v: toml::Value, dev: &Dev, sink: &mut Sink) -> Option<T> {
    typed_keys(v, "driver", &["kind"])
        .map_err(|(k, m)| dev.err(sink, &k, m))
        .ok()
}

/// `kind = "sim"`: the simulator checks its own table, so `closedloop check` and the simulator
/// agree on what is valid.
fn sim(v: toml::Value, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: SimConfig = keys(v, dev, sink)?;
    if let Err(e) = c.validate() {
        dev.err(sink, &format!("driver.{}", e.key()), e.to_string());
        return None;
    }
    Some(DriverConfig::Sim(c))
}

/// `kind = "modbus-tcp"`: the address must be `host:port` before anything dials it.
fn modbus_tcp(v: toml::Value, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: RawModbusTcp = keys(v, dev, sink)?;
    if c.address
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        dev.err(
            sink,
            "driver.address",
            format!(
                "\"{}\" is not host:port; write e.g. \"192.168.1.20:502\"",
                c.address
            ),
        );
    }
    Some(DriverConfig::ModbusTcp {
        address: c.address,
        unit: c.unit.unwrap_or(1),
        timeout_ms: timeout(c.timeout_ms, dev, sink),
    })
}

/// `kind = "modbus-rtu"`: parity and baud rate are the serial line settings that a typo
/// silently breaks, so both are checked here.
fn modbus_rtu(v: toml::Value, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: RawModbusRtu = keys(v, dev, sink)?;
    let given = c.parity.as_deref().unwrap_or("N");
    let parity = match Parity::parse(given) {
        Some(parity) => parity,
        None => {
            dev.err(
                sink,
                "driver.parity",
                format!("\"{given}\" is not a parity; write \"N\", \"E\" or \"O\""),
            );
            Parity::None
        }
    };
    let baud = c.baud.unwrap_or(19200);
    if baud == 0 {
        dev.err(
            sink,
            "driver.baud",
            "baud must be above 0; the default is 19200",
        );
    }
    Some(DriverConfig::ModbusRtu {
        port: c.port,
        baud,
        parity,
        unit: c.unit.unwrap_or(1),
        timeout_ms: timeout(c.timeout_ms, dev, sink),
    })
}

/// `kind = "mqtt"`: the broker URL is parsed once here, and decides whether TLS files fit.
fn mqtt(v: toml::Value, base: &Path, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: RawMqtt = keys(v, dev, sink)?;
    let broker = BrokerUrl::parse(&c.broker);
    if let Err(e) = &broker {
        dev.err(sink, "driver.broker", e.clone());
    }
    if c.client_id.is_empty() {
        dev.err(
            sink,
            "driver.client_id",
            "client_id must not be empty; the broker tells clients apart by it",
        );
    }
    let plain = broker.as_ref().is_ok_and(|b| !b.tls);
    let tls = mqtt_tls(&c, plain, base, dev, sink);
    Some(DriverConfig::Mqtt {
        broker: broker.ok()?,
        client_id: c.client_id,
        username: c.username,
        password: c.password.map(Secret),
        tls,
    })
}

/// `kind = "opcua"`: the endpoint, the security mode, certificates that fit the mode, and a
/// user name with its password (or neither).
fn opcua(v: toml::Value, base: &Path, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: RawOpcua = keys(v, dev, sink)?;
    if !c.endpoint.starts_with("opc.tcp://") {
        dev.err(
            sink,
            "driver.endpoint",
            format!(
                "\"{}\" is not an OPC UA endpoint; write e.g. \"opc.tcp://host:4840/path\"",
                c.endpoint
            ),
        );
    }
    let security = OpcuaSecurity::parse(c.security.as_deref().unwrap_or("none"));
    if let Err(e) = &security {
        dev.err(sink, "driver.security", e.clone());
    }
    let server_cert = opcua_file("server_cert", c.server_cert, base, dev, sink);
    let client_cert = opcua_file("client_cert", c.client_cert, base, dev, sink);
    let client_key = opcua_file("client_key", c.client_key, base, dev, sink);
    // With an unknown mode (reported above) the certificates cannot be judged.
    let secured = security.as_ref().ok().map(|s| *s != OpcuaSecurity::None);
    let certs = [&server_cert, &client_cert, &client_key].map(Option::is_some);
    opcua_certs(secured, certs, dev, sink);
    opcua_user(c.username.as_deref(), c.password.is_some(), dev, sink);
    Some(DriverConfig::Opcua {
        endpoint: c.endpoint,
        security: security.ok()?,
        server_cert,
        client_cert,
        client_key,
        username: c.username,
        password: c.password.map(Secret),
    })
}

/// The OPC UA identity keys: `username` and `password` together (a UserName login) or neither
/// (anonymous), and no empty user name — half a login would otherwise fail only at the server,
/// as a refused identity.
fn opcua_user(username: Option<&str>, password: bool, dev: &Dev, sink: &mut Sink) {
    match (username, password) {
        (Some(""), _) => dev.err(
            sink,
            "driver.username",
            "username must not be empty; give the user the server knows, or remove username and password for an anonymous session",
        ),
        (Some(_), false) => dev.err(
            sink,
            "driver.password",
            "username is given without password; add password = \"${env:NAME}\" (the password from the environment variable NAME), or remove username for an anonymous session",
        ),
        (None, true) => dev.err(
            sink,
            "driver.username",
            "password is given without username; add username = \"...\" (the user the server knows), or remove password for an anonymous session",
        ),
        _ => {}
    }
}

/// One OPC UA certificate or key file, resolved against the plant file's folder; a missing
/// file is reported now rather than at the first connection.
fn opcua_file(
    key: &str,
    value: Option<String>,
    base: &Path,
    dev: &Dev,
    sink: &mut Sink,
) -> Option<PathBuf> {
    let path = base.join(value?);
    if !path.is_file() {
        dev.err(
            sink,
            &format!("driver.{key}"),
            format!(
                "{} does not exist (relative paths are relative to the plant file)",
                path.display()
            ),
        );
    }
    Some(path)
}

/// Whether the certificates given (`[server_cert, client_cert, client_key]`) fit the security
/// mode (`secured`: None when the mode is unknown): a secured link without a pinned server
/// certificate, or certificates that nothing would use, would pass unnoticed otherwise.
fn opcua_certs(secured: Option<bool>, given: [bool; 3], dev: &Dev, sink: &mut Sink) {
    let [server_cert, client_cert, client_key] = given;
    if secured == Some(true) && !server_cert {
        dev.err(sink, "driver.server_cert", "with security, the server's certificate must be pinned: add server_cert = \"server.der\" (the file the server presents)");
    }
    if secured == Some(false) && (server_cert || client_cert || client_key) {
        dev.err(sink, "driver.security", "certificates are given but security = \"none\"; set security = \"sign\" or \"sign_and_encrypt\", or remove them");
    }
    if client_cert != client_key {
        dev.err(sink, "driver.client_key", "give client_cert and client_key together, or neither (a certificate is then generated)");
    }
}

/// `kind = "can"`: the interface name is parsed once here; the DBC file resolves against the
/// plant file's folder.
fn can(v: toml::Value, base: &Path, dev: &Dev, sink: &mut Sink) -> Option<DriverConfig> {
    let c: RawCan = keys(v, dev, sink)?;
    let interface = CanInterface::parse(&c.interface);
    if let Err(e) = &interface {
        dev.err(sink, "driver.interface", e.clone());
    }
    Some(DriverConfig::Can {
        interface: interface.ok()?,
        bitrate: c.bitrate.unwrap_or(500_000),
        dbc: base.join(c.dbc),
    })
}

/// The `mqtt` driver's TLS files (`plain`: the broker URL is a valid non-TLS one): only with a
/// TLS broker URL, a client certificate only with its key, each file present (relative to the
/// plant file).
fn mqtt_tls(c: &RawMqtt, plain: bool, base: &Path, dev: &Dev, sink: &mut Sink) -> MqttTls {
    let cert_and_key = [
        ("client_cert", &c.client_cert, "client_key", &c.client_key),
        ("client_key", &c.client_key, "client_cert", &c.client_cert),
    ];
    for (key, value, other, other_value) in cert_and_key {
        if value.is_some() && other_value.is_none() {
            dev.err(
                sink,
                &format!("driver.{key}"),
                format!(
                    "{key} is set without {other}; mutual TLS needs the client certificate and \
                     its private key (both PEM): give both, or neither"
                ),
            );
        }
    }
    let mut file = |key: &str, value: &Option<String>| -> Option<PathBuf> {
        let value = value.as_ref()?;
        let path = base.join(value);
        let at = format!("driver.{key}");
        if plain {
            dev.err(
                sink,
                &at,
                format!(
                    "{key} is for TLS, but the broker \"{}\" is plain MQTT; write it as \
                     \"mqtts://host:8883\", or remove {key}",
                    c.broker
                ),
            );
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => dev.err(
                sink,
                &at,
                format!("\"{}\" is not a file; give a PEM file", path.display()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => dev.err(
                sink,
                &at,
                format!(
                    "the file \"{}\" does not exist; relative paths are relative to the plant \
                     file",
                    path.display()
                ),
            ),
            Err(e) => dev.err(
                sink,
                &at,
                format!("the file \"{}\" cannot be read: {e}", path.display()),
            ),
        }
        Some(path)
    };
    MqttTls {
        ca_file: file("ca_file", &c.ca_file),
        client_cert: file("client_cert", &c.client_cert),
        client_key: file("client_key", &c.client_key),
    }
}

/// `timeout_ms` with its default, refused outside [`crate::limits::TIMEOUT_MS`] so that a
/// typo cannot make a dead device look slow (or a slow one dead).
fn timeout(ms: Option<u64>, dev: &Dev, sink: &mut Sink) -> u64 {
    let ms = ms.unwrap_or(crate::plant::DEFAULT_TIMEOUT_MS);
    if let Err(m) = crate::limits::TIMEOUT_MS.check_u64(
        ms,
        "write how long to wait for one answer, in that range, or remove timeout_ms for the default 500",
    ) {
        dev.err(sink, "driver.timeout_ms", m);
    }
    ms
}
