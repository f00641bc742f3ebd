//! The checks of one command: its deadline and queue time, its acknowledgement, and each
//! outcome against what the simulator physically did on the reads after the acknowledgement.

use super::Findings;
use super::cmd::Cmd;
use crate::expect::expected;
use crate::physical::*;
use crate::report::brief;
use crate::rig::{Obs, ObsKind, Outcome};
use crate::spec::*;

/// What every command of a case is judged against.
pub(super) struct Judge<'a> {
    pub case: &'a Case,
    pub out: &'a Outcome,
    pub cmds: &'a [Cmd<'a>],
    /// Where each read cycle starts in the observations.
    pub cycles: Vec<usize>,
}

/// One finished command as its outcome checks see it.
struct Ended<'c> {
    c: &'c Cmd<'c>,
    d: &'c DeviceSpec,
    label: &'c str,
    /// The observation of its acknowledged write.
    ack: Option<usize>,
    end: i64,
    /// The device its completion is read on.
    dd: usize,
}

/// Slack on top of a deadline: 2 s, the device's liveness window and one request timeout.
fn deadline_slack(d: &DeviceSpec) -> i64 {
    2000 + (d.max_silence_s * 1000.0) as i64 + d.timeout_ms as i64
}

/// Extra queue slack for the fresh reads dispatch takes of every device `requires` reads.
fn requires_slack(case: &Case, d: &DeviceSpec) -> i64 {
    d.requires
        .map_or(0, |r| case.devices[r.device].timeout_ms as i64)
}

impl Judge<'_> {
    pub fn command(&self, c: &Cmd, f: &mut Findings) {
        let d = &self.case.devices[c.dev];
        let label = format!(
            "{} {}{:?}",
            device_id(&self.case.devices, c.dev),
            c.action,
            c.j.row.params
        );
        self.deadline(c, d, &label, f);
        self.queue(c, d, &label, f);
        if super::board::on_a_board(self.case, c) {
            super::board::command(self.case, self.out, c, &label, f);
            let outcome = format!("{} {}", c.status, c.code.unwrap_or(""));
            f.outcomes.push(format!("board {}", outcome.trim_end()));
            return;
        }
        // device_ack: the device acknowledged the plan at that instant.
        let ack = ack_index(self.out, self.cmds, c);
        if c.ack.is_some() && ack.is_none() {
            f.violations.push(format!(
                "{label}: device_ack at {:?} but no acknowledged write of {:?} then",
                c.ack, c.writes
            ));
        }
        let Some(end) = c.terminal else { return };
        let dd = done_device(self.case, c);
        let e = Ended {
            c,
            d,
            label: &label,
            ack,
            end: end.0,
            dd,
        };
        self.completed_verified(&e, f);
        self.feedback_mismatch(&e, f);
        self.timeout(&e, f);
        self.stall(&e, f);
        self.tally(&e, f);
    }

    fn deadline(&self, c: &Cmd, d: &DeviceSpec, label: &str, f: &mut Findings) {
        let (Some(end), Some(dl)) = (c.terminal, c.deadline) else {
            return;
        };
        let allowed = dl + deadline_slack(d) + c.recovered_skew.unwrap_or(0);
        if end.0 <= allowed {
            return;
        }
        let outcome = format!("{} {}", c.status, c.code.unwrap_or(""));
        let msg = format!(
            "{label}: {outcome} at {} ms, past its deadline {dl} ms + {} ms",
            end.0,
            allowed - dl
        );
        // A cancel ends once the device reads stopped, bounded by the engine's 30 s
        // safe-state limit (or sooner, when the device goes offline meanwhile): a
        // device that gives no such read keeps the command open until then (reported
        // as an engine bug, see the regression test).
        let stop = c.event("cancel_sent");
        if c.status == "cancelled"
            && stop.is_some_and(|t| end.0 - t <= 30_000 + deadline_slack(d).max(1_000))
        {
            f.known
                .push(format!("cancel held open for the stop: {msg}"));
        } else {
            f.violations.push(msg);
        }
    }

    fn queue(&self, c: &Cmd, d: &DeviceSpec, label: &str, f: &mut Findings) {
        let (Some(acc), Some(end)) = (c.accepted, c.terminal) else {
            return;
        };
        let slack = deadline_slack(d) + requires_slack(self.case, d);
        let queue_end = acc + (d.queue_timeout_s * 1000.0) as i64 + slack;
        let left_queue = c.dispatched.map_or(end.0, |(t, _)| t);
        if left_queue > queue_end {
            f.violations.push(format!(
                "{label}: left the queue at {left_queue} ms, accepted at {acc} ms with queue_timeout_s = {}",
                d.queue_timeout_s
            ));
        }
    }

    /// completed + verified: done_when held physically on a read after the ack.
    fn completed_verified(&self, e: &Ended, f: &mut Findings) {
        let (c, label) = (e.c, e.label);
        if c.status != "completed" || !c.verified {
            return;
        }
        let reads: Vec<&Obs> = e
            .ack
            .map(|a| answered_reads(self.out, &self.cycles, e.dd, a, e.end).collect())
            .unwrap_or_default();
        if reads
            .iter()
            .any(|o| physically_done(self.case, c, &o.state))
        {
            return;
        }
        let msg = format!(
            "{label}: completed verified at {} ms, but done_when never held physically on a read after the ack ({} reads, physical {:?})",
            e.end,
            reads.len(),
            reads.last().map(|o| brief(&o.state))
        );
        if reads.iter().any(|o| lied(o)) {
            f.limitations.push(format!("inverted contact: {msg}"));
        } else {
            f.violations.push(msg);
        }
    }
}

