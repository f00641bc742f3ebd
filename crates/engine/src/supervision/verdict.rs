//! The verdict over readings, defined once: what a reading's values say under an action's
//! criteria ([`holds`]: the first `fail_when` code, `done_when`, `started_when`, `stopped_when`),
//! used by the running command's judge; and a recorded command judged again from its journal
//! ([`replay`]) by the same [`Machine`](crate::machine::Machine) the engine ran it on — fail first, `started_when` before
//! `done_when`, `hold_ms`, the early rule and "already so" — so `closedloop diff --journal`
//! cannot give a command a verdict the engine's rules would not.
//!
//! # What the journal cannot replay is said, never guessed
//! The journal keeps a reading when its values change, with when its newest and oldest values
//! were read (`read_at`, `read_from`), the acknowledgement's time, and at dispatch the
//! deadline, the budget it was counted with and `done_when`'s values (`baseline`). Where the
//! engine's decision would rest on something else, the replay ends [`Verdict::Undecided`] with
//! the reason: `hold_ms` met only between two journaled readings (the samples in between were
//! not kept), a reading that may have come before `expect_s` after the acknowledgement when
//! `done_when` may already have held at dispatch, a command supervised across a restart.

use closedloop_contract::Value;
use closedloop_journal::EventRow;
/// The inverse of the link's `value_json`: how the replay and `diff --journal` read a journaled value.
pub use closedloop_link::value_of_json;
use closedloop_plant::{Action, Expr, Scope, other_device};
use serde_json::Map;
use std::collections::BTreeMap;

/// What one reading's values say under an action's criteria.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holds {
    /// The first `fail_when` code whose expression holds (fail first).
    pub failed: Option<String>,
    /// `done_when` holds.
    pub done: bool,
    /// `started_when` holds, or the action has none.
    pub started: bool,
    /// `stopped_when` holds, or a `started_when` no longer does.
    pub stopped: bool,
}

/// The criteria of `action` on `scope`: an expression that cannot be evaluated (a value
/// missing) holds nothing.
pub fn holds(action: &Action, scope: &Scope) -> Holds {
    let holds = |e: &Expr| e.eval_bool(scope).unwrap_or(false);
    Holds {
        failed: (action.fail_when.iter())
            .find(|(_, e)| holds(e))
            .map(|(c, _)| c.clone()),
        done: action.done_when.as_ref().is_some_and(holds),
        started: action.started_when.as_ref().is_none_or(holds),
        stopped: action.stopped_when.as_ref().is_some_and(holds)
            || action.started_when.as_ref().is_some_and(|s| !holds(s)),
    }
}

/// How a recorded command ends when judged again, as far as its journal shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `done_when` held, as the engine requires it.
    Completed,
    /// This `fail_when` code held.
    Failed(String),
    /// Nothing journaled decides it: it would run on (to its deadline unless a later reading
    /// decides), or the engine's decision would rest on what the journal did not keep — `None`
    /// for the first, the reason for the second.
    Undecided(Option<String>),
}

/// One journaled reading (a `signal` event): the values the criteria read (own signals by bare
/// name, others' as `devices.<id>.<signal>`) and when its newest and oldest were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Journaled {
    pub values: Map<String, serde_json::Value>,
    /// Wall ms of the newest value (`read_at`).
    pub read_at_ms: Option<i64>,
    /// Wall ms of the oldest value (`read_from`; journals before it have only `read_at`).
    pub read_from_ms: Option<i64>,
}

impl Journaled {
    /// From a `signal` event's data; `None` for data of another shape.
    pub fn from_event(data: &serde_json::Value) -> Option<Journaled> {
        let time = |k: &str| data.get(k)?.as_str().and_then(crate::clock::parse_rfc3339);
        Some(Journaled {
            values: data.get("values")?.as_object()?.clone(),
            read_at_ms: time("read_at"),
            read_from_ms: time("read_from"),
        })
    }
}

/// What the replay needs of a command's timeline besides its readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// When the deadline was counted from: the journaled deadline less its budget (or the
    /// `dispatched` event's time, a few ms late, in journals without the budget).
    pub dispatched_ms: Option<i64>,
    /// The deadline the command ran under (journaled at dispatch): every journaled reading
    /// was judged before it.
    pub deadline_ms: Option<i64>,
    /// When the acknowledgement was journaled (just after it came).
    pub acked_ms: Option<i64>,
    /// `done_when`'s values at dispatch, by evidence name.
    pub baseline: Option<Map<String, serde_json::Value>>,
    /// The command was supervised across a restart (its baseline did not survive).
    pub recovered: bool,
}

impl Timeline {
    /// From a command's timeline.
    pub fn of(events: &[EventRow]) -> Timeline {
        let find = |name: &str| events.iter().find(|e| e.event == name);
        let dispatched = find("dispatched");
        let data = dispatched.map(|e| &e.data);
        let deadline_ms = data
            .and_then(|d| d.get("deadline")?.as_str())
            .and_then(crate::clock::parse_rfc3339);
        let counted_from = data.zip(deadline_ms).and_then(|(d, deadline)| {
            Some(deadline - (d.get("budget_s")?.as_f64()? * 1000.0).round() as i64)
        });
        Timeline {
            dispatched_ms: counted_from.or(dispatched.map(|e| e.at_ms)),
            deadline_ms,
            acked_ms: find("device_ack").map(|e| e.at_ms),
            baseline: data.and_then(|d| d.get("baseline")?.as_object().cloned()),
            recovered: find("recovered").is_some() || find("claimed").is_some(),
        }
    }
}

type Devices = BTreeMap<String, BTreeMap<String, Value>>;

/// Journaled values as the criteria's scope has them: own signals by name, and every device's
/// by id (its own device among them).
pub fn scope_of(
    device: &str,
    values: &Map<String, serde_json::Value>,
) -> (BTreeMap<String, Value>, Devices) {
    let mut signals = BTreeMap::new();
    let mut devices = Devices::new();
    for (name, v) in values {
        let Some(v) = value_of_json(v) else { continue };
        match other_device(name) {
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
    // Its own device among them: beside what a criterion names `devices.<own id>.<signal>`.
    let own = devices.entry(device.to_string()).or_default();
    own.extend(signals.iter().map(|(k, v)| (k.clone(), *v)));
    (signals, devices)
}

#[path = "verdict/replay.rs"]
mod replaying;
pub use replaying::replay;

#[cfg(test)]
#[path = "verdict/tests.rs"]
mod tests;
