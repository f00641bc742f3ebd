//! One recorded command judged again: its journaled readings, in order, through an action's
//! criteria, as the engine's judge applies them — `started_when` must have held once before
//! `done_when` counts, the first `fail_when` code that holds fails it, and a reading that lacks
//! a name an expression reads decides nothing with that expression.
//!
//! What the journal cannot give is not invented: `hold_ms` is not replayed (the journal keeps
//! a reading when its values change, not every poll), nor `requires` (checked before the write,
//! on values the journal does not keep). A command that nothing decides on its readings is
//! [`Verdict::Undecided`]: the journal stops where the old file decided, so what the new file
//! would have seen afterwards is unknown.

use closedloop_driver::Value;
use closedloop_journal::CommandRow;
use closedloop_plant::{Action, Expr, Params, Scope};
use serde_json::Map;
use std::collections::BTreeMap;
use std::fmt;

/// How a command ends, as far as its readings decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `done_when` held (after `started_when`).
    Completed,
    /// This `fail_when` code held.
    Failed(String),
    /// No reading decided it: it would have run on (to TIMEOUT if nothing changed).
    Undecided,
    /// The new file refuses its parameters: it would not have been accepted.
    Refused(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Completed => f.write_str("completed"),
            Verdict::Failed(code) => write!(f, "failed {code}"),
            Verdict::Undecided => {
                f.write_str("undecided (runs on, TIMEOUT unless a later reading decides)")
            }
            Verdict::Refused(why) => write!(f, "refused INVALID_PARAMS ({why})"),
        }
    }
}

/// One journaled reading: the values the criteria read (own signals by bare name, others as
/// `devices.<id>.<signal>`) and when the newest was read.
#[derive(Debug, Clone)]
pub(crate) struct Reading {
    pub values: Map<String, serde_json::Value>,
    pub read_at: String,
}

impl Reading {
    /// From a `signal` event's data; `None` for data of another shape.
    pub(crate) fn from_event(data: &serde_json::Value) -> Option<Reading> {
        Some(Reading {
            values: data.get("values")?.as_object()?.clone(),
            read_at: data
                .get("read_at")
                .and_then(|r| r.as_str())
                .unwrap_or("?")
                .to_string(),
        })
    }

    /// `position_mm = 70, moving = false (read at 2026-…)`.
    pub(crate) fn words(&self) -> String {
        let each: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect();
        format!("{} (read at {})", each.join(", "), self.read_at)
    }
}

/// A JSON value as an expression reads it.
pub(crate) fn value(v: &serde_json::Value) -> Option<Value> {
    match v {
        serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
        serde_json::Value::Number(n) => n.as_f64().map(Value::Number),
        _ => None,
    }
}

/// The outcome a command's row records, in the terms readings decide: `None` for a command no
/// reading decided (cancelled, refused, offline, sent, still open) or failed with a code its
/// action's criteria do not have (DEVICE_FAULT, ...). A `TIMEOUT`, a `FEEDBACK_MISMATCH` and a
/// `NO_FEEDBACK` are commands its readings did not decide before the deadline: undecided, and
/// judged again like the others (a looser tolerance may complete a FEEDBACK_MISMATCH).
pub(crate) fn recorded(row: &CommandRow, old: &Action) -> Option<Verdict> {
    match (row.status.as_str(), row.error_code.as_deref()) {
        ("completed", _) => Some(Verdict::Completed),
        ("timeout", _) => Some(Verdict::Undecided),
        ("failed", Some("FEEDBACK_MISMATCH" | "NO_FEEDBACK")) => Some(Verdict::Undecided),
        ("failed", Some(code)) if old.fail_when.iter().any(|(c, _)| c == code) => {
            Some(Verdict::Failed(code.to_string()))
        }
        _ => None,
    }
}

