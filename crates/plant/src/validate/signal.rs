//! `[device.signals]`: each signal's source, checked against the device's driver.

use super::Dev;
use super::register::{RegKeys, SourceFamily, family};
use crate::error::Sink;
use crate::model::{RawSignal, typed};
use crate::plant::{DriverConfig, Signal, Source};
use closedloop_contract::ValueType;

pub(crate) fn signals(
    v: Option<toml::Value>,
    driver: Option<&DriverConfig>,
    dev: &Dev,
    sink: &mut Sink,
    broken: &mut Vec<String>,
) -> Vec<Signal> {
    let t = match v {
        None => return Vec::new(),
        Some(toml::Value::Table(t)) => t,
        Some(_) => {
            dev.err(
                sink,
                "signals",
                "signals must be a table: [device.signals] name = { holding = 0 }",
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(t.len());
    for (name, value) in t {
        let key = format!("signals.{name}");
        if let Err(m) = super::exprs::check_name(&name) {
            dev.err(
                sink,
                &key,
                format!("\"{name}\" cannot be a signal name: {m}"),
            );
            continue;
        }
        let keys: Vec<String> = value
            .as_table()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default();
        let typed_raw = typed::<RawSignal>(value, &key).map_err(|(k, m)| dev.err(sink, &k, m));
        match typed_raw
            .ok()
            .and_then(|raw| source(&raw, &keys, driver, &key, dev, sink).map(|s| (raw, s)))
        {
            Some((raw, source)) => out.push(Signal {
                name,
                source,
                unit: raw.unit,
                description: raw.description,
            }),
            None => broken.push(name),
        }
    }
    out
}

/// A signal's source, its family told by its keys and checked against the device's driver.
fn source(
    raw: &RawSignal,
    keys: &[String],
    driver: Option<&DriverConfig>,
    key: &str,
    dev: &Dev,
    sink: &mut Sink,
) -> Option<Source> {
    let fam = family(keys, SIGNAL_KEYS)
        .map_err(|m| dev.err(sink, key, m))
        .ok()?;
    if let Some(d) = driver
        && let Err(m) = fam.fits(d)
    {
        dev.err(sink, key, m);
        return None;
    }
    match fam {
        SourceFamily::Register => register(raw, key, dev, sink),
        SourceFamily::Topic => Some(topic(raw, key, dev, sink)),
        SourceFamily::Node | SourceFamily::Method => Some(Source::Node {
            node: raw.node.clone().unwrap_or_default(),
            ty: raw.ty.unwrap_or(ValueType::F64),
        }),
        SourceFamily::Can => can(raw, key, dev, sink),
    }
}

/// A Modbus register source; `None` (said in `sink`) when its area, address or encoding is bad.
fn register(raw: &RawSignal, key: &str, dev: &Dev, sink: &mut Sink) -> Option<Source> {
    let reg = RegKeys::from(raw);
    let (area, address, encoding) = reg
        .resolve()
        .map_err(|(k, m)| dev.err(sink, &crate::error::join(key, &k), m))
        .ok()?;
    Some(Source::Register {
        area,
        address,
        encoding,
    })
}

/// An MQTT topic source. Its mistakes are said in `sink` but still give a source, so every
/// key of the signal is checked in one pass.
fn topic(raw: &RawSignal, key: &str, dev: &Dev, sink: &mut Sink) -> Source {
    let true_values = raw.true_values.clone().unwrap_or_default();
    let false_values = raw.false_values.clone().unwrap_or_default();
    if let Some((given, missing, example)) = match (true_values.is_empty(), false_values.is_empty())
    {
        (false, true) => Some(("true_values", "false_values", "[\"OFF\", \"0\"]")),
        (true, false) => Some(("false_values", "true_values", "[\"ON\", \"1\"]")),
        _ => None,
    } {
        dev.err(sink, &format!("{key}.{missing}"), format!("{given} needs {missing} beside it: a payload in neither list (Home Assistant's \"None\" or \"unknown\", an empty message) is no value, never the other state; write e.g. {missing} = {example}"));
    }
    let default = if true_values.is_empty() {
        ValueType::F64
    } else {
        ValueType::Bool
    };
    if let Some(p) = raw
        .json
        .as_deref()
        .filter(|p| !p.is_empty() && !p.starts_with('/'))
    {
        dev.err(
            sink,
            &format!("{key}.json"),
            format!("\"{p}\" is not a JSON pointer; write it with a leading slash, e.g. \"/{p}\""),
        );
    }
    time_json_fits(raw, key, dev, sink);
    let ty = raw.ty.unwrap_or(default);
    Source::Topic {
        topic: raw.topic.clone().unwrap_or_default(),
        json: raw.json.clone(),
        time_json: raw.time_json.clone(),
        true_values,
        false_values,
        ty,
    }
}

/// A CAN source: a DBC message and one of its signals, which must be named.
fn can(raw: &RawSignal, key: &str, dev: &Dev, sink: &mut Sink) -> Option<Source> {
    let Some(signal) = raw.signal.clone() else {
        dev.err(
            sink,
            &format!("{key}.signal"),
            "a CAN source needs signal = \"<DBC signal name>\" beside message",
        );
        return None;
    };
    let message = raw.message.clone().map(|m| m.0).unwrap_or_default();
    Some(Source::Can {
        message,
        signal,
        ty: raw.ty.unwrap_or(ValueType::F64),
    })
}

/// `time_json` is a JSON pointer, into a payload whose value `json` selects (a payload that is
/// the value itself holds no time).
fn time_json_fits(raw: &RawSignal, key: &str, dev: &Dev, sink: &mut Sink) {
    let Some(p) = raw.time_json.as_deref() else {
        return;
    };
    let at = format!("{key}.time_json");
    if !p.starts_with('/') {
        let m =
            format!("\"{p}\" is not a JSON pointer; write it with a leading slash, e.g. \"/{p}\"");
        dev.err(sink, &at, m);
    } else if raw.json.is_none() {
        let m = "time_json reads a time beside the value in a JSON payload; name the value with json = \"/...\" too (a payload that is the value itself carries no time)";
        dev.err(sink, &at, m);
    }
}

/// The keys a signal source may have, by family.
const SIGNAL_KEYS: &[(SourceFamily, &[&str])] = &[
    (
        SourceFamily::Register,
        &[
            "coil",
            "discrete_input",
            "holding",
            "input",
            "type",
            "word_order",
            "byte_swap",
            "bit",
            "scale",
            "offset",
            "unit",
            "description",
        ],
    ),
    (
        SourceFamily::Topic,
        &[
            "topic",
            "json",
            "time_json",
            "true_values",
            "false_values",
            "type",
            "unit",
            "description",
        ],
    ),
    (SourceFamily::Node, &["node", "type", "unit", "description"]),
    (
        SourceFamily::Can,
        &["message", "signal", "type", "unit", "description"],
    ),
];
