//! Commands and `requires` on a relay board that reports when it likes (`rig/board.rs`),
//! against the relay's physical state when each report was taken. A report carries no time of
//! its own: the engine can only go by when it arrived, so a board reporting late is a
//! limitation where it hides a change (counted, not failed).
//! - `completed`: a report delivered after the acknowledgement showed `done_when` physically
//!   true when it was taken;
//! - `FEEDBACK_MISMATCH`: reports came after the acknowledgement, and the last one before the
//!   end did not show it done;
//! - `NO_FEEDBACK`: the board was heard from within its liveness window before the end (it was
//!   online), and no report delivered `expect_s` after the acknowledgement showed it done;
//! - `TIMEOUT`: no report delivered `expect_s` after the acknowledgement showed it done;
//! - `DEVICE_OFFLINE` (on its own board): nothing arrived for its liveness window before the end
//!   (or before the refusal) — a report arriving in the very milliseconds of the verdict came
//!   after the engine judged, and does not count;
//! - `requires` on a board: dispatched on a report, delivered within the board's window before
//!   the dispatch, that showed the precondition physically true.
//!
//! A report without a value (a garbled board) shows nothing: none of the above rests on one, and
//! `no_value.rs` checks what the engine did with them.

use super::Findings;
use super::cmd::Cmd;
use super::no_value::{self, Span};
use crate::physical::{done_device, physically_done};
use crate::rig::{ObsKind, Outcome};
use crate::spec::{Case, Requires};
use closedloop_sim::SimState;

/// Slack for "within the window": the engine's and the board's 10 ms ticks, rounding.
const SLACK_MS: i64 = 30;

/// One report as the checks see it.
pub struct Rep<'a> {
    pub taken_ms: i64,
    pub delivered_ms: i64,
    pub epoch: usize,
    pub state: &'a SimState,
    pub lied: bool,
    /// Its payload carried no value.
    pub no_value: bool,
}

/// The reports of board `dev`, in the order they arrived.
pub fn reports(out: &Outcome, dev: usize) -> Vec<Rep<'_>> {
    let mut reps: Vec<Rep> = (out.obs.iter())
        .filter(|o| o.dev == dev)
        .filter_map(|o| match o.kind {
            ObsKind::Report {
                delivered_ms,
                lied,
                no_value,
            } => Some(Rep {
                taken_ms: o.t_ms(),
                delivered_ms,
                epoch: o.epoch,
                state: &o.state,
                lied,
                no_value,
            }),
            _ => None,
        })
        .collect();
    reps.sort_by_key(|r| r.delivered_ms);
    reps
}

/// The board's liveness window in ms.
fn window_ms(case: &Case, dev: usize) -> i64 {
    (case.devices[dev].max_silence_s * 1000.0).ceil() as i64
}

/// Whether a report reached the engine of `epoch` in `(from, to]` (a restarted engine's board
/// starts again: what the next one heard at the same millisecond is not this one's).
fn heard(reps: &[Rep], epoch: usize, from: i64, to: i64) -> bool {
    reps.iter()
        .any(|r| r.epoch == epoch && r.delivered_ms > from && r.delivered_ms <= to)
}

/// Whether `c` is judged here: its own device or the one its criterion reads is a board.
pub fn on_a_board(case: &Case, c: &Cmd) -> bool {
    case.devices[c.dev].push.is_some() || case.devices[done_device(case, c)].push.is_some()
}

/// The outcome of a command on a board against the reports it had.
pub fn command(case: &Case, out: &Outcome, c: &Cmd, label: &str, f: &mut Findings) {
    let dd = done_device(case, c);
    let Some(push) = case.devices[dd].push else {
        return;
    };
    let reps = reports(out, dd);
    let window = window_ms(case, dd);
    rejected_offline(c, &reps, (dd, window), label, f);
    let (Some((ack, ep)), Some((end, ep_end))) = (c.ack, c.terminal) else {
        return;
    };
    if ep != ep_end {
        return;
    }
    let after: Vec<&Rep> = (reps.iter())
        .filter(|r| r.epoch == ep && r.delivered_ms > ack && r.delivered_ms <= end)
        .collect();
    if after.iter().any(|r| r.no_value) {
        f.cover("board commands with a report without a value after the ack");
    }
    let span = Span {
        ack,
        end,
        epoch: ep,
        after: after.clone(),
    };
    no_value::only_no_value(c, &reps, &span, label, f);
    let board = OnBoard {
        case,
        c,
        reps: &reps,
        span,
        dd,
        window,
        late_ms: push.late_ms,
        label,
    };
    board.verdict(f);
}

