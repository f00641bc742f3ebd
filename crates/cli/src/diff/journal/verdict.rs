//! One recorded command judged again: its journaled readings and timeline through the engine's
//! own rules (`closedloop_engine::verdict`: the machine the engine runs, fed the readings as it
//! would have judged them — fail first, `started_when`, `hold_ms`, the early rule, "already so",
//! the deadline), never a simplified copy of them.
//!
//! What the journal cannot give is not invented: where the engine's decision would rest on what
//! was not journaled (samples between two readings for `hold_ms`, the values at dispatch for
//! the early rule, a restart), the command is not judged and the reason is counted; nor is
//! `requires` (checked before the write). A command that nothing decides on its readings is
//! [`Verdict::Undecided`]: the journal stops where the old file decided, so what the new file
//! would have seen afterwards is unknown.

use closedloop_engine::verdict::Timeline;
use closedloop_journal::CommandRow;
use closedloop_plant::{Action, Device, Params};
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

/// One journaled reading, as the engine's replay reads it.
pub(crate) type Reading = closedloop_engine::verdict::Journaled;

/// `position_mm = 70, moving = false (read at 2026-…)`.
pub(crate) fn words(r: &Reading) -> String {
    let each: Vec<String> = (r.values.iter())
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    let at = r
        .read_at_ms
        .map_or("?".to_string(), closedloop_engine::clock::rfc3339);
    format!("{} (read at {at})", each.join(", "))
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

/// The verdict of `action` (of `device`) over a command's journaled `readings` and timeline,
/// by the engine's own rules (`closedloop_engine::verdict::replay`), and the index of the
/// reading that decided it; `Err` with the reason where the journal does not keep what the
/// engine's decision would rest on.
pub(crate) fn judge(
    action: &Action,
    device: &Device,
    params: &Params,
    timeline: &Timeline,
    readings: &[Reading],
) -> Result<(Verdict, Option<usize>), String> {
    use closedloop_engine::verdict::{Verdict as V, replay};
    let (v, at) = replay(action, device, params, timeline, readings);
    Ok((
        match v {
            V::Completed => Verdict::Completed,
            V::Failed(code) => Verdict::Failed(code),
            V::Undecided(None) => Verdict::Undecided,
            V::Undecided(Some(why)) => return Err(why),
        },
        at,
    ))
}

/// The first name `action`'s criteria read that none of `readings` holds: the journal keeps
/// only what the old file's criteria read, so a criterion on another signal cannot be judged
/// on it — said, never taken as "holds nothing" (a new `fail_when` on `overcurrent` once left
/// every command "unchanged").
pub(crate) fn unjournaled(action: &Action, readings: &[Reading]) -> Option<String> {
    let criteria = (action.done_when.iter())
        .chain(action.fail_when.iter().map(|(_, e)| e))
        .chain(action.started_when.iter());
    let mut names = Vec::new();
    for e in criteria {
        names.extend(e.signals().iter().cloned());
        // As the judge journals them: a criterion naming `devices.<id>.<signal>`, even of its
        // own device, is journaled by that name.
        for (d, s) in e.devices() {
            names.push(closedloop_plant::other_device_name(d, s));
        }
    }
    let held = |n: &String| readings.iter().any(|r| r.values.contains_key(n));
    names.into_iter().find(|n| !held(n))
}
