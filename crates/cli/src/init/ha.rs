//! Discovered Home Assistant entities mapped onto plant devices: one device per discovered
//! device, a signal per entity state, an action per entity command, liveness from the
//! availability topic and `expire_after`, and a sentence for everything left out or doubtful.

#[path = "ha_entities.rs"]
mod entities;

use super::discovery::Entity;
use super::names::{snake, unique};
use entities::entity;
use std::collections::BTreeMap;

/// A generated signal (`{ topic, json, true_values }`).
#[derive(Debug)]
pub struct Sig {
    pub name: String,
    pub topic: String,
    pub json: Option<String>,
    /// Non-empty: a bool true on these payloads.
    pub true_values: Vec<String>,
    /// Beside `true_values`: the payloads that mean false (anything else is no value).
    pub false_values: Vec<String>,
    pub unit: Option<String>,
    pub description: String,
}

/// A generated parameter: a bool, or a number with its range.
#[derive(Debug)]
pub struct Param {
    pub name: String,
    pub range: Option<(f64, f64, Option<String>)>,
    pub description: String,
}

/// A generated action: one publish, confirmed by `done_when` or not at all.
#[derive(Debug)]
pub struct Act {
    pub name: String,
    pub description: String,
    pub params: Vec<Param>,
    pub topic: String,
    pub payload: String,
    pub done_when: Option<String>,
    /// A failure code and the signal that raises it (a lock's `JAMMED`).
    pub fail_when: Option<(String, String)>,
    /// The deadline's floor: `expect_s` is 0 (below), so this is the time the device has to
    /// report after the command.
    pub floor_ms: u64,
    pub idempotent: bool,
}

/// A generated device.
#[derive(Debug, Default)]
pub struct Board {
    pub id: String,
    pub description: String,
    /// The availability topic and its two payloads.
    /// The availability topic, its online and offline words, and the JSON pointer to the word
    /// when the payload is JSON (Zigbee2MQTT's `{"state": "online"}`).
    pub status: Option<Status>,
    pub max_silence_s: f64,
    pub signals: Vec<Sig>,
    pub actions: Vec<Act>,
}

/// Everything mapped, and what a person should look at.
#[derive(Debug, Default)]
pub struct Mapped {
    pub boards: Vec<Board>,
    pub skipped: Vec<String>,
    pub needs_person: Vec<String>,
}

/// The silence limit of a device that reports only on change and says no `expire_after`: the
/// longest the loader takes. Its last will (availability) tells it gone sooner.
pub const ON_CHANGE_SILENCE_S: f64 = 3600.0;

/// A device id leaves room for `_<action>` in a 64-character tool name.
const MAX_ID: usize = closedloop_plant::MAX_TOOL_NAME - 24;

/// Maps the entities, grouped by device in the order their config topics sort.
pub fn map(entities: &[Entity]) -> Mapped {
    let mut by_device: BTreeMap<&str, Vec<&Entity>> = BTreeMap::new();
    for e in entities {
        by_device.entry(&e.device_key).or_default().push(e);
    }
    let mut m = Mapped::default();
    let mut ids: Vec<String> = Vec::new();
    for list in by_device.values() {
        let first = list[0];
        let name = first.device_text("name").unwrap_or(&first.device_key);
        let id = unique(&snake(name), MAX_ID, |c| ids.iter().any(|i| i == c));
        ids.push(id.clone());
        let mut b = Board {
            id,
            description: describe_device(first, name),
            ..Board::default()
        };
        // Only an entity whose state is read speaks for the device's liveness.
        let mut heard: Vec<&Entity> = Vec::new();
        for e in list {
            let before = b.signals.len();
            entity(&mut b, e, name, &mut m);
            if b.signals.len() > before {
                heard.push(e);
            }
        }
        liveness(&mut b, list, &heard, &mut m);
        if b.signals.is_empty() && b.actions.is_empty() {
            m.skipped.push(format!(
                "device {name}: none of its entities could be mapped"
            ));
            continue;
        }
        m.boards.push(b);
    }
    m
}

