//! `requires` against what the other device physically did: a command dispatched under a
//! precondition on another device was dispatched on a read of that device, answered with data
//! shortly before the dispatch, that showed the precondition physically true. A read the device
//! refused (exception 4), or no read at all, decides nothing. A relay whose contact reads
//! inverted is a limitation.
//!
//! The dispatch is what is checked, not the admission: a command that waited in its exclusive
//! group's queue (another command of the group was running when it was accepted) is held to
//! the reads around its dispatch, however long it waited and whatever admission read. Such
//! commands are counted (dispatched, refused at dispatch) for the summary; one refused at
//! dispatch because the precondition "no longer held" rests on a fresh read that showed it
//! physically false.

use super::{Cmd, Findings};
use crate::rig::{Obs, ObsKind, Outcome};
use crate::spec::{Case, DeviceSpec, Model, Requires};
use closedloop_contract::Area;

/// The block the signal `requires` reads lies in, and whether it physically holds in a state.
fn required(model: &Model) -> (Area, u16) {
    match model {
        Model::Relay { .. } => (Area::DiscreteInput, 0),
        Model::Stepper { .. } => (Area::DiscreteInput, 0),
        Model::Heater { .. } => (Area::Coil, 0),
    }
}

/// Whether `r` holds in `state` of its device.
fn holds(r: Requires, model: &Model, state: &closedloop_sim::SimState) -> Option<bool> {
    let on = match model {
        Model::Relay { .. } => state.contact?,
        Model::Stepper { .. } => state.moving?,
        Model::Heater { .. } => *state.coils.first()?,
    };
    Some(on != r.off)
}

/// Every dispatched command with a `requires` was dispatched on a truthful read that held.
pub fn check_requires(case: &Case, out: &Outcome, cmds: &[Cmd], f: &mut Findings) {
    for c in cmds {
        let own: &DeviceSpec = &case.devices[c.dev];
        let Some(r) = own.requires.filter(|_| c.action != "follow") else {
            continue;
        };
        let detail = c.j.row.detail.as_deref().unwrap_or("");
        if c.code == Some("INTERLOCK")
            && detail.starts_with("The precondition")
            && detail.contains("has had no value")
        {
            f.cover("requires refused on a signal without a value");
        }
        let queued = waited_in_queue(case, cmds, c);
        if queued {
            count_queued(c, f);
        }
        let other = &case.devices[r.device];
        let holds = |s: &closedloop_sim::SimState| holds(r, &other.model, s);
        if let Some(at) = refused_at_dispatch(c).filter(|_| queued) {
            no_longer_held(case, out, c, (r, at), f);
        }
        if other.push.is_some() {
            let window = (other.max_silence_s * 1000.0).ceil() as i64;
            super::board::requires(out, c, (r, window), holds, f);
            continue;
        }
        let Some((dispatched, epoch)) = c.dispatched else {
            continue;
        };
        let reads = fresh_reads(case, out, r, (dispatched, epoch));
        let shown = reads.iter().any(|o| holds(&o.state) == Some(true));
        let lied = reads
            .iter()
            .any(|o| matches!(o.kind, ObsKind::Read { lied: true, .. }));
        match (shown, lied) {
            (true, _) => {}
            (false, true) => f.limitations.push(format!(
                "command {} dispatched on a contact that reads inverted (swapped_contacts)",
                c.id
            )),
            (false, false) => f.violations.push(format!(
                "command {} was dispatched at {dispatched} ms, but no read of the device its \
                 requires names, answered since {} ms, showed it physically holding",
                c.id,
                since(case, r, dispatched)
            )),
        }
    }
}

/// Since when a read counts as fresh for a judgement at `at`: dispatch asks for a fresh read
/// and waits for it up to the request timeout (and a poll, and slack).
fn since(case: &Case, r: Requires, at: i64) -> i64 {
    let other = &case.devices[r.device];
    at - other.timeout_ms as i64 - other.poll_ms as i64 - 50
}

/// The answered reads of the block `r` reads, fresh for a judgement at `at` (of engine life
/// `epoch`).
fn fresh_reads<'o>(
    case: &Case,
    out: &'o Outcome,
    r: Requires,
    (at, epoch): (i64, usize),
) -> Vec<&'o Obs> {
    let block = required(&case.devices[r.device].model);
    let since = since(case, r, at);
    (out.obs.iter())
        .filter(|o| o.dev == r.device && o.epoch == epoch)
        .filter(|o| matches!(o.kind, ObsKind::Read { block: (a, s, _), .. } if (a, s) == block))
        .filter(|o| o.t_ms() >= since && o.seen_by(at))
        .collect()
}

/// Whether `c` waited in its group's queue: another command of the group was running (between
/// its dispatch and its end, in the same engine life) when `c` was accepted.
fn waited_in_queue(case: &Case, cmds: &[Cmd], c: &Cmd) -> bool {
    let group = |k: usize| case.devices[k].group_name(&crate::spec::device_id(&case.devices, k));
    let Some(accepted) = c.accepted else {
        return false;
    };
    cmds.iter().any(|o| {
        let (Some((from, e1)), Some((to, e2))) = (o.dispatched, o.terminal) else {
            return false;
        };
        o.id != c.id
            && e1 == e2
            && group(o.dev) == group(c.dev)
            && from <= accepted
            && accepted < to
    })
}

/// When dispatch refused `c` on its precondition (`failed INTERLOCK`, nothing written).
fn refused_at_dispatch(c: &Cmd) -> Option<i64> {
    let detail = c.j.row.detail.as_deref().unwrap_or("");
    let refused = c.status == "failed"
        && c.code == Some("INTERLOCK")
        && c.dispatched.is_none()
        && detail.contains("The precondition");
    refused.then(|| c.terminal.map(|(t, _)| t)).flatten()
}

fn count_queued(c: &Cmd, f: &mut Findings) {
    match (c.dispatched, refused_at_dispatch(c)) {
        (Some(_), _) => f.cover("queued under requires, then dispatched"),
        (None, Some(_)) => f.cover("queued under requires, refused at dispatch"),
        (None, None) => f.cover("queued under requires, ended otherwise"),
    }
}

/// A queued command refused at dispatch because its precondition "no longer held": a fresh
/// read of the other device (a report, for a board) showed it physically false.
fn no_longer_held(case: &Case, out: &Outcome, c: &Cmd, (r, at): (Requires, i64), f: &mut Findings) {
    let detail = c.j.row.detail.as_deref().unwrap_or("");
    if !detail.contains("no longer held") {
        return;
    }
    let Some((_, epoch)) = c.terminal else {
        return;
    };
    let other = &case.devices[r.device];
    let states: Vec<(&closedloop_sim::SimState, bool)> = match other.push {
        Some(_) => {
            let reps = super::board::reports(out, r.device);
            (super::no_value::judged_at(&reps, epoch, at).into_iter())
                .filter(|x| !x.no_value)
                .map(|x| (x.state, x.lied))
                .collect()
        }
        None => (fresh_reads(case, out, r, (at, epoch)).into_iter())
            .map(|o| (&o.state, matches!(o.kind, ObsKind::Read { lied: true, .. })))
            .collect(),
    };
    if states
        .iter()
        .any(|(s, lied)| *lied || holds(r, &other.model, s) == Some(false))
    {
        return;
    }
    f.violations.push(format!(
        "command {} was refused at {at} ms because its precondition no longer held, but no fresh \
         read of the device it names showed it physically false ({} reads)",
        c.id,
        states.len()
    ));
}
