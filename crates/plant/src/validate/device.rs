//! One `[[device]]`: its own keys and liveness; the driver table, `[device.sim]` and the
//! signals are checked in `driver.rs`, `sim.rs` and `signal.rs`.

use super::Dev;
use super::driver::driver;
use super::signal::signals;
use super::sim::device_sim;
use crate::error::Sink;
use crate::limits;
use crate::model::{RawDeviceHead, RawLiveness, typed_keys};
use crate::plant::{DeviceSim, DriverConfig, Liveness};
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
    /// Signals that were refused: expressions may still name them without a follow-on error,
    /// but their type is unknown, so those expressions are not dry-run.
    pub broken_signals: Vec<String>,
    pub description: String,
    pub driver: Option<DriverConfig>,
    pub poll_ms: u64,
    pub liveness: Liveness,
    pub raw_access: bool,
    pub max_rate: Option<crate::RateLimit>,
    pub gateways: Vec<String>,
    pub sim: Option<DeviceSim>,
    pub signals: Vec<crate::plant::Signal>,
    pub actions: Vec<toml::Value>,
}

impl Pending {
    /// The device's signals for expression checks: name → bool (true), number (false), or
    /// unknown (None: the signal was refused).
    pub fn signal_kinds(&self) -> std::collections::BTreeMap<String, Option<bool>> {
        let mut m: std::collections::BTreeMap<String, Option<bool>> = self
            .signals
            .iter()
            .map(|s| (s.name.clone(), Some(s.source.is_bool())))
            .collect();
        m.extend(self.broken_signals.iter().map(|n| (n.clone(), None)));
        m
    }
}

const DEFAULT_POLL_MS: u64 = 100;

/// Every key of a `[[device]]`, in the order an unknown key's message lists them.
pub(crate) const DEVICE_KEYS: &[&str] = &[
    "id",
    "description",
    "driver",
    "poll_ms",
    "liveness",
    "raw_access",
    "max_rate",
    "max_burst",
    "gateways",
    "sim",
    "signals",
    "action",
];

/// Checks one `[[device]]` but its actions: the id first (every message names it), then the
/// head keys, the driver, liveness, `[device.sim]` and the signals, in that order.
pub(crate) fn device(
    index: usize,
    value: toml::Value,
    base: &Path,
    sink: &mut Sink,
) -> Option<Pending> {
    let toml::Value::Table(mut t) = value else {
        sink.push(
            None,
            &format!("device[{index}]"),
            "a device must be a [[device]] table",
        );
        return None;
    };
    let raw_id = t.remove("id");
    let dev = dev_for(index, raw_id.as_ref());
    let raw_id = id_string(raw_id, &dev, sink);
    let driver_t = t.remove("driver");
    let sim_t = t.remove("sim");
    let signals_t = t.remove("signals");
    let actions_t = t.remove("action");
    let head: Option<RawDeviceHead> = typed_keys(toml::Value::Table(t), "", DEVICE_KEYS)
        .map_err(|(k, m)| dev.err(sink, &k, m))
        .ok();
    let label = raw_id.clone();
    let id = raw_id.filter(|id| valid_id(id, &dev, sink));
    let poll_ms = poll_ms(head.as_ref(), &dev, sink);
    let driver = driver_table(driver_t, base, &dev, sink);
    let raw_live = head.as_ref().and_then(|h| h.liveness.as_ref());
    let liveness = liveness(raw_live, poll_ms, driver.as_ref(), &dev, sink);
    let sim = sim_t.and_then(|v| device_sim(v, base, &dev, sink));
    let mut broken_signals = Vec::new();
    let signals = signals(signals_t, driver.as_ref(), &dev, sink, &mut broken_signals);
    let actions = action_tables(actions_t, &dev, sink);
    let max_rate = max_rate(head.as_ref(), &dev, sink);
    let gateways = gateways(head.as_ref(), &dev, sink);
    let (description, raw_access) = head
        .map(|h| (h.description, h.raw_access))
        .unwrap_or_default();
    Some(Pending {
        dev,
        id,
        label,
        broken_signals,
        description,
        driver,
        poll_ms,
        liveness,
        raw_access,
        max_rate,
        gateways,
        sim,
        signals,
        actions,
    })
}

