//! `[[alarm]]` tables: standing conditions over `devices.*` that block devices while they hold.

use super::Sink;
use super::exprs::{Catalog, ExprCtx, Want, check};
use crate::plant::{Alarm, WhenOffline};
use std::collections::BTreeMap;

/// Every key of an `[[alarm]]`, for an unknown key's message.
const ALARM_KEYS: &[&str] = &[
    "name",
    "when",
    "for_ms",
    "severity",
    "blocks",
    "description",
    "when_offline",
];

/// The alarms of the plant, checked against the devices' signals; problems go to `sink`.
pub(crate) fn alarms(value: Option<toml::Value>, catalog: &Catalog, sink: &mut Sink) -> Vec<Alarm> {
    let items = match value {
        None => return Vec::new(),
        Some(toml::Value::Array(a)) => a,
        Some(_) => {
            sink.push(None, "alarm", "write each alarm as an [[alarm]] table");
            return Vec::new();
        }
    };
    let mut out: Vec<Alarm> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Some(a) = alarm(i, item, catalog, sink) {
            if out.iter().any(|b| b.name == a.name) {
                sink.push(
                    None,
                    &format!("alarm[{i}].name"),
                    format!(
                        "the alarm name \"{}\" is used twice; give each alarm its own name",
                        a.name
                    ),
                );
                continue;
            }
            out.push(a);
        }
    }
    out
}

fn alarm(i: usize, item: toml::Value, catalog: &Catalog, sink: &mut Sink) -> Option<Alarm> {
    let key = |k: &str| format!("alarm[{i}].{k}");
    let toml::Value::Table(t) = item else {
        sink.push(
            None,
            &format!("alarm[{i}]"),
            "write each alarm as an [[alarm]] table",
        );
        return None;
    };
    let before = sink.count();
    for k in t.keys().filter(|k| !ALARM_KEYS.contains(&k.as_str())) {
        sink.push(
            None,
            &key(k),
            format!(
                "unknown key \"{k}\"; the keys of an alarm are {}",
                ALARM_KEYS.join(", ")
            ),
        );
    }
    let text = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let name = text("name").unwrap_or_default();
    let code_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_uppercase());
    if !code_ok {
        sink.push(None, &key("name"), format!("name = {name:?}: an alarm's name is the code a stopped command gets, in capitals, like \"GUARD_DOOR_OPEN\""));
    }
    let empty = BTreeMap::new();
    let ctx = ExprCtx {
        device: "",
        action: "",
        own: &empty,
        catalog,
        params: &[],
    };
    let when = match text("when") {
        None => {
            sink.push(None, &key("when"), "an alarm needs when, a condition over devices.<id>.<signal>, like \"devices.door.open\"");
            None
        }
        Some(src) => check(&ctx, &src, Want::Bool)
            .map_err(|m| sink.push(None, &key("when"), m))
            .ok(),
    };
    if let Some(w) = &when
        && (!w.signals().is_empty() || w.devices().is_empty())
    {
        sink.push(
            None,
            &key("when"),
            "an alarm's when reads signals as devices.<id>.<signal> (it belongs to no device)",
        );
    }
    let for_ms = match t.get("for_ms") {
        None => 0,
        Some(v) => match v
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n <= 3_600_000)
        {
            Some(n) => n,
            None => {
                sink.push(None, &key("for_ms"), "for_ms is how long when must hold before the alarm is raised: a whole number of milliseconds, 0 to 3600000");
                0
            }
        },
    };
    let blocks: Vec<String> = match t.get("blocks").and_then(|v| v.as_array()) {
        Some(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        None => Vec::new(),
    };
    if blocks.is_empty() {
        sink.push(
            None,
            &key("blocks"),
            "an alarm blocks devices: write blocks = [\"<device id>\", …]",
        );
    }
    for d in blocks.iter().filter(|d| !catalog.devices.contains_key(*d)) {
        let ids: Vec<&str> = catalog.devices.keys().map(String::as_str).collect();
        sink.push(
            None,
            &key("blocks"),
            format!("unknown device \"{d}\"; the devices are {}", ids.join(", ")),
        );
    }
    let when_offline = match text("when_offline").as_deref() {
        None | Some("block") => WhenOffline::Block,
        Some("ignore") => WhenOffline::Ignore,
        Some(other) => {
            sink.push(None, &key("when_offline"), format!("when_offline = {other:?}: write \"block\" (the default: a silent device counts as the alarm) or \"ignore\""));
            WhenOffline::Block
        }
    };
    if sink.count() > before {
        return None;
    }
    Some(Alarm {
        name,
        when: when?,
        for_ms,
        severity: text("severity").unwrap_or_else(|| "warning".into()),
        blocks,
        description: text("description").unwrap_or_default(),
        when_offline,
    })
}