/// A command refused `DEVICE_OFFLINE` on its own board (`dd`, of liveness window `window`)
/// although the board reported within that window.
fn rejected_offline(
    c: &Cmd,
    reps: &[Rep],
    (dd, window): (usize, i64),
    label: &str,
    f: &mut Findings,
) {
    if let (Some(code), Some((at, epoch))) = (c.code, c.terminal)
        && c.status == "rejected"
        && code == "DEVICE_OFFLINE"
        && dd == c.dev
        && heard(reps, epoch, at - window + SLACK_MS, at - SLACK_MS)
    {
        f.violations.push(format!(
            "{label}: rejected DEVICE_OFFLINE at {at} ms, but the board reported within its {window} ms window"
        ));
    }
}

/// A command on a board, acknowledged and ended in one epoch: the reports of the board its
/// criterion reads (`dd`, of liveness window `window`, reporting `late_ms` late) and its span.
struct OnBoard<'a> {
    case: &'a Case,
    c: &'a Cmd<'a>,
    reps: &'a [Rep<'a>],
    span: Span<'a, 'a>,
    dd: usize,
    window: i64,
    late_ms: u64,
    label: &'a str,
}

impl OnBoard<'_> {
    /// Whether report `r` carried a value and, truthfully, showed the command physically done.
    fn done(&self, r: &Rep) -> bool {
        !r.no_value && physically_done(self.case, self.c, r.state) && !r.lied
    }

    /// The first report after the ack, delivered `expect_s` after it, that showed it done.
    fn done_after_settle(&self) -> Option<&Rep<'_>> {
        let settle = self.span.ack + (self.c.expect_s.unwrap_or(0.0) * 1000.0) as i64 + SLACK_MS;
        (self.span.after.iter().copied()).find(|r| r.delivered_ms >= settle && self.done(r))
    }

    /// The command's outcome against the reports.
    fn verdict(&self, f: &mut Findings) {
        let (c, label, after) = (self.c, self.label, &self.span.after);
        let (ack, end, ep, window) = (self.span.ack, self.span.end, self.span.epoch, self.window);
        match (c.status, c.code) {
            ("completed", _) if c.verified && !after.iter().any(|r| self.done(r)) => {
                let lied = after.iter().any(|r| r.lied);
                let msg = format!(
                    "{label}: completed at {end} ms, but no report delivered after the ack ({ack} ms) showed it physically done"
                );
                if lied {
                    &mut f.limitations
                } else {
                    &mut f.violations
                }
                .push(msg);
            }
            ("completed", _) if c.verified => {
                no_value::completed_on_a_value(self.case, c, self.reps, &self.span, label, f);
            }
            ("failed", Some("FEEDBACK_MISMATCH")) => self.feedback_mismatch(f),
            ("timeout", Some("TIMEOUT")) => {
                if let Some(r) = self.done_after_settle() {
                    f.violations.push(format!(
                        "{label}: TIMEOUT at {end} ms, but a report arriving at {} ms showed it physically done",
                        r.delivered_ms
                    ));
                }
            }
            ("failed", Some("NO_FEEDBACK")) => self.no_feedback(f),
            ("failed", Some("DEVICE_OFFLINE"))
                if self.dd == c.dev
                    && heard(self.reps, ep, end - window + SLACK_MS, end - SLACK_MS) =>
            {
                f.violations.push(format!(
                    "{label}: DEVICE_OFFLINE at {end} ms, but the board reported within its {window} ms window"
                ));
            }
            _ => {}
        }
    }

    /// `FEEDBACK_MISMATCH`: a report with a value came after the ack, and the last one did not
    /// show it done.
    fn feedback_mismatch(&self, f: &mut Findings) {
        let (c, label, after) = (self.c, self.label, &self.span.after);
        let (ack, end, ep) = (self.span.ack, self.span.end, self.span.epoch);
        match after.iter().rfind(|r| !r.no_value) {
            // One in the ack's own millisecond may have come after the write.
            None if !no_value::valued_at(self.reps, ep, ack) => f.violations.push(format!(
                "{label}: FEEDBACK_MISMATCH at {end} ms, but no report with a value arrived after the ack ({ack} ms): {}",
                no_value::describe(after)
            )),
            None => {}
            Some(last) if self.done(last) => f.violations.push(format!(
                "{label}: FEEDBACK_MISMATCH at {end} ms, but the last report with a value (taken at {} ms, arrived {} ms) showed it physically done",
                last.taken_ms, last.delivered_ms
            )),
            Some(_) => {
                hidden_by_lateness(self.case, c, self.reps, (end, self.late_ms), label, f);
                no_value::moved_under_no_value(self.case, c, &self.span, label, f);
            }
        }
    }

    /// `NO_FEEDBACK`: the board was online before the end, and no report delivered `expect_s`
    /// after the ack showed it done.
    fn no_feedback(&self, f: &mut Findings) {
        let (c, label) = (self.c, self.label);
        let (end, ep, window) = (self.span.end, self.span.epoch, self.window);
        if !heard(self.reps, ep, end - window - SLACK_MS, end) {
            let msg = format!(
                "{label}: NO_FEEDBACK at {end} ms, but nothing arrived from the board within its {window} ms window: it was offline"
            );
            no_value::offline_after_no_value(c, msg, f);
        }
        if let Some(r) = self.done_after_settle() {
            f.violations.push(format!(
                "{label}: NO_FEEDBACK at {end} ms, but a report arriving at {} ms showed it physically done",
                r.delivered_ms
            ));
        }
        no_value::no_feedback_says_what_came(c, self.reps, &self.span, label, f);
    }
}