impl Judge<'_> {
    /// FEEDBACK_MISMATCH: the feedback never physically moved after the ack, up to the
    /// deadline (every request the engine made is an instant the device was looked at).
    fn feedback_mismatch(&self, e: &Ended, f: &mut Findings) {
        let (c, out, dd) = (e.c, self.out, e.dd);
        let (Some(a), Some((t_disp, _)), Some((t_ack, _))) = (e.ack, c.dispatched, c.ack) else {
            return;
        };
        if c.code != Some("FEEDBACK_MISMATCH") || c.j.row.verification != "feedback" {
            return;
        }
        let model = &self.case.devices[dd].model;
        let base = out.obs[..a]
            .iter()
            .rfind(|o| o.dev == dd && o.t_ms() <= t_disp)
            .map(|o| feedback(model, &o.state));
        // Reads answered before the deadline: one that comes back in the deadline's own
        // millisecond races it (as for TIMEOUT below).
        let until = c.deadline.map_or(e.end, |d| (d - 1).min(e.end));
        let window: Vec<&Obs> = out.obs[a + 1..]
            .iter()
            .filter(|o| o.dev == dd && o.t_ms() <= until)
            .collect();
        let fresh: Vec<&Obs> = answered_reads(out, &self.cycles, dd, a, until).collect();
        let moved = window
            .iter()
            .find(|o| Some(feedback(model, &o.state)) != base);
        let (Some(base), Some(o)) = (base, moved) else {
            return;
        };
        let seen: Vec<&&Obs> = fresh.iter().filter(|o| reads_feedback(model, o)).collect();
        let last_seen = seen.iter().map(|o| o.t_ms()).max().unwrap_or(t_ack);
        let msg = format!(
            "{}: FEEDBACK_MISMATCH, but the feedback physically moved after the ack: {base:?} at dispatch, {:?} at {} ms; deadline {:?}, last answered read of the feedback at {last_seen} ms",
            e.label,
            feedback(model, &o.state),
            o.t_ms(),
            c.deadline,
        );
        let poll = self.case.devices[dd].poll_ms as i64;
        let timeout = self.case.devices[dd].timeout_ms as i64;
        if window.iter().any(|o| lied(o)) {
            f.limitations.push(format!("inverted contact: {msg}"));
        } else if seen
            .iter()
            .any(|r| shows_change(model, base, r, &fresh, until, poll + timeout))
        {
            // The engine read the change and still said the feedback never moved.
            f.violations.push(msg);
        } else if until - last_seen > poll + 1 {
            f.known.push(format!(
                "FEEDBACK_MISMATCH on reads that stopped {} ms before the deadline: {msg}",
                until - last_seen
            ));
        } else {
            // Moved and back between two polls, or after the last poll before the
            // deadline: no read could have seen it.
            f.limitations.push(format!("between polls: {msg}"));
        }
    }

    /// TIMEOUT says done_when never held: no read the engine had to judge (its own relay's
    /// contact or heater's temperature, answered before the deadline and, for "already so",
    /// taken expect_s after the ack) found it physically done through a truthful sensor.
    fn timeout(&self, e: &Ended, f: &mut Findings) {
        let (c, d) = (e.c, e.d);
        if c.code != Some("TIMEOUT")
            || c.action == "follow"
            || c.event("recovered").is_some()
            || matches!(d.model, Model::Stepper { .. })
        {
            return;
        }
        let (Some(a), Some((t_ack, _)), Some(dl), Some(x)) = (e.ack, c.ack, c.deadline, c.expect_s)
        else {
            return;
        };
        let settle = t_ack + (x * 1000.0).round() as i64;
        let done = answered_reads(self.out, &self.cycles, c.dev, a, dl - 1).find(|o| {
            reads_feedback(&d.model, o)
                && matches!(o.kind, ObsKind::Read { done_ms, lied: false, .. } if done_ms >= settle)
                && physically_done(self.case, c, &o.state)
        });
        if let Some(o) = done {
            f.violations.push(format!(
                "{}: timeout TIMEOUT (done_when never held), but a read at {} ms found it physically done ({}); ack {t_ack} ms, expect_s {x}, deadline {dl} ms",
                e.label,
                o.t_ms(),
                brief(&o.state)
            ));
        }
    }

    /// A fail_when code, or a refusal for one: the fault was physically on.
    fn stall(&self, e: &Ended, f: &mut Findings) {
        let (c, label) = (e.c, e.label);
        if c.code == Some("MOTOR_STALL") && c.status != "rejected" {
            let on = e.ack.is_some_and(|a| {
                answered_reads(self.out, &self.cycles, c.dev, a, e.end)
                    .any(|o| o.state.fault == Some(true))
            });
            if !on {
                f.violations.push(format!(
                    "{label}: failed MOTOR_STALL but no read after the ack found the fault physically on"
                ));
            }
        }
        let for_stall =
            c.j.row
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("MOTOR_STALL"));
        if c.status == "rejected" && c.code == Some("INTERLOCK") && for_stall {
            let last = self
                .out
                .obs
                .iter()
                .rfind(|o| o.dev == c.dev && o.seen_by(e.end));
            if last.is_none_or(|o| o.state.fault != Some(true)) {
                f.violations.push(format!(
                    "{label}: rejected for MOTOR_STALL, but the last read before it found no fault ({:?})",
                    last.map(|o| brief(&o.state))
                ));
            }
        }
    }

    /// Counts the outcome, and checks it exactly where the plant decides it.
    fn tally(&self, e: &Ended, f: &mut Findings) {
        let c = e.c;
        let outcome = format!("{} {}", c.status, c.code.unwrap_or(""));
        f.outcomes.push(outcome.trim_end().to_string());
        f.recovered += usize::from(c.event("recovered").is_some());
        if let Some(x) = expected(self.case, self.out, c) {
            f.exact += 1;
            let got = (c.status, c.code, c.verified);
            if !x.matches(got) {
                f.violations
                    .push(format!("{}: expected {x}, got {got:?}", e.label));
            }
        }
    }
}
