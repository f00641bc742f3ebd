//! The standing alarm against what its device physically did (cases with an alarm and one
//! engine life: the board starts cleared at every start, and the journal's alarm rows say not
//! which engine wrote them):
//! - it never clears while its signal's block has answered exception 4 since its last good read
//!   (two refused reads, the second issued before the clear's millisecond: the refusal was
//!   published before the clear);
//! - a clear rests on a read, within the device's liveness window, that showed `when` physically
//!   false (a relay whose contact reads inverted is a limitation);
//! - a refusal that lasts (three refused reads over two alarm periods) finds it raised: it fails
//!   safe;
//! - a command of the device it blocks that was running when it was raised never completes (it
//!   ends with the alarm's code, or with the silence that raised it);
//! - on a board's contact, reports without a value (`alarms/no_value.rs`): never cleared on one,
//!   raised once the last report had none.

#[path = "alarms/no_value.rs"]
mod no_value;

use super::{Cmd, Findings};
use crate::alarm::AlarmSpec;
use crate::rig::{Obs, ObsKind, Outcome};
use crate::spec::Case;

/// A read of the alarm's block: case time issued, answered (with data), refused (exception).
/// A board's report (`rig/board.rs`) counts as a read answered when it arrived.
struct Read<'a> {
    obs: &'a Obs,
    /// When its value was as old as the engine can know: issued (a poll), arrived (a report).
    at_ms: i64,
    done_ms: i64,
    answered: bool,
    refused: bool,
    lied: bool,
}

/// The alarm's properties; violations and limitations pushed to `f`.
pub fn check_alarm(case: &Case, out: &Outcome, cmds: &[Cmd], f: &mut Findings) {
    let (Some(alarm), [epoch]) = (&case.alarm, out.epochs.as_slice()) else {
        return;
    };
    let rows: Vec<(i64, bool)> = (out.alarms.iter())
        .map(|r| (epoch.start_ms + (r.at_ms - epoch.wall_ms), r.active))
        .collect();
    let reads = reads(case, alarm, out);
    let (v, l) = (&mut f.violations, &mut f.limitations);
    for &(t, active) in &rows {
        if !active {
            cleared(case, alarm, &reads, t, v, l);
        }
    }
    fails_safe(case, alarm, &reads, &rows, v);
    if case.devices[alarm.device].push.is_some() {
        fails_safe_when_silent(case, alarm, out, &reads, &rows, v);
        no_value::check(case, alarm, out, &rows, f);
    }
    stops_running(alarm, cmds, &rows, &mut f.violations);
}

/// The reads of the alarm's block, in the order they were issued; a board's reports in the
/// order they arrived.
fn reads<'a>(case: &Case, alarm: &AlarmSpec, out: &'a Outcome) -> Vec<Read<'a>> {
    if case.devices[alarm.device].push.is_some() {
        let mut reps: Vec<Read> = (out.obs.iter())
            .filter(|o| o.dev == alarm.device)
            .filter_map(|o| match o.kind {
                // One without a value is heard, and shows nothing.
                ObsKind::Report {
                    delivered_ms,
                    lied,
                    no_value,
                } => Some(Read {
                    obs: o,
                    at_ms: delivered_ms,
                    done_ms: delivered_ms,
                    answered: !no_value,
                    refused: false,
                    lied,
                }),
                _ => None,
            })
            .collect();
        reps.sort_by_key(|r| r.done_ms);
        return reps;
    }
    let (area, start) = alarm.block(&case.devices);
    out.obs
        .iter()
        .filter(|o| o.dev == alarm.device)
        .filter_map(|o| match o.kind {
            ObsKind::Read {
                block: (a, s, _),
                answered,
                lied,
                done_ms,
                refused,
            } if (a, s) == (area, start) => Some(Read {
                obs: o,
                at_ms: o.t_ms(),
                done_ms,
                answered,
                refused,
                lied,
            }),
            _ => None,
        })
        .collect()
}