/// A `FEEDBACK_MISMATCH` whose change a late board hid: a report taken by the end that arrived
/// after it showed the command physically done (the engine cannot know when a report was
/// taken): a limitation.
fn hidden_by_lateness(
    case: &Case,
    c: &Cmd,
    reps: &[Rep],
    (end, late_ms): (i64, u64),
    label: &str,
    f: &mut Findings,
) {
    let hidden = reps
        .iter()
        .find(|r| r.taken_ms <= end && r.delivered_ms > end && physically_done(case, c, r.state));
    if let Some(r) = hidden {
        f.limitations.push(format!(
            "{label}: FEEDBACK_MISMATCH at {end} ms; the board, {late_ms} ms late, reported the change taken at {} ms only at {} ms",
            r.taken_ms, r.delivered_ms
        ));
    }
}

/// A command dispatched under `requires` on a board: on a report delivered within the board's
/// window before the dispatch that showed the precondition physically true (`holds`), and the
/// report judged at the dispatch carried a value that held (`no_value::requires_on_a_value`).
pub fn requires(
    out: &Outcome,
    c: &Cmd,
    (r, window): (Requires, i64),
    holds: impl Fn(&SimState) -> Option<bool>,
    f: &mut Findings,
) {
    let Some((dispatched, epoch)) = c.dispatched else {
        return;
    };
    let reps = reports(out, r.device);
    no_value::requires_on_a_value(c, &reps, &holds, f);
    let recent: Vec<&Rep> = (reps.iter())
        .filter(|x| x.epoch == epoch && x.delivered_ms <= dispatched)
        .filter(|x| x.delivered_ms >= dispatched - window - SLACK_MS)
        .filter(|x| !x.no_value)
        .collect();
    if recent
        .iter()
        .any(|x| holds(x.state) == Some(true) && !x.lied)
    {
        return;
    }
    let msg = format!(
        "command {} was dispatched at {dispatched} ms, but no report of the board its requires \
         names, arrived within its {window} ms window, showed it physically holding",
        c.id
    );
    if recent.iter().any(|x| x.lied) {
        f.limitations.push(msg);
    } else {
        f.violations.push(msg);
    }
}
