//! `[device.sim]`: how `closedloop sim` serves a device (listen address, unit, broker, CAN
//! bus, OPC UA endpoint) and the simulator's own table, checked by the simulator.

use super::Dev;
use crate::error::Sink;
use crate::limits;
use crate::model::{RawSimCan, typed, typed_keys};
use crate::plant::{DeviceSim, SimCan};
use closedloop_sim::{SimConfig, SimConfigError};
use std::path::Path;

/// Checks `[device.sim]`, which only `closedloop sim` reads; None when it is not a table or
/// cannot be typed (the problem is reported).
pub(super) fn device_sim(
    v: toml::Value,
    base: &Path,
    dev: &Dev,
    sink: &mut Sink,
) -> Option<DeviceSim> {
    let toml::Value::Table(mut t) = v else {
        dev.err(
            sink,
            "sim",
            "[device.sim] must be a table with model = \"...\" and its options",
        );
        return None;
    };
    let listen = t.remove("listen");
    let unit = t.remove("unit");
    let broker = t.remove("broker");
    let can = t.remove("can").and_then(|v| sim_can(v, base, dev, sink));
    let opcua = t.remove("opcua");
    let taken = ["model", "listen", "unit", "broker", "can", "opcua"];
    let config: SimConfig = typed_keys(toml::Value::Table(t), "sim", &taken)
        .map_err(|(k, m)| dev.err(sink, &k, m))
        .ok()?;
    match config.validate() {
        Ok(_) | Err(SimConfigError::NotInProcess { .. }) => {}
        Err(e) => dev.err(sink, &format!("sim.{}", e.key()), e.to_string()),
    }
    let text = |v: Option<toml::Value>, key: &str, sink: &mut Sink| match v {
        None => None,
        Some(toml::Value::String(s)) => Some(s),
        Some(_) => {
            dev.err(
                sink,
                &format!("sim.{key}"),
                "must be a string such as \"127.0.0.1:5020\"",
            );
            None
        }
    };
    let listen = text(listen, "listen", sink);
    let broker = text(broker, "broker", sink);
    let opcua = text(opcua, "opcua", sink);
    socket_addr(opcua.as_deref(), "opcua", "127.0.0.1:4840", dev, sink);
    let unit = match unit {
        None => None,
        Some(toml::Value::Integer(u)) if (0..=255).contains(&u) => Some(u as u8),
        Some(_) => {
            dev.err(sink, "sim.unit", "must be a Modbus unit id from 0 to 255");
            None
        }
    };
    socket_addr(listen.as_deref(), "listen", "127.0.0.1:5020", dev, sink);
    Some(DeviceSim {
        config,
        listen,
        unit,
        broker,
        can,
        opcua,
    })
}

/// Reports a `sim.<key>` address that is not `ip:port` (`example`: one that is), since the
/// simulator binds it as given.
fn socket_addr(value: Option<&str>, key: &str, example: &str, dev: &Dev, sink: &mut Sink) {
    if let Some(l) = value
        && l.parse::<std::net::SocketAddr>().is_err()
    {
        dev.err(
            sink,
            &format!("sim.{key}"),
            format!("\"{l}\" is not an ip:port address; write e.g. \"{example}\""),
        );
    }
}

/// `[device.sim] can = { bus, dbc, status, command, period_ms = 50 }`.
fn sim_can(v: toml::Value, base: &Path, dev: &Dev, sink: &mut Sink) -> Option<SimCan> {
    let raw: RawSimCan = typed(v, "sim.can")
        .map_err(|(k, m)| dev.err(sink, &k, m))
        .ok()?;
    if raw.bus.is_empty()
        || !raw
            .bus
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        dev.err(
            sink,
            "sim.can.bus",
            format!(
                "bus \"{}\" must be a plain name (letters, digits, _ and -): it names the pty link closedloop sim makes",
                raw.bus
            ),
        );
    }
    let period_ms = raw.period_ms.unwrap_or(50);
    if let Err(m) = limits::PERIOD_MS.check_u64(
        period_ms,
        "write how often the node sends its status, in that range, or remove period_ms for the default 50",
    ) {
        dev.err(sink, "sim.can.period_ms", m);
    }
    let dbc = base.join(&raw.dbc);
    if !dbc.is_file() {
        dev.err(
            sink,
            "sim.can.dbc",
            format!(
                "{} does not exist (relative paths are relative to the plant file)",
                dbc.display()
            ),
        );
    }
    Some(SimCan {
        bus: raw.bus,
        dbc,
        status: raw.status,
        command: raw.command,
        period_ms,
    })
}
