//! The validation pass: TOML text → a resolved [`Plant`], or every problem found.
//!
//! Steps: parse the text into a generic TOML table (syntax errors stop here); replace
//! `${env:NAME}`; type the server, then each device piece by piece (head, driver, signals);
//! then, knowing every device's signals, each action with its expressions. Errors are
//! collected in a [`Sink`] so one run reports everything.

mod action;
mod device;
pub(crate) mod document;
mod driver;
mod exprs;
mod register;
mod rules;
pub(crate) mod server;
mod signal;
mod sim;
mod types;
mod write;

use crate::action::Action;
use crate::env::{self, Seg};
use crate::error::{PlantErrors, Sink};
use crate::model::typed;
use crate::plant::{Device, Plant, Server};
use crate::syntax;
use device::Pending;
mod alarm;
use exprs::Catalog;
use std::collections::BTreeMap;
use std::path::Path;

/// Where errors of one device go: its id (if it has one) and the key prefix inside it.
pub(crate) struct Dev {
    pub id: Option<String>,
    pub prefix: String,
}

impl Dev {
    pub fn err(&self, sink: &mut Sink, key: &str, msg: impl Into<String>) {
        sink.push(
            self.id.as_deref(),
            &crate::error::join(&self.prefix, key),
            msg,
        );
    }
}

