//! The validation pass: TOML text → a resolved [`Plant`], or every problem found.
//!
//! Steps: parse the text before the devices, replace its `${env:NAME}`; then read the devices
//! one `[[device]]` at a time, each parsed, its `${env:NAME}` replaced and typed (head, driver,
//! signals) before the next is parsed; type the server (its token scopes name devices); then,
//! knowing every device's signals, the alarms and each action with its expressions. A file
//! that cannot be read piece by piece is parsed whole (syntax errors stop there) and checked the
//! same way. Errors are collected in a [`Sink`] so one run reports everything, in sections
//! that keep the report's order whichever way the file was read.

mod action;
mod device;
pub(crate) mod document;
mod driver;
pub(crate) mod exprs;
mod register;
mod rules;
pub(crate) mod server;
mod signal;
mod sim;
mod types;
mod unset;
pub(crate) use unset::message as unset_message;

/// Whether `key` is one of a `[[device]]` table's own keys (not a signal or an action's).
pub(crate) fn device_key(key: &str) -> bool {
    device::DEVICE_KEYS.contains(&key) && !matches!(key, "signals" | "action")
}
mod write;

use crate::action::Action;
use crate::error::{PlantErrors, Section, Sink};
use crate::model::typed;
use crate::plant::{Device, Plant, Server};
use crate::syntax;
use device::Pending;
mod alarm;
use exprs::Catalog;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
///
/// A file of `[[device]]` pieces is checked one piece at a time, each device as soon as its
/// text is parsed ([`document::piece`]); a piece only the whole text can read sends the check
/// back to the start, on the whole text parsed at once. Both ways give the same report.
pub(crate) fn run(
    src: &str,
    file_label: &str,
    base_dir: &Path,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Plant, PlantErrors> {
    let ctx = Ctx::new(file_label, base_dir, lookup);
    if let Some((head, texts)) = document::head_and_pieces(src)
        && let Some(done) = ctx.check(head, texts.into_iter().map(document::piece))
    {
        return done;
    }
    whole(&ctx, src)
}

/// Checks `src` parsed whole: a file that is not read piece by piece, or a piece that only the
/// whole text can read.
fn whole(ctx: &Ctx, src: &str) -> Result<Plant, PlantErrors> {
    let mut doc: toml::Table = match src.parse() {
        Ok(t) => t,
        Err(e) => {
            let mut sink = Sink::new(ctx.file_label);
            syntax_error(src, &e, &mut sink);
            return Err(sink.into_errors());
        }
    };
    // The whole text's lists of tables are read as one piece each; anything else under their
    // names stays with the head, to be reported there.
    let mut lists = Vec::new();
    for name in ["device", "alarm"] {
        if let Some(toml::Value::Array(_)) = doc.get(name)
            && let Some(toml::Value::Array(items)) = doc.remove(name)
        {
            lists.push(Some((name, items)));
        }
    }
    ctx.check(doc, lists.into_iter())
        .expect("the whole text needs no other reading")
}

/// What every part of the check needs: where the file is and how `${env:NAME}` is answered.
struct Ctx<'a> {
    file_label: &'a str,
    file: PathBuf,
    base_dir: PathBuf,
    stem: &'a str,
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Ctx<'a> {
    fn new(
        file_label: &'a str,
        base_dir: &Path,
        lookup: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let base_dir = std::path::absolute(base_dir).unwrap_or_else(|_| base_dir.to_path_buf());
        let file = base_dir.join(Path::new(file_label).file_name().unwrap_or_default());
        let stem = Path::new(file_label)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("closedloop");
        Ctx {
            file_label,
            file,
            base_dir,
            stem,
            lookup,
        }
    }

    /// Checks the head (the top-level keys but the lists of tables) and the pieces as they
    /// come: `None` as soon as a piece is `None` (it must be read in the whole text).
    fn check(
        &self,
        mut head: toml::Table,
        pieces: impl Iterator<Item = Option<(&'static str, Vec<toml::Value>)>>,
    ) -> Option<Result<Plant, PlantErrors>> {
        let mut sink = Sink::new(self.file_label);
        unset::in_table(&mut head, self.lookup, &mut sink);
        sink.section(Section::TopLevel);
        top_level_keys(&head, &mut sink);
        sink.section(Section::Rest);
        let mut pending = Pendings::default();
        if head.remove("device").is_some() {
            // Written as something other than a list of tables.
            sink.push(None, "device", "write each device as a [[device]] table");
        }
        let mut alarm_items: Option<Vec<toml::Value>> = None;
        for piece in pieces {
            match piece? {
                ("device", items) => {
                    for value in items {
                        pending.add(value, self, &mut sink);
                    }
                }
                (_, items) => alarm_items.get_or_insert_default().extend(items),
            }
        }
        // Before the server and the count of problems: as if the whole file's variables were
        // replaced first.
        let alarm_value = match alarm_items {
            Some(items) => {
                let mut t =
                    toml::Table::from_iter([("alarm".to_string(), toml::Value::Array(items))]);
                unset::in_table(&mut t, self.lookup, &mut sink);
                t.remove("alarm")
            }
            None => head.remove("alarm"),
        };
        sink.section(Section::Server);
        let server = server(
            &mut head,
            self.stem,
            &self.base_dir,
            &pending.ids(),
            &mut sink,
        );
        sink.section(Section::Rest);
        let pending = pending.finish(&mut sink);
        let catalog = catalog(&pending);
        let alarms = alarm::alarms(alarm_value, &catalog, &mut sink);
        let devices = devices(pending, &catalog, &mut sink);
        cells_reachable(&devices, &mut sink);
        Some(sink.finish(Plant::new(self.file.clone(), server, devices, alarms)))
    }
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

/// Takes `[server]` out of `doc` and checks it (defaults when it is absent). Token scopes name
/// devices: `ids` are the devices' ids as written.
fn server(
    doc: &mut toml::Table,
    stem: &str,
    base_dir: &Path,
    ids: &[String],
    sink: &mut Sink,
) -> Server {
    let raw_server = match doc.remove("server") {
        None => Default::default(),
        Some(v) => typed(v, "server").unwrap_or_else(|(k, m)| {
            sink.push(None, &k, m);
            Default::default()
        }),
    };
    server::server(raw_server, stem, base_dir, ids, sink)
}

/// Every `[[device]]` checked but its actions (which need every device's signals), one at a
/// time as the file is read; ids checked unique.
#[derive(Default)]
struct Pendings {
    list: Vec<Pending>,
    /// Ids seen so far: a search through `list` per device made loading quadratic.
    seen: std::collections::HashSet<String>,
    /// How many device tables were read.
    read: usize,
}

impl Pendings {
    /// Checks the next device table: its `${env:NAME}` replaced, then typed.
    fn add(&mut self, mut value: toml::Value, ctx: &Ctx, sink: &mut Sink) {
        let index = self.read;
        self.read += 1;
        unset::in_device(index, &mut value, ctx.lookup, sink);
        let Some(p) = device::device(index, value, &ctx.base_dir, sink) else {
            return;
        };
        if let Some(id) = &p.id
            && !self.seen.insert(id.clone())
        {
            p.dev.err(
                sink,
                "id",
                format!("the device id \"{id}\" is used twice; give each device its own id"),
            );
        }
        self.list.push(p);
    }

    /// The ids as written, for the server's token scopes.
    fn ids(&self) -> Vec<String> {
        self.list.iter().filter_map(|p| p.label.clone()).collect()
    }

    /// The devices; a plant of none is refused, unless something else was already reported.
    fn finish(self, sink: &mut Sink) -> Vec<Pending> {
        if self.list.is_empty() && sink.count() == 0 {
            sink.push(
                None,
                "device",
                "the plant declares no device; add a [[device]] table",
            );
        }
        self.list
    }
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
        let mut actions = action::actions(&mut p, catalog, sink);
        for a in &mut actions {
            a.readback_only = crate::readback::readback_only(&p.signals, a);
        }
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

#[cfg(test)]
mod tests;