/// A clear at case time `t`: not on a refused signal, and on a read that showed it clear.
fn cleared(
    case: &Case,
    alarm: &AlarmSpec,
    reads: &[Read],
    t: i64,
    v: &mut Vec<String>,
    l: &mut Vec<String>,
) {
    let before: Vec<&Read> = reads.iter().filter(|r| r.done_ms <= t).collect();
    let since_good = before.iter().rev().take_while(|r| !r.answered);
    let refused: Vec<&&Read> = since_good.filter(|r| r.refused).collect();
    // The second refused read was issued after the first one's cycle was published; issued in
    // the clear's own millisecond (a cycle, a write and a cycle asked for at once), the clear
    // may have been judged before either (a clear on the good read 59 ms before, 2026-12-07).
    let published = refused.len() >= 2 && refused[refused.len() - 2].obs.t_ms() < t;
    if published {
        let from = refused.last().map_or(t, |r| r.obs.t_ms());
        v.push(format!(
            "HOT cleared at {t} ms while its signal's block answered exception 4 since {from} ms \
             ({} refused reads, none good since)",
            refused.len()
        ));
        return;
    }
    let window_ms = (case.devices[alarm.device].max_silence_s * 1000.0).ceil() as i64;
    let shown_clear = before.iter().rev().find(|r| {
        r.answered
            && r.at_ms >= t - window_ms
            && alarm.holds(&case.devices, &r.obs.state) == Some(false)
    });
    match shown_clear {
        Some(_) => {}
        None if before.iter().any(|r| r.lied) => l.push(format!(
            "HOT cleared at {t} ms on a contact that reads inverted (swapped_contacts)"
        )),
        None => v.push(format!(
            "HOT cleared at {t} ms, but no read of its signal within {window_ms} ms before showed \
             it physically clear"
        )),
    }
}

/// Whether the alarm is raised at case time `t`, by its rows.
pub(super) fn active_at(rows: &[(i64, bool)], t: i64) -> bool {
    rows.iter()
        .take_while(|(at, _)| *at <= t)
        .last()
        .is_some_and(|(_, a)| *a)
}

/// A lasting refusal of the alarm's block finds the alarm raised.
fn fails_safe(
    case: &Case,
    alarm: &AlarmSpec,
    reads: &[Read],
    rows: &[(i64, bool)],
    v: &mut Vec<String>,
) {
    let period = case.devices[alarm.device].poll_ms.max(5) as i64;
    // Runs of consecutive refused reads.
    for run in reads.split(|r| !r.refused) {
        let [first, second, .., last] = run else {
            continue;
        };
        if last.done_ms - second.done_ms >= 2 * period + 50 && !active_at(rows, last.done_ms) {
            v.push(format!(
                "HOT not raised at {} ms although its signal's block answered exception 4 since \
                 {} ms ({} refused reads): nothing showed it safe",
                last.done_ms,
                first.obs.t_ms(),
                run.len()
            ));
        }
    }
}

/// A board silent for longer than its liveness window (and two alarm periods) finds the alarm
/// raised: a value nobody has heard for that long says nothing about now.
fn fails_safe_when_silent(
    case: &Case,
    alarm: &AlarmSpec,
    out: &Outcome,
    reads: &[Read],
    rows: &[(i64, bool)],
    v: &mut Vec<String>,
) {
    let d = &case.devices[alarm.device];
    let by = (d.max_silence_s * 1000.0).ceil() as i64 + 2 * d.poll_ms.max(5) as i64 + 50;
    let end = out.obs.iter().map(|o| o.t_ms()).max().unwrap_or(0);
    let heard: Vec<i64> = reads.iter().map(|r| r.done_ms).collect();
    let starts = std::iter::once(0).chain(heard.iter().copied());
    let ends = heard.iter().copied().chain(std::iter::once(end));
    for (from, to) in starts.zip(ends) {
        let t = from + by;
        if t < to && !active_at(rows, t) {
            v.push(format!(
                "HOT not raised at {t} ms although its board was silent from {from} ms to {to} ms: \
                 nothing showed it safe"
            ));
        }
    }
}

/// A command of the blocked device running when the alarm was raised is stopped: it never ends
/// `completed` (with the alarm's code, or `DEVICE_OFFLINE` when the same silence raised it).
fn stops_running(alarm: &AlarmSpec, cmds: &[Cmd], rows: &[(i64, bool)], v: &mut Vec<String>) {
    for c in cmds.iter().filter(|c| c.dev == alarm.blocks) {
        let (Some((dispatched, _)), Some((end, _))) = (c.dispatched, c.terminal) else {
            continue;
        };
        let raised = rows
            .iter()
            .find(|(at, a)| *a && *at > dispatched && *at + 50 < end);
        if let Some((at, _)) = raised
            && matches!(c.status, "completed" | "sent")
        {
            v.push(format!(
                "command {} of the blocked device ran when HOT was raised at {at} ms and ended \
                 {} {:?} at {end} ms",
                c.id, c.status, c.code
            ));
        }
    }
}
