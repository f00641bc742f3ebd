//! `diff --journal`'s replay against the engine: every command the journal records as decided
//! by its readings (completed; timeout, `FEEDBACK_MISMATCH`, `NO_FEEDBACK`: undecided; failed with
//! a `fail_when` code) is judged again from its journal under the same plant
//! (`closedloop_engine::verdict::replay`), and a definite verdict the replay gives must be the
//! one the engine gave: never "completed" where the engine did not complete, never a code it did
//! not fail with. "Undecided, because …" is always allowed — it claims nothing.

use super::Findings;
use super::cmd::Cmd;
use closedloop_engine::verdict::{Journaled, Timeline, Verdict, replay};
use closedloop_plant::{Plant, Verification};

/// What the journal row says the readings decided, as the replay names it; `None` for a
/// command the readings did not decide (cancelled, offline, refused, an alarm, ...).
fn recorded(c: &Cmd, fail_codes: &[String]) -> Option<Verdict> {
    match (c.status, c.code) {
        ("completed", _) => Some(Verdict::Completed),
        ("timeout", _) | ("failed", Some("FEEDBACK_MISMATCH" | "NO_FEEDBACK")) => {
            Some(Verdict::Undecided(None))
        }
        ("failed", Some(code)) if fail_codes.iter().any(|c| c == code) => {
            Some(Verdict::Failed(code.to_string()))
        }
        _ => None,
    }
}

/// Checks every decided feedback command's replay against the engine's verdict.
pub fn check_replay(plant: &Plant, cmds: &[Cmd], f: &mut Findings) {
    for c in cmds {
        let Some(device) = plant.devices.iter().find(|d| d.id == c.j.row.device) else {
            continue;
        };
        let Some(action) = device.action(c.action) else {
            continue;
        };
        let codes: Vec<String> = action.fail_when.iter().map(|(c, _)| c.clone()).collect();
        let Some(was) = recorded(c, &codes) else {
            continue;
        };
        if action.verification != Verification::Feedback {
            continue;
        }
        let args = c.j.row.params.as_object().cloned().unwrap_or_default();
        let Ok(params) = action.check_params(&args) else {
            continue;
        };
        let events: Vec<_> = c.j.events.iter().map(|(_, e)| e.clone()).collect();
        let readings: Vec<Journaled> = (events.iter())
            .filter(|e| e.event == "signal")
            .filter_map(|e| Journaled::from_event(&e.data))
            .collect();
        let (now, at) = replay(action, device, &params, &Timeline::of(&events), &readings);
        match &now {
            Verdict::Undecided(Some(_)) => f.cover("replay: undecided with its reason"),
            v if *v == was => f.cover("replay: the engine's verdict"),
            Verdict::Undecided(None) => f.cover("replay: undecided on what was journaled"),
            _ => f.violations.push(format!(
                "command {} ({}): the engine ended it {} {:?}, the journal's replay says {now:?} at reading {at:?} of {readings:?}",
                c.id, c.action, c.status, c.code
            )),
        }
    }
}
