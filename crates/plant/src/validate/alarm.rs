//! `[[alarm]]` tables: standing conditions over `devices.*` that block devices while they hold.

use super::Sink;
use super::exprs::{Catalog, ExprCtx, Want, check};
use crate::plant::{Alarm, WhenOffline};
use std::collections::BTreeMap;

/// Every key of an `[[alarm]]`, for an unknown key's message.
const ALARM_KEYS: &[&str] = &[
    "name",
    "when",
    "clear_when",
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
    // Names seen so far: a search through `out` per alarm made a hall's alarms quadratic.
    let mut names = std::collections::HashSet::new();
    for (i, item) in items.into_iter().enumerate() {
        if let Some(a) = alarm(i, item, catalog, sink) {
            if !names.insert(a.name.clone()) {
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

/// Checks one `[[alarm]]`; None when anything in it was refused (an alarm that half-works
/// would block devices for the wrong reason, or never).
fn alarm(i: usize, item: toml::Value, catalog: &Catalog, sink: &mut Sink) -> Option<Alarm> {
    let toml::Value::Table(t) = item else {
        sink.push(
            None,
            &format!("alarm[{i}]"),
            "write each alarm as an [[alarm]] table",
        );
        return None;
    };
    let before = sink.count();
    unknown_keys(i, &t, sink);
    let text = |k: &str| t.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let name = name(i, text("name").unwrap_or_default(), sink);
    let when = condition(i, "when", text("when"), catalog, sink);
    let clear_when = match text("clear_when") {
        None if t.contains_key("clear_when") => {
            sink.push(
                None,
                &key(i, "clear_when"),
                "clear_when is a condition in quotes, like \"devices.oven.temperature_c < 50\"",
            );
            None
        }
        None => None,
        src => Some(condition(i, "clear_when", src, catalog, sink)),
    };
    let for_ms = for_ms(i, t.get("for_ms"), sink);
    let blocks = blocks(i, t.get("blocks"), catalog, sink);
    let when_offline = when_offline(i, text("when_offline").as_deref(), sink);
    if sink.count() > before {
        return None;
    }
    Some(Alarm {
        name,
        when: when?,
        clear_when: clear_when.flatten(),
        for_ms,
        severity: text("severity").unwrap_or_else(|| "warning".into()),
        blocks,
        description: text("description").unwrap_or_default(),
        when_offline,
    })
}

/// The key `k` of the alarm at index `i`, as messages name it (alarms belong to no device).
fn key(i: usize, k: &str) -> String {
    format!("alarm[{i}].{k}")
}

/// Reports keys an alarm does not take, which would otherwise be ignored without a word.
fn unknown_keys(i: usize, t: &toml::Table, sink: &mut Sink) {
    for k in t.keys().filter(|k| !ALARM_KEYS.contains(&k.as_str())) {
        sink.push(
            None,
            &key(i, k),
            format!(
                "unknown key \"{k}\"; the keys of an alarm are {}",
                ALARM_KEYS.join(", ")
            ),
        );
    }
}

/// The alarm's name, which is the error code a stopped command gets, so it must look like one.
fn name(i: usize, name: String, sink: &mut Sink) -> String {
    let code_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.starts_with(|c: char| c.is_ascii_uppercase());
    if !code_ok {
        sink.push(None, &key(i, "name"), format!("name = {name:?}: an alarm's name is the code a stopped command gets, in capitals, like \"GUARD_DOOR_OPEN\""));
    }
    name
}

/// One of the alarm's conditions (`when`, `clear_when`): a bool over `devices.<id>.<signal>`
/// only, since an alarm belongs to no device whose bare signal names it could read.
fn condition(
    i: usize,
    field: &str,
    src: Option<String>,
    catalog: &Catalog,
    sink: &mut Sink,
) -> Option<crate::expr::Expr> {
    let empty = BTreeMap::new();
    let ctx = ExprCtx {
        device: "",
        action: "",
        own: &empty,
        catalog,
        params: &[],
    };
    let when = match src {
        None => {
            sink.push(None, &key(i, field), "an alarm needs when, a condition over devices.<id>.<signal>, like \"devices.door.open\"");
            None
        }
        Some(src) => check(&ctx, &src, Want::Bool)
            .map_err(|m| sink.push(None, &key(i, field), m))
            .ok(),
    };
    if let Some(w) = &when
        && (!w.signals().is_empty() || w.devices().is_empty())
    {
        sink.push(
            None,
            &key(i, field),
            format!("an alarm's {field} reads signals as devices.<id>.<signal> (it belongs to no device)"),
        );
    }
    when
}

/// How long `when` must hold before the alarm is raised (0 when not given), up to an hour.
fn for_ms(i: usize, value: Option<&toml::Value>, sink: &mut Sink) -> u64 {
    let Some(v) = value else {
        return 0;
    };
    match v
        .as_integer()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| *n <= 3_600_000)
    {
        Some(n) => n,
        None => {
            sink.push(None, &key(i, "for_ms"), "for_ms is how long when must hold before the alarm is raised: a whole number of milliseconds, 0 to 3600000");
            0
        }
    }
}

/// The devices the alarm blocks: at least one, each a device of the plant (an alarm that
/// blocks nothing would only look like a safeguard).
fn blocks(
    i: usize,
    value: Option<&toml::Value>,
    catalog: &Catalog,
    sink: &mut Sink,
) -> Vec<String> {
    let blocks: Vec<String> = match value.and_then(|v| v.as_array()) {
        Some(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        None => Vec::new(),
    };
    if blocks.is_empty() {
        sink.push(
            None,
            &key(i, "blocks"),
            "an alarm blocks devices: write blocks = [\"<device id>\", …]",
        );
    }
    for d in blocks.iter().filter(|d| !catalog.devices.contains_key(*d)) {
        let ids: Vec<&str> = catalog.devices.keys().map(String::as_str).collect();
        sink.push(
            None,
            &key(i, "blocks"),
            format!("unknown device \"{d}\"; the devices are {}", ids.join(", ")),
        );
    }
    blocks
}

/// What a silent device means for the alarm: `block` (the default) or `ignore`.
fn when_offline(i: usize, value: Option<&str>, sink: &mut Sink) -> WhenOffline {
    match value {
        None | Some("block") => WhenOffline::Block,
        Some("ignore") => WhenOffline::Ignore,
        Some(other) => {
            sink.push(None, &key(i, "when_offline"), format!("when_offline = {other:?}: write \"block\" (the default: a silent device counts as the alarm) or \"ignore\""));
            WhenOffline::Block
        }
    }
}
