//! Reports without a value (a garbled board, `rig/board.rs`): what is not a value is never a
//! value. Against the reports each command had:
//! - `completed`: the report the engine judged last when it completed carried a value showing
//!   `done_when` physically true (never a report without a value standing for the last one);
//! - every report after the acknowledgement, up to the end, without a value (and none with one
//!   in the acknowledgement's or the end's millisecond): never `completed`, `timeout` or
//!   `FEEDBACK_MISMATCH` — nothing was read — but `NO_FEEDBACK` saying what came (or an end
//!   that is no verdict on the feedback: offline, cancelled, interrupted, the alarm's);
//! - `NO_FEEDBACK` saying a signal "has had no value": such a report came after the ack;
//! - `FEEDBACK_MISMATCH` ("never moved") after a report without a value that was taken once the
//!   relay had physically moved: that report may have been the change (a known engine bug, as is
//!   `NO_FEEDBACK` from a board offline at the deadline after such a report: both pinned by
//!   ignored tests in `regressions_no_value.rs`);
//! - `requires` on a board: the report judged at the dispatch carried a value that held.

use super::Findings;
use super::board::Rep;
use super::cmd::Cmd;
use crate::physical::physically_done;
use crate::spec::Case;
use closedloop_sim::SimState;

/// The reports the engine may have judged last at case time `t` (of engine life `epoch`): the
/// last one that arrived more than a millisecond before `t`, and every one since (the order of
/// those against the judgement is not known).
pub fn judged_at<'r, 'a>(reps: &'r [Rep<'a>], epoch: usize, t: i64) -> Vec<&'r Rep<'a>> {
    let mine: Vec<&Rep> = (reps.iter())
        .filter(|r| r.epoch == epoch && r.delivered_ms <= t)
        .collect();
    let before = mine.iter().rposition(|r| r.delivered_ms < t - 1);
    mine[before.unwrap_or(0)..].to_vec()
}

/// What a command on a board had between its acknowledgement and its end.
pub struct Span<'r, 'a> {
    pub ack: i64,
    pub end: i64,
    pub epoch: usize,
    /// The reports that arrived after the acknowledgement, up to the end.
    pub after: Vec<&'r Rep<'a>>,
}

/// A completion rests on the report judged last carrying a value that showed it done.
pub fn completed_on_a_value(
    case: &Case,
    c: &Cmd,
    reps: &[Rep],
    s: &Span,
    label: &str,
    f: &mut Findings,
) {
    let judged: Vec<&Rep> = (judged_at(reps, s.epoch, s.end).into_iter())
        .filter(|r| r.delivered_ms > s.ack)
        .collect();
    let done = |r: &&Rep| !r.no_value && physically_done(case, c, r.state);
    if judged.iter().any(done) {
        return;
    }
    let msg = format!(
        "{label}: completed at {} ms, but the reports it can have been judged on then ({}) \
         showed it done with a value in none",
        s.end,
        describe(&judged)
    );
    match judged.iter().any(|r| r.lied) {
        true => f.limitations.push(msg),
        false => f.violations.push(msg),
    }
}

/// Every report after the acknowledgement without a value: nothing was read, so no verdict on
/// the feedback but `NO_FEEDBACK` saying what came.
pub fn only_no_value(c: &Cmd, reps: &[Rep], s: &Span, label: &str, f: &mut Findings) {
    let valued =
        |r: &Rep| r.epoch == s.epoch && !r.no_value && (s.ack..=s.end).contains(&r.delivered_ms);
    if s.after.is_empty() || reps.iter().any(valued) {
        return;
    }
    f.cover("board commands with only reports without a value after the ack");
    let detail = c.j.row.detail.as_deref().unwrap_or("");
    // A report delivered in the verdict's own millisecond (or the one before) may have come
    // after it: then "reported nothing" is as true as "had no value".
    let seen = s.after.iter().any(|r| r.delivered_ms < s.end - 1);
    let honest = match (c.status, c.code) {
        ("failed", Some("NO_FEEDBACK")) => {
            detail.contains("has had no value") || (!seen && detail.contains("reported nothing"))
        }
        ("completed" | "timeout", _) | ("failed", Some("FEEDBACK_MISMATCH")) => false,
        _ => true,
    };
    if !honest {
        f.violations.push(format!(
            "{label}: {} {:?} at {} ms, but every report after the ack ({} ms) had no value ({}): \
             `{detail}`",
            c.status,
            c.code,
            s.end,
            s.ack,
            describe(&s.after)
        ));
    }
}