/// `gateways`: instance names, each once, none empty.
fn gateways(head: Option<&RawDeviceHead>, dev: &Dev, sink: &mut Sink) -> Vec<String> {
    let names = head.and_then(|h| h.gateways.clone()).unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            dev.err(
                sink,
                &format!("gateways[{i}]"),
                "an empty gateway name; write the --instance name of a gateway that reaches this \
                 device, or remove gateways to let every instance take it"
                    .to_string(),
            );
        } else if !seen.insert(name) {
            dev.err(
                sink,
                &format!("gateways[{i}]"),
                format!("gateway \"{name}\" is listed twice; list each instance once"),
            );
        }
    }
    names
}

/// Where the device's errors go: under its id when it has a string one (even an invalid id
/// names the device better than its index), else under `device[index]`.
fn dev_for(index: usize, raw_id: Option<&toml::Value>) -> Dev {
    match raw_id.and_then(|v| v.as_str()) {
        Some(id) => Dev {
            id: Some(id.to_string()),
            prefix: String::new(),
        },
        None => Dev {
            id: None,
            prefix: format!("device[{index}]"),
        },
    }
}

/// The id as written, if it is a string; a missing or mistyped id is reported.
fn id_string(raw_id: Option<toml::Value>, dev: &Dev, sink: &mut Sink) -> Option<String> {
    match raw_id {
        Some(toml::Value::String(id)) => Some(id),
        Some(_) => {
            dev.err(
                sink,
                "id",
                "the device id must be a string such as \"lamp\"",
            );
            None
        }
        None => {
            dev.err(
                sink,
                "id",
                "missing key \"id\"; add id = \"...\" (lower-case letters, digits and _)",
            );
            None
        }
    }
}

/// Whether `id` is a valid device id (it becomes part of tool names); reports it if not.
fn valid_id(id: &str, dev: &Dev, sink: &mut Sink) -> bool {
    let ok = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        dev.err(sink, "id", format!("\"{id}\" is not a valid device id; use lower-case letters, digits and _ (e.g. \"{}\")", suggest_id(id)));
    }
    ok
}

/// `poll_ms` with its default, refused outside [`limits::POLL_MS`]; liveness defaults follow it.
fn poll_ms(head: Option<&RawDeviceHead>, dev: &Dev, sink: &mut Sink) -> u64 {
    let poll_ms = head.and_then(|h| h.poll_ms).unwrap_or(DEFAULT_POLL_MS);
    if let Err(m) = limits::POLL_MS.check_u64(
        poll_ms,
        "write how often the device is read, in that range, or remove poll_ms for the default 100",
    ) {
        dev.err(sink, "poll_ms", m);
    }
    poll_ms
}

/// The `driver` key, which every device needs and which must be a table.
fn driver_table(
    value: Option<toml::Value>,
    base: &Path,
    dev: &Dev,
    sink: &mut Sink,
) -> Option<DriverConfig> {
    match value {
        None => {
            dev.err(
                sink,
                "driver",
                "missing key \"driver\"; add e.g. driver = { kind = \"sim\", model = \"relay\" }",
            );
            None
        }
        Some(toml::Value::Table(d)) => driver(d, base, dev, sink),
        Some(_) => {
            dev.err(
                sink,
                "driver",
                "driver must be a table such as { kind = \"modbus-tcp\", address = \"host:502\" }",
            );
            None
        }
    }
}

/// The `[[device.action]]` tables, kept unchecked until every device's signals are known.
fn action_tables(value: Option<toml::Value>, dev: &Dev, sink: &mut Sink) -> Vec<toml::Value> {
    match value {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a,
        Some(_) => {
            dev.err(
                sink,
                "action",
                "write each action as a [[device.action]] table",
            );
            Vec::new()
        }
    }
}