fn describe_device(e: &Entity, name: &str) -> String {
    let make: Vec<&str> = ["manufacturer", "model"]
        .iter()
        .filter_map(|k| e.device_text(k))
        .collect();
    match make.is_empty() {
        true => format!("{name}, reached over MQTT"),
        false => format!("{name} ({}), reached over MQTT", make.join(" ")),
    }
}

/// The availability topic (one for the device) and the silence limit.
fn liveness(b: &mut Board, list: &[&Entity], heard: &[&Entity], m: &mut Mapped) {
    let silence = heard
        .iter()
        .filter_map(|e| e.config.get("expire_after")?.as_f64())
        .filter(|s| *s > 0.0)
        .fold(f64::INFINITY, f64::min);
    b.max_silence_s = if silence.is_finite() {
        silence.min(ON_CHANGE_SILENCE_S)
    } else {
        m.needs_person.push(format!(
            "{}: its entities report only on change (no expire_after), so silence counts as offline only after {ON_CHANGE_SILENCE_S} s{}; and until it reports once after closedloop starts it is unknown and takes no command (a retained message is no sign of life)",
            b.id,
            if list.iter().any(|e| availability(e).is_some()) { "; its last will says so at once" } else { " and nothing else tells it gone: set liveness.max_silence_s to its report interval" }
        ));
        ON_CHANGE_SILENCE_S
    };
    let lists = list
        .iter()
        .filter_map(|e| match e.config.get("availability") {
            Some(serde_json::Value::Array(a)) if a.len() > 1 => Some(a.len()),
            _ => None,
        });
    if let Some(n) = lists.max() {
        m.needs_person.push(format!(
            "{}: its entities name {n} availability topics (a bridge's and the device's own); only the device's own, the last, is watched — the others go unheard, a dead bridge shows only as silence",
            b.id
        ));
    }
    for e in list {
        match availability(e) {
            Some(Ok(s)) if b.status.is_none() => b.status = Some(s),
            Some(Ok(s)) if b.status.as_ref() != Some(&s) => m.needs_person.push(format!(
                "{}: {} names another availability topic ({}); only {} is watched",
                b.id,
                e.topic,
                s.0,
                b.status.as_ref().map_or("", |s| s.0.as_str())
            )),
            Some(Err(why)) => m.needs_person.push(format!("{}: {why}", b.id)),
            _ => {}
        }
    }
}

/// A watched availability topic: topic, online word, offline word, JSON pointer to the word.
pub type Status = (String, String, String, Option<String>);

/// The entity's availability topic with its payloads; `Err` when it cannot be watched as is.
/// Of a list (Zigbee2MQTT names its bridge's state first, then the device's own), the last —
/// the device's own — is watched.
fn availability(e: &Entity) -> Option<Result<Status, String>> {
    let (topic, on, off, template) = match e.config.get("availability") {
        Some(serde_json::Value::Array(list)) => {
            let a = list.last()?;
            let s = |k: &str| a.get(k).and_then(|v| v.as_str()).map(str::to_string);
            (
                s("topic")?,
                s("payload_available"),
                s("payload_not_available"),
                s("value_template"),
            )
        }
        _ => (
            e.text("availability_topic")?.to_string(),
            e.text("payload_available").map(str::to_string),
            e.text("payload_not_available").map(str::to_string),
            e.text("availability_template").map(str::to_string),
        ),
    };
    let pointer = match template.as_deref().map(super::discovery::pointer) {
        None | Some(Ok(None)) => None,
        Some(Ok(Some(p))) => Some(p),
        Some(Err(())) => {
            return Some(Err(format!(
                "its availability on {topic} is read through the template {}, which is not a plain value_json path: its last will is not watched",
                template.unwrap_or_default()
            )));
        }
    };
    let on = on.unwrap_or_else(|| "online".into());
    let off = off.unwrap_or_else(|| "offline".into());
    Some(Ok((topic, on, off, pointer)))
}

#[cfg(test)]
#[path = "ha_tests.rs"]
mod tests;