/// Whether a report of engine life `epoch` with a value arrived in millisecond `t`.
pub fn valued_at(reps: &[Rep], epoch: usize, t: i64) -> bool {
    (reps.iter()).any(|r| r.epoch == epoch && !r.no_value && r.delivered_ms == t)
}

/// `NO_FEEDBACK` that says what came without a value: a report without one came after the ack
/// (or in its very millisecond, after the write).
pub fn no_feedback_says_what_came(c: &Cmd, reps: &[Rep], s: &Span, label: &str, f: &mut Findings) {
    let detail = c.j.row.detail.as_deref().unwrap_or("");
    if !detail.contains("has had no value") {
        return;
    }
    f.cover("NO_FEEDBACK on reports without a value");
    let came =
        |r: &Rep| r.epoch == s.epoch && r.no_value && (s.ack..=s.end).contains(&r.delivered_ms);
    if !reps.iter().any(came) {
        f.violations.push(format!(
            "{label}: NO_FEEDBACK at {} ms says a signal had no value, but every report after the \
             ack ({} ms) had one ({})",
            s.end,
            s.ack,
            describe(&s.after)
        ));
    }
}

/// `NO_FEEDBACK` from a board that was offline at the end (`msg`): a violation, whatever it says
/// came (the engine once said what came without a value: `regressions_no_value.rs`,
/// `a_board_gone_silent_after_a_report_without_a_value_is_offline_not_no_feedback`).
pub fn offline_after_no_value(_c: &Cmd, msg: String, f: &mut Findings) {
    f.violations.push(msg);
}

/// `FEEDBACK_MISMATCH` (never moved) although, after the last report with a value (which showed
/// the relay physically not done), one without came that was taken when it was physically
/// done: the change may be what it carried, so "never moved" is unfounded — a violation (the
/// engine's bug until `Machine::deadline` judged the last report: `regressions_no_value.rs`,
/// `a_change_reported_without_a_value_is_no_feedback_not_never_moved`).
pub fn moved_under_no_value(case: &Case, c: &Cmd, s: &Span, label: &str, f: &mut Findings) {
    let Some(last) = s.after.iter().rposition(|r| !r.no_value) else {
        return;
    };
    let before = s.after[last];
    if before.lied || physically_done(case, c, before.state) {
        return;
    }
    let hidden = s.after[last + 1..]
        .iter()
        .find(|r| r.no_value && physically_done(case, c, r.state));
    if let Some(r) = hidden {
        f.violations.push(format!(
            "{label}: FEEDBACK_MISMATCH (never moved) at {} ms, but after the last report with a \
             value (arrived {} ms) one without a value arrived at {} ms, taken at {} ms when the \
             relay was physically done",
            s.end, s.after[last].delivered_ms, r.delivered_ms, r.taken_ms
        ));
    }
}

/// A command dispatched under `requires` on a board: the report judged at the dispatch carried
/// a value that held (`holds`); a report without one decides nothing.
pub fn requires_on_a_value(
    c: &Cmd,
    reps: &[Rep],
    holds: impl Fn(&SimState) -> Option<bool>,
    f: &mut Findings,
) {
    let Some((dispatched, epoch)) = c.dispatched else {
        return;
    };
    let judged = judged_at(reps, epoch, dispatched);
    if judged.iter().any(|r| r.no_value) {
        f.cover("requires on a board dispatched with a report without a value close by");
    }
    if judged
        .iter()
        .any(|r| !r.no_value && !r.lied && holds(r.state) == Some(true))
    {
        return;
    }
    let msg = format!(
        "command {} was dispatched at {dispatched} ms, but the reports of the board its requires \
         names that it can have judged then ({}) showed it holding with a value in none",
        c.id,
        describe(&judged)
    );
    match judged.iter().any(|r| r.lied) {
        true => f.limitations.push(msg),
        false => f.violations.push(msg),
    }
}

/// Reports in a line: "taken→arrived ms" each, `∅` for one without a value.
pub fn describe(reps: &[&Rep]) -> String {
    let each: Vec<String> = reps
        .iter()
        .map(|r| {
            let what = match (r.no_value, r.state.contact) {
                (true, _) => "∅".to_string(),
                (false, c) => format!("contact={c:?}"),
            };
            format!("{}→{} ms {what}", r.taken_ms, r.delivered_ms)
        })
        .collect();
    match each.is_empty() {
        true => "none".into(),
        false => each.join(", "),
    }
}