/// The device's `max_rate` (with `max_burst`); a burst without a rate is reported, since it
/// would limit nothing.
fn max_rate(head: Option<&RawDeviceHead>, dev: &Dev, sink: &mut Sink) -> Option<crate::RateLimit> {
    let max_rate = head.and_then(|h| {
        let text = h.max_rate.as_deref()?;
        crate::RateLimit::parse(text, h.max_burst)
            .map_err(|m| dev.err(sink, "max_rate", m))
            .ok()
    });
    if head.is_some_and(|h| h.max_burst.is_some() && h.max_rate.is_none()) {
        dev.err(
            sink,
            "max_burst",
            "max_burst needs a max_rate (like max_rate = \"6/min\")",
        );
    }
    max_rate
}

fn suggest_id(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn liveness(
    raw: Option<&RawLiveness>,
    poll_ms: u64,
    driver: Option<&DriverConfig>,
    dev: &Dev,
    sink: &mut Sink,
) -> Liveness {
    let default = (5.0 * poll_ms as f64 / 1000.0).max(2.0);
    let empty = RawLiveness::default();
    let raw = raw.unwrap_or(&empty);
    // The default follows poll_ms, which is checked (and reported) on its own.
    let max_silence_s = raw.max_silence_s.unwrap_or(default);
    if let Some(given) = raw.max_silence_s
        && let Err(m) = limits::MAX_SILENCE_S.check_f64(
            given,
            &format!(
                "write how long the device may stay silent before it counts as offline, in that \
                 range, or remove max_silence_s for the default here, {default} s"
            ),
        )
    {
        dev.err(sink, "liveness.max_silence_s", m);
    }
    if raw.counter.is_some() && driver.is_some_and(|d| !d.is_register_based()) {
        dev.err(
            sink,
            "liveness.counter",
            "a heartbeat counter register needs a Modbus or sim driver; for MQTT use status_topic",
        );
    }
    if raw.status_topic.is_some() && driver.is_some_and(|d| !matches!(d, DriverConfig::Mqtt { .. }))
    {
        dev.err(
            sink,
            "liveness.status_topic",
            "status_topic needs an mqtt driver; for Modbus use counter = { holding = N }",
        );
    }
    match (&raw.status_json, &raw.status_topic) {
        (Some(_), None) => dev.err(
            sink,
            "liveness.status_json",
            "status_json points into the status topic's payload; add status_topic beside it",
        ),
        (Some(p), Some(_)) if !p.starts_with('/') => dev.err(
            sink,
            "liveness.status_json",
            format!("\"{p}\" is not a JSON pointer; write it with a leading slash, e.g. \"/{p}\""),
        ),
        _ => {}
    }
    reports_after_command_fits(raw, driver, dev, sink);
    Liveness {
        max_silence_s,
        counter: raw.counter.as_ref().map(|c| c.holding),
        status_topic: raw.status_topic.clone(),
        status_json: raw.status_json.clone(),
        online: raw.online.clone().unwrap_or_else(|| "online".into()),
        offline: raw.offline.clone().unwrap_or_else(|| "offline".into()),
        reports_after_command: raw.reports_after_command.unwrap_or(false),
    }
}

/// `reports_after_command` is a promise of a device that reports when it likes (MQTT): a polled
/// device is read every `poll_ms` whatever it promises.
fn reports_after_command_fits(
    raw: &RawLiveness,
    driver: Option<&DriverConfig>,
    dev: &Dev,
    sink: &mut Sink,
) {
    if raw.reports_after_command == Some(true)
        && driver.is_some_and(|d| !matches!(d, DriverConfig::Mqtt { .. }))
    {
        dev.err(
            sink,
            "liveness.reports_after_command",
            "reports_after_command is what an MQTT device promises (its state right after every \
             command); this device is read every poll_ms instead, so remove it",
        );
    }
}