/// The verdict of `action` over `readings`, and the index of the reading that decided it.
pub(crate) fn judge(
    action: &Action,
    device: &str,
    params: &Params,
    readings: &[Reading],
) -> (Verdict, Option<usize>) {
    let mut started = action.started_when.is_none();
    for (i, r) in readings.iter().enumerate() {
        let (signals, devices) = scope_of(device, r);
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[],
        };
        let holds = |e: &Expr| e.eval_bool(&scope).unwrap_or(false);
        started = started || action.started_when.as_ref().is_some_and(holds);
        if let Some((code, _)) = action.fail_when.iter().find(|(_, e)| holds(e)) {
            return (Verdict::Failed(code.clone()), Some(i));
        }
        if started && action.done_when.as_ref().is_some_and(holds) {
            return (Verdict::Completed, Some(i));
        }
    }
    (Verdict::Undecided, None)
}

/// The first name `action`'s criteria read that none of `readings` holds: the journal keeps
/// only what the old file's criteria read, so a criterion on another signal cannot be judged
/// on it — said, never taken as "holds nothing" (a new `fail_when` on `overcurrent` once left
/// every command "unchanged").
pub(crate) fn unjournaled(action: &Action, device: &str, readings: &[Reading]) -> Option<String> {
    let criteria = (action.done_when.iter())
        .chain(action.fail_when.iter().map(|(_, e)| e))
        .chain(action.started_when.iter());
    let mut names = Vec::new();
    for e in criteria {
        names.extend(e.signals().iter().cloned());
        for (d, s) in e.devices() {
            names.push(match d == device {
                true => s.clone(),
                false => closedloop_plant::other_device_name(d, s),
            });
        }
    }
    let held = |n: &String| readings.iter().any(|r| r.values.contains_key(n));
    names.into_iter().find(|n| !held(n))
}

type Devices = BTreeMap<String, BTreeMap<String, Value>>;

/// A reading as the judge's scope has it: own signals by name, and every device's by id
/// (its own device among them).
fn scope_of(device: &str, r: &Reading) -> (BTreeMap<String, Value>, Devices) {
    let mut signals = BTreeMap::new();
    let mut devices = Devices::new();
    for (name, v) in &r.values {
        let Some(v) = value(v) else { continue };
        match closedloop_plant::other_device(name) {
            Some((d, s)) => {
                devices
                    .entry(d.to_string())
                    .or_default()
                    .insert(s.to_string(), v);
            }
            None => {
                signals.insert(name.clone(), v);
            }
        }
    }
    devices.insert(device.to_string(), signals.clone());
    (signals, devices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stepper() -> closedloop_plant::Plant {
        closedloop_plant::parse(
            r#"
[[device]]
id = "slide"
description = "A slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { input = 0, scale = 0.1 }
moving = { discrete_input = 0 }
stalled = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, scale = 0.1, value = "params.target_mm" }]
started_when = "moving"
done_when = "abs(position_mm - params.target_mm) <= 0.5 && !moving"
fail_when = { MOTOR_STALL = "stalled" }
expect_s = 2.0
"#,
            "t.toml",
            std::path::Path::new("."),
        )
        .expect("parses")
    }

    fn reading(values: serde_json::Value) -> Reading {
        Reading::from_event(&json!({"values": values, "read_at": "t"})).unwrap()
    }

    #[test]
    fn done_counts_only_after_started_and_a_fail_code_wins_over_done() {
        let plant = stepper();
        let action = plant.device("slide").unwrap().action("move_to").unwrap();
        let mut params = Params::new();
        params.insert(
            "target_mm".into(),
            closedloop_plant::ParamValue::Number(150.0),
        );
        let at_target = json!({"position_mm": 150.0, "moving": false, "stalled": false});
        let readings = [reading(at_target.clone())];
        assert_eq!(
            judge(action, "slide", &params, &readings),
            (Verdict::Undecided, None)
        );
        let moving = json!({"position_mm": 10.0, "moving": true, "stalled": false});
        let readings = [reading(moving), reading(at_target)];
        assert_eq!(
            judge(action, "slide", &params, &readings),
            (Verdict::Completed, Some(1))
        );
        let stalled = json!({"position_mm": 150.0, "moving": true, "stalled": true});
        let readings = [reading(stalled)];
        let failed = Verdict::Failed("MOTOR_STALL".into());
        assert_eq!(
            judge(action, "slide", &params, &readings),
            (failed, Some(0))
        );
    }
}
