//! The standing alarm on a board's contact against reports without a value (a garbled board):
//! a report without a value shows nothing, so the alarm fails safe.
//! - it is never cleared when the reports it can have judged then all had no value;
//! - once a report without a value arrived, and none with a value for two alarm periods (and
//!   50 ms) after it, it is raised by then.

use super::active_at;
use crate::alarm::AlarmSpec;
use crate::check::Findings;
use crate::check::board::{Rep, reports};
use crate::check::no_value::{describe, judged_at};
use crate::rig::Outcome;
use crate::spec::Case;

/// The alarm's properties on reports without a value (one engine life: epoch 0).
pub fn check(
    case: &Case,
    alarm: &AlarmSpec,
    out: &Outcome,
    rows: &[(i64, bool)],
    f: &mut Findings,
) {
    let reps = reports(out, alarm.device);
    for &(t, active) in rows {
        if !active {
            not_cleared_on_no_value(&reps, t, f);
        }
    }
    let period = case.devices[alarm.device].poll_ms.max(5) as i64;
    let end = out.obs.iter().map(|o| o.t_ms()).max().unwrap_or(0);
    raised_on_no_value(&reps, (2 * period + 50, end), rows, f);
}

/// A clear at `t` rests on a report with a value.
fn not_cleared_on_no_value(reps: &[Rep], t: i64, f: &mut Findings) {
    let judged = judged_at(reps, 0, t);
    if !judged.is_empty() && judged.iter().all(|r| r.no_value) {
        f.violations.push(format!(
            "HOT cleared at {t} ms, but the reports of its board it can have judged then had no \
             value ({})",
            describe(&judged)
        ));
    }
}

/// A report without a value that no report with one follows within `by` ms finds the alarm
/// raised `by` ms after it arrived (while the case still runs, before `end`).
fn raised_on_no_value(reps: &[Rep], (by, end): (i64, i64), rows: &[(i64, bool)], f: &mut Findings) {
    for (i, r) in reps.iter().enumerate().filter(|(_, r)| r.no_value) {
        let t = r.delivered_ms + by;
        let valued = reps[i + 1..]
            .iter()
            .any(|x| !x.no_value && x.delivered_ms <= t);
        if valued || t >= end {
            continue;
        }
        f.cover("alarm on a board judged after a report without a value");
        if !active_at(rows, t) {
            f.violations.push(format!(
                "HOT not raised at {t} ms although the last report of its board (arrived {} ms) \
                 had no value: nothing showed it safe",
                r.delivered_ms
            ));
        }
    }
}
