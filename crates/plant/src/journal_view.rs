//! What the commands that only read or tend the journal need from a plant file: where the
//! journal is, how long it keeps finished commands, how far back a `max_rate` looks, and the
//! action tools a report counts.
//!
//! `closedloop commands`, `trace`, `audit`, `report` and `journal` run on a desk, often without
//! the variables a plant's drivers read (`${env:STEPDRIVE_ADDR}`) and with the devices out of
//! reach. They read these keys alone: a driver is never checked, and a variable is resolved only
//! in the keys read here, so an unset one elsewhere stops nothing. `serve` builds the same view
//! from its fully loaded [`Plant`] ([`JournalView::of`]), so both read the same answers.

use crate::env::expand;
use crate::error::{PlantError, PlantErrors};
use crate::validate::server::{DEFAULT_JOURNAL, journal, journal_key, retention};
use crate::{Plant, RateLimit, Secret};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The journal-facing part of a plant file.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalView {
    /// The plant file, absolute.
    pub file: PathBuf,
    /// The journal's URL, as `[server] journal` resolves (SQLite paths absolute).
    pub journal: String,
    /// `[server] retain`, when the file says.
    pub retain: Option<Duration>,
    /// `[server] journal_key`: `None` when the plant sets none; `Some(Err(why))` when it names
    /// one this process cannot use (its variable unset on this desk, too short) — only
    /// `journal verify` needs it, so nothing else stops for it.
    pub journal_key: Option<Result<Secret, String>>,
    /// The longest span any `max_rate` of the plant looks back over (zero without one).
    pub rate_horizon: Duration,
    /// Every action tool in plant order: device id, action name, tool name.
    pub tools: Vec<(String, String, String)>,
}

impl JournalView {
    /// The view of a plant already loaded (by `serve`).
    pub fn of(plant: &Plant) -> JournalView {
        let rates = plant.devices.iter().flat_map(|d| {
            let actions = d.actions.iter().filter_map(|a| a.max_rate.as_ref());
            d.max_rate.iter().chain(actions)
        });
        JournalView {
            file: plant.file.clone(),
            journal: plant.server.journal.clone(),
            retain: plant.server.retain,
            journal_key: plant.server.journal_key.clone().map(Ok),
            rate_horizon: horizon(rates),
            tools: plant
                .actions()
                .map(|(d, a)| (d.id.clone(), a.name.clone(), a.tool_name.clone()))
                .collect(),
        }
    }
}

/// The longest look-back of `rates`.
fn horizon<'a>(rates: impl Iterator<Item = &'a RateLimit>) -> Duration {
    let longest = rates.map(|r| r.horizon_s()).fold(0.0, f64::max);
    Duration::from_secs_f64(longest.max(0.0))
}

/// Reads the journal-facing keys of the plant file at `path`, with `${env:NAME}` from `env`,
/// resolved in those keys only. Errors name the file and the key, as [`crate::load`]'s do.
pub fn load_journal_view(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<JournalView, PlantErrors> {
    let mut reader = Reader {
        file: path.display().to_string(),
        env,
        errors: vec![],
    };
    let src = std::fs::read_to_string(path).map_err(|e| {
        reader.push(None, None, format!("cannot read the plant file: {e}"));
        PlantErrors(std::mem::take(&mut reader.errors))
    })?;
    let doc = crate::parse_toml_in_pieces(&src).map_err(|e| {
        reader.push(None, None, format!("not valid TOML: {}", e.message()));
        PlantErrors(std::mem::take(&mut reader.errors))
    })?;
    if !doc.contains_key("server") && !doc.contains_key("device") {
        let message = "not a plant file: it has neither a [server] table nor a [[device]]".into();
        reader.push(None, None, message);
        return Err(PlantErrors(reader.errors));
    }
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let server = doc.get("server").and_then(toml::Value::as_table);
    let url = reader
        .text(server, None, "server.journal")
        .unwrap_or_else(|| DEFAULT_JOURNAL.to_string());
    let journal = journal(&url, base)
        .map_err(|m| reader.push(None, Some("server.journal"), m))
        .unwrap_or_default();
    let retain = reader.text(server, None, "server.retain").and_then(|t| {
        retention(&t)
            .map_err(|m| reader.push(None, Some("server.retain"), m))
            .ok()
    });
    let journal_key = reader.key(server);
    let (tools, rates) = reader.devices(&doc);
    if !reader.errors.is_empty() {
        return Err(PlantErrors(reader.errors));
    }
    Ok(JournalView {
        file: std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
        journal,
        retain,
        journal_key,
        rate_horizon: horizon(rates.iter()),
        tools,
    })
}

/// Reads keys one at a time, collecting what is wrong with each.
struct Reader<'a> {
    file: String,
    env: &'a dyn Fn(&str) -> Option<String>,
    errors: Vec<PlantError>,
}

