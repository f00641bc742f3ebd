//! The physical side of the checks: what `done_when` means for a device's true state, and
//! which reads the engine could have judged (fresh, answered, truthful).

use super::check::Cmd;
use super::rig::{Obs, ObsKind, Outcome};
use super::spec::*;
use closedloop_sim::SimState;
use std::collections::BTreeMap;

/// The device whose state `done_when` reads: the command's own, or the one `follow` watches.
pub fn done_device(case: &Case, c: &Cmd) -> usize {
    match (c.action, case.devices[c.dev].follow) {
        ("follow", Some(k)) => k,
        _ => c.dev,
    }
}

pub fn param(c: &Cmd, name: &str) -> Option<serde_json::Value> {
    c.j.row.params.get(name).cloned()
}

/// Whether the physical state satisfies the command's `done_when`.
pub fn physically_done(case: &Case, c: &Cmd, s: &SimState) -> bool {
    match &case.devices[done_device(case, c)].model {
        Model::Relay { .. } => {
            let on = param(c, "on").and_then(|v| v.as_bool());
            on.is_some() && s.contact == on
        }
        Model::Stepper { .. } => {
            let target = param(c, "target_mm")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN);
            s.position_mm
                .is_some_and(|p| (p - target).abs() <= 0.2 + 0.005 + 1e-9)
                && s.moving == Some(false)
                && s.fault == Some(false)
        }
        Model::Heater { .. } => {
            let to = param(c, "to_c")
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN);
            // The register holds tenths, rounded: it reads to_c - 0.5 from to_c - 0.55 on.
            s.temperature_c.is_some_and(|t| t >= to - 0.55 - 1e-9)
        }
    }
}

/// The physical quantities `done_when` reads, as the registers would hold them (a relay's
/// contact, an axis' position in 0.01 mm with moving and fault, a temperature in tenths).
pub fn feedback(model: &Model, s: &SimState) -> (i64, bool, bool) {
    match model {
        Model::Relay { .. } => (i64::from(s.contact == Some(true)), false, false),
        Model::Stepper { .. } => (
            (s.position_mm.unwrap_or(0.0) * 100.0).round() as i64,
            s.moving == Some(true),
            s.fault == Some(true),
        ),
        Model::Heater { .. } => (
            (s.temperature_c.unwrap_or(0.0) * 10.0).round() as i64,
            false,
            false,
        ),
    }
}

/// The log index of the acknowledgement of `c`'s plan: an acknowledged write of its last plan
/// entry on its device at the journaled `device_ack` instant. Two commands of one exclusive group
/// may write the same plan within one millisecond (the second dispatched as the first ends): the
/// log's k-th such write belongs to the k-th of them in dispatch order, which within one group is
/// the order they end in (a command is dispatched only once the one before it is terminal).
pub fn ack_index(out: &Outcome, all: &[Cmd], c: &Cmd) -> Option<usize> {
    let (t, epoch) = c.ack?;
    let last = c.writes.last()?;
    let order = |x: &Cmd| (x.terminal.map_or(i64::MAX, |e| e.0), x.id.to_owned());
    let sharing: Vec<&Cmd> = all
        .iter()
        .filter(|o| o.id != c.id && o.dev == c.dev && o.ack == c.ack)
        .filter(|o| o.writes.last() == Some(last))
        .collect();
    let rank = sharing.iter().filter(|o| order(o) < order(c)).count();
    let mut acks = out
        .obs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.dev == c.dev && o.epoch == epoch && o.t_ms() == t)
        .filter(|(_, o)| match &o.kind {
            ObsKind::WriteDone { sent, ok: true } => {
                matches!(&out.obs[*sent].kind, ObsKind::Write { what } if what == last)
            }
            _ => false,
        })
        .map(|(i, _)| i);
    // Alone (or last), a command owns the last such write: a retried write is acknowledged last.
    if rank == sharing.len() {
        acks.next_back()
    } else {
        acks.nth(rank)
    }
}

/// Reads of `dev` the engine issued after log index `after` and up to case time `until`, that
/// came back with data.
pub fn answered_reads<'o>(
    out: &'o Outcome,
    cycles: &'o [usize],
    dev: usize,
    after: usize,
    until: i64,
) -> impl Iterator<Item = &'o Obs> {
    out.obs
        .iter()
        .enumerate()
        .filter(move |(i, o)| cycles[*i] > after && o.dev == dev && o.seen_by(until))
        .map(|(_, o)| o)
}

/// For every log entry, the index of the first read of its poll cycle (itself when it is no
/// read). A cycle reads the device's blocks in address order, each request sent when the one
/// before it came back; the engine numbers a cycle when it starts, so only values of a cycle
/// started after the acknowledgement are fresh, even if the read itself went out later.
pub fn cycle_starts(obs: &[Obs]) -> Vec<usize> {
    let mut first: Vec<usize> = (0..obs.len()).collect();
    let mut last: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    for (i, o) in obs.iter().enumerate() {
        let ObsKind::Read {
            block: (area, start, _),
            ..
        } = o.kind
        else {
            continue;
        };
        if let Some(&p) = last.get(&(o.epoch, o.dev))
            && let ObsKind::Read {
                block: (pa, ps, _),
                done_ms,
                ..
            } = obs[p].kind
            && done_ms == o.t_ms()
            && (pa, ps) < (area, start)
        {
            first[i] = first[p];
        }
        last.insert((o.epoch, o.dev), i);
    }
    first
}

/// Whether `o` is a read that came back with the block holding the feedback `done_when` reads.
pub fn reads_feedback(model: &Model, o: &Obs) -> bool {
    use closedloop_contract::Area;
    let ObsKind::Read {
        block: (area, start, count),
        answered: true,
        ..
    } = o.kind
    else {
        return false;
    };
    let covers = |a: Area, addr: u16| area == a && start <= addr && addr < start + count;
    match model {
        Model::Relay { .. } => covers(Area::DiscreteInput, 0),
        Model::Stepper { .. } => covers(Area::Holding, 2) || covers(Area::DiscreteInput, 0),
        Model::Heater { .. } => covers(Area::Input, 0),
    }
}

/// Whether the answered feedback read `r` shows the feedback changed from `base` in a sample
/// the engine judges: the value it carries differs, and (a stepper's position and motion come
/// in two blocks) the other block of its poll cycle came back too.
pub fn shows_change(
    model: &Model,
    base: (i64, bool, bool),
    r: &Obs,
    window: &[&Obs],
    until: i64,
    timeout_ms: i64,
) -> bool {
    use closedloop_contract::Area;
    let now = feedback(model, &r.state);
    let ObsKind::Read {
        block: (area, ..), ..
    } = r.kind
    else {
        return false;
    };
    match model {
        Model::Stepper { .. } => {
            let (pos, motion) = (now.0 != base.0, (now.1, now.2) != (base.1, base.2));
            // The other block of the same poll cycle: read right before or after this one
            // (a request apart at most), back by the deadline too.
            let partner = |want: Area| {
                window.iter().any(|o| {
                    (o.t_ms() - r.t_ms()).abs() <= timeout_ms
                        && o.seen_by(until)
                        && matches!(o.kind, ObsKind::Read { block: (a, ..), .. } if a == want)
                })
            };
            (area == Area::Holding && pos && partner(Area::DiscreteInput))
                || (area == Area::DiscreteInput && motion && partner(Area::Holding))
        }
        _ => now != base,
    }
}

/// Whether a relay read reported its contact inverted (a swapped_contacts fault in force).
pub fn lied(o: &Obs) -> bool {
    matches!(o.kind, ObsKind::Read { lied: true, .. })
}