/// Parses and validates `src`; `lookup` answers `${env:NAME}`.
pub(crate) fn run(
    src: &str,
    file_label: &str,
    base_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Plant, PlantErrors> {
    let mut sink = Sink::new(file_label);
    let mut doc: toml::Table = match document::parse(src) {
        Ok(t) => t,
        Err(e) => {
            syntax_error(src, &e, &mut sink);
            return Err(sink.into_errors());
        }
    };
    substitute_env(&mut doc, lookup, &mut sink);
    let base_dir = std::path::absolute(base_dir).unwrap_or_else(|_| base_dir.to_path_buf());
    let file = base_dir.join(Path::new(file_label).file_name().unwrap_or_default());
    let stem = Path::new(file_label)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("closedloop");
    top_level_keys(&doc, &mut sink);
    let server = server(&mut doc, stem, &base_dir, &mut sink);
    let pending = pending_devices(doc.remove("device"), &base_dir, &mut sink);
    let catalog = catalog(&pending);
    let alarms = alarm::alarms(doc.remove("alarm"), &catalog, &mut sink);
    let devices = devices(pending, &catalog, &mut sink);
    cells_reachable(&devices, &mut sink);
    sink.finish(Plant::new(file, server, devices, alarms))
}

/// Reports a TOML syntax error at its device, key and line: nothing else can be checked in a
/// file that does not parse, so it is the only error.
fn syntax_error(src: &str, e: &toml::de::Error, sink: &mut Sink) {
    let span = e.span().unwrap_or(0..0);
    let text = src.get(span.clone()).unwrap_or("");
    let msg = e.message().trim().to_string();
    let dup = msg.contains("duplicate key");
    let w = syntax::locate(src, span.start, text, dup);
    let msg = if dup {
        format!(
            "{msg}: this key is given twice; keep one (names of signals, params and \
                 tables must be unique)"
        )
    } else {
        format!("TOML syntax error: {msg}")
    };
    sink.push_at(w.device, w.key, w.line, msg);
}

/// Replaces `${env:NAME}` in `doc`; a variable that is not set is reported, and its key muted
/// so that the placeholder left there causes no follow-on error.
fn substitute_env(doc: &mut toml::Table, lookup: &dyn Fn(&str) -> Option<String>, sink: &mut Sink) {
    for m in env::substitute(doc, lookup) {
        let (device, key) = locate(doc, &m.path);
        sink.push(
            device.as_deref(),
            &key,
            format!("the environment variable {} is not set; set it before starting closedloop, or write the value in the file", m.var),
        );
        sink.mute(device.as_deref(), &key);
    }
}

/// Reports top-level keys other than `server`, `device` and `alarm`, which would otherwise be
/// ignored without a word.
fn top_level_keys(doc: &toml::Table, sink: &mut Sink) {
    for k in doc
        .keys()
        .filter(|k| !["server", "device", "alarm"].contains(&k.as_str()))
    {
        let hint = crate::suggest::did_you_mean(k, ["server", "device", "alarm"])
            .map(|b| format!(" (did you mean \"{b}\"?)"))
            .unwrap_or_default();
        sink.push(
            None,
            k,
            format!(
                "unknown top-level key \"{k}\"{hint}; a plant file has [server], [[device]] and [[alarm]] tables"
            ),
        );
    }
}

/// Takes `[server]` out of `doc` and checks it (defaults when it is absent).
fn server(doc: &mut toml::Table, stem: &str, base_dir: &Path, sink: &mut Sink) -> Server {
    let raw_server = match doc.remove("server") {
        None => Default::default(),
        Some(v) => typed(v, "server").unwrap_or_else(|(k, m)| {
            sink.push(None, &k, m);
            Default::default()
        }),
    };
    // Token scopes name devices; the ids as written are enough to check them, and checking
    // the server first keeps the messages in file order.
    let ids: Vec<String> = doc
        .get("device")
        .and_then(|d| d.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|d| d.get("id")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    server::server(raw_server, stem, base_dir, &ids, sink)
}

/// Checks every `[[device]]` but its actions (which need every device's signals), and that
/// ids are unique and there is at least one device.
fn pending_devices(value: Option<toml::Value>, base_dir: &Path, sink: &mut Sink) -> Vec<Pending> {
    let device_values = match value {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items,
        Some(_) => {
            sink.push(None, "device", "write each device as a [[device]] table");
            Vec::new()
        }
    };
    let mut pending: Vec<Pending> = Vec::with_capacity(device_values.len());
    // Ids seen so far: a search through `pending` per device made loading quadratic.
    let mut seen = std::collections::HashSet::new();
    for (i, value) in device_values.into_iter().enumerate() {
        let Some(p) = device::device(i, value, base_dir, sink) else {
            continue;
        };
        if let Some(id) = &p.id
            && !seen.insert(id.clone())
        {
            p.dev.err(
                sink,
                "id",
                format!("the device id \"{id}\" is used twice; give each device its own id"),
            );
        }
        pending.push(p);
    }
    if pending.is_empty() && sink.count() == 0 {
        sink.push(
            None,
            "device",
            "the plant declares no device; add a [[device]] table",
        );
    }
    pending
}

/// Every device's signals, for the expressions of actions and alarms (the first device of an
/// id wins; a repeated id is reported on its own).
fn catalog(pending: &[Pending]) -> Catalog {
    let mut catalog = Catalog::default();
    for p in pending {
        if let Some(id) = &p.label {
            catalog
                .devices
                .entry(id.clone())
                .or_insert_with(|| p.signal_kinds());
        }
    }
    catalog
}

/// Checks each device's actions against the catalog and assembles the devices that are
/// complete (a valid id and driver).
fn devices(pending: Vec<Pending>, catalog: &Catalog, sink: &mut Sink) -> Vec<Device> {
    let mut devices = Vec::with_capacity(pending.len());
    let mut tool_names: BTreeMap<String, String> = BTreeMap::new();
    for mut p in pending {
        let actions = action::actions(&mut p, catalog, sink);
        tool_name_clashes(&p, &actions, &mut tool_names, sink);
        if let (Some(id), Some(driver)) = (p.id, p.driver) {
            devices.push(Device {
                id,
                description: p.description,
                driver,
                poll_ms: p.poll_ms,
                liveness: p.liveness,
                raw_access: p.raw_access,
                max_rate: p.max_rate,
                gateways: p.gateways,
                sim: p.sim,
                signals: p.signals,
                actions,
            });
        }
    }
    devices
}

/// Refuses a cell (devices joined by exclusive groups, `cells.rs`) whose devices' `gateways`
/// lists have no gateway in common: no one gateway could hold the group, so its commands could
/// run at once on two gateways. Reported once, at the first device of the cell with a list.
fn cells_reachable(devices: &[Device], sink: &mut Sink) {
    let refs: Vec<&Device> = devices.iter().collect();
    for cell in crate::Cells::of(&refs).iter().filter(|c| c.disjoint) {
        let listed = devices
            .iter()
            .find(|d| cell.devices.contains(&d.id) && !d.gateways.is_empty());
        let Some(first) = listed else { continue };
        let others: Vec<&str> = cell
            .devices
            .iter()
            .filter(|d| **d != first.id)
            .map(String::as_str)
            .collect();
        sink.push(
            Some(&first.id),
            "gateways",
            format!(
                "{} shares an exclusive group with {}, and no gateway is on every one of their \
                 gateways lists, so no one gateway could run the group's commands one at a time; \
                 list a gateway that reaches them all, or give the actions different exclusive \
                 groups",
                first.id,
                others.join(", ")
            ),
        );
    }
}

/// Reports actions whose tool name another (device, action) pair already produced
/// (`tool_names`: tool name → `device.action` that first produced it), since MCP tools must
/// have unique names.
fn tool_name_clashes(
    p: &Pending,
    actions: &[Action],
    tool_names: &mut BTreeMap<String, String>,
    sink: &mut Sink,
) {
    for a in actions {
        let owner = format!("{}.{}", p.label.as_deref().unwrap_or("?"), a.name);
        // A repeated action name is reported as such; only clashes between different
        // (device, action) pairs are tool-name clashes.
        if let Some(first) = tool_names
            .insert(a.tool_name.clone(), owner.clone())
            .filter(|f| *f != owner)
        {
            p.dev.err(sink, &format!("action.{}.name", a.name), format!(
                "the tool name \"{}\" is also produced by {first}; rename the action or the device", a.tool_name));
        }
    }
}

/// The device id and device-relative key of a path into the document, for error messages.
fn locate(doc: &toml::Table, path: &[Seg]) -> (Option<String>, String) {
    let render = |segs: &[Seg], mut cur: Option<&toml::Value>| {
        let mut key = String::new();
        let mut prev_key = "";
        for s in segs {
            match s {
                Seg::Key(k) => {
                    if !key.is_empty() {
                        key.push('.');
                    }
                    key.push_str(k);
                    prev_key = k;
                    cur = cur.and_then(|v| v.get(k.as_str()));
                }
                Seg::Index(i) => {
                    cur = cur.and_then(|v| v.get(*i));
                    let name = cur.and_then(|v| v.get("name")).and_then(|n| n.as_str());
                    match name {
                        Some(n) if prev_key == "action" => key.push_str(&format!(".{n}")),
                        _ => key.push_str(&format!("[{i}]")),
                    }
                }
            }
        }
        key
    };
    if let [Seg::Key(d), Seg::Index(i), rest @ ..] = path
        && d == "device"
    {
        let dev = doc.get("device").and_then(|v| v.get(*i));
        if let Some(id) = dev.and_then(|v| v.get("id")).and_then(|v| v.as_str()) {
            return (Some(id.to_string()), render(rest, dev));
        }
    }
    (None, render(path, Some(&toml::Value::Table(doc.clone()))))
}