impl Reader<'_> {
    fn push(&mut self, device: Option<&str>, key: Option<&str>, message: String) {
        self.errors.push(PlantError {
            file: self.file.clone(),
            device: device.map(str::to_string),
            key: key.map(str::to_string),
            line: None,
            message,
        });
    }

    /// The string at `path` (its last segment the key in `table`) with its variables resolved;
    /// `None` when absent or wrong.
    fn text(
        &mut self,
        table: Option<&toml::Table>,
        device: Option<&str>,
        path: &str,
    ) -> Option<String> {
        let key = path.rsplit('.').next().unwrap_or(path);
        let value = table?.get(key)?;
        let Some(s) = value.as_str() else {
            let message = format!("{key} must be a string, not {}", value.type_str());
            self.push(device, Some(path), message);
            return None;
        };
        match expand(s, self.env) {
            Ok(new) => Some(new.unwrap_or_else(|| s.to_string())),
            Err(unset) => {
                for var in unset {
                    self.push(device, Some(path), crate::validate::unset_message(&var));
                }
                None
            }
        }
    }

    /// `[server] journal_key`, with what stands in its way instead of an error of the file.
    fn key(&mut self, server: Option<&toml::Table>) -> Option<Result<Secret, String>> {
        let before = self.errors.len();
        let text = self.text(server, None, "server.journal_key");
        let why: Vec<String> = self.errors.drain(before..).map(|e| e.message).collect();
        if !why.is_empty() {
            return Some(Err(why.join("; ")));
        }
        text.map(journal_key)
    }

    /// A table's `max_rate` (with `max_burst`), when it has one that parses; `at` is the key
    /// path of the table inside its device (empty for the device itself).
    fn rate(&mut self, table: &toml::Table, device: &str, at: &str) -> Option<RateLimit> {
        let path = format!("{at}max_rate");
        let text = self.text(Some(table), Some(device), &path)?;
        let burst = match table.get("max_burst") {
            None => None,
            Some(v) => match v.as_integer().and_then(|b| u32::try_from(b).ok()) {
                Some(b) => Some(b),
                None => {
                    let message = format!(
                        "max_burst must be a whole number, like 2, not a {}",
                        v.type_str()
                    );
                    self.push(Some(device), Some(&format!("{at}max_burst")), message);
                    return None;
                }
            },
        };
        RateLimit::parse(&text, burst)
            .map_err(|m| self.push(Some(device), Some(&path), m))
            .ok()
    }

    /// Every device's action tools and rates.
    fn devices(&mut self, doc: &toml::Table) -> (Vec<(String, String, String)>, Vec<RateLimit>) {
        let (mut tools, mut rates) = (Vec::new(), Vec::new());
        let devices = doc.get("device").and_then(toml::Value::as_array);
        for (i, device) in devices.into_iter().flatten().enumerate() {
            let Some(device) = device.as_table() else {
                continue;
            };
            let id = device.get("id").and_then(toml::Value::as_str);
            let id = id.map_or_else(|| format!("device[{i}]"), str::to_string);
            rates.extend(self.rate(device, &id, ""));
            let actions = device.get("action").and_then(toml::Value::as_array);
            for action in actions
                .into_iter()
                .flatten()
                .filter_map(toml::Value::as_table)
            {
                let Some(name) = action.get("name").and_then(toml::Value::as_str) else {
                    continue;
                };
                rates.extend(self.rate(action, &id, &format!("action.{name}.")));
                tools.push((id.clone(), name.to_string(), format!("{id}_{name}")));
            }
        }
        (tools, rates)
    }
}

#[cfg(test)]
mod tests;
