//! The properties: what the journal says against what the simulator physically did.

#[path = "check/across.rs"]
mod across;
#[path = "check/cmd.rs"]
mod cmd;

pub use cmd::{Cmd, commands};

use super::expect::expected;
use super::physical::*;
use super::report::brief;
use super::rig::{Obs, ObsKind, Outcome};
use super::spec::*;
use across::{check_groups, check_writes};
use cmd::TERMINAL;

/// What the checks found: violations fail the case; limitations are false outcomes the engine
/// cannot avoid (a sensor that reads inverted), counted and reported.
#[derive(Debug, Default)]
pub struct Findings {
    pub violations: Vec<String>,
    pub limitations: Vec<String>,
    /// False outcomes of an engine bug that has its own (ignored) regression test.
    pub known: Vec<String>,
    /// Every command's `status CODE`, for the coverage summary.
    pub outcomes: Vec<String>,
    /// Commands whose exact outcome the plant decided (and was checked).
    pub exact: usize,
    /// Commands supervised across a restart.
    pub recovered: usize,
}

/// Slack on top of a deadline: 2 s, the device's liveness window and one request timeout.
fn deadline_slack(d: &DeviceSpec) -> i64 {
    2000 + (d.max_silence_s * 1000.0) as i64 + d.timeout_ms as i64
}

pub fn check(case: &Case, out: &Outcome) -> Findings {
    let cmds = commands(case, out);
    let cycles = cycle_starts(&out.obs);
    let mut violations = Vec::new();
    let mut limitations = Vec::new();
    let mut known = Vec::new();
    let (mut outcomes, mut exact, mut recovered) = (Vec::new(), 0, 0);
    let v = &mut violations;

    // Nothing lost, nothing invented, terminal states never change.
    for id in &out.unsettled {
        v.push(format!("command {id} never reached a terminal status"));
    }
    for s in &out.submitted {
        match &s.result {
            Err(e) => v.push(format!("step {}: submit failed: {e}", s.step)),
            Ok(r) => match out.journal.get(&r.command_id) {
                None => v.push(format!(
                    "step {}: command {} ({}) is not in the journal",
                    s.step, r.command_id, r.status
                )),
                Some(j) if r.status.is_terminal() => {
                    let said = (
                        r.status.as_str(),
                        r.error_code.as_ref().map(|c| c.as_str().to_string()),
                        r.verified,
                    );
                    let now = (
                        j.row.status.as_str(),
                        j.row.error_code.clone(),
                        j.row.verified,
                    );
                    if said != now {
                        v.push(format!(
                            "step {}: submit answered {said:?}, the journal says {now:?}",
                            s.step
                        ));
                    }
                }
                Some(_) => {}
            },
        }
    }
    for (i, held) in out.at_restart.iter().enumerate() {
        for (id, (status, code, verified)) in held {
            match out.journal.get(id) {
                None => v.push(format!(
                    "command {id} was in the journal at restart {i} and is gone"
                )),
                Some(j) if TERMINAL.contains(&status.as_str()) => {
                    let now = (&j.row.status, &j.row.error_code, j.row.verified);
                    if now != (status, code, *verified) {
                        v.push(format!(
                            "command {id} was {status} {code:?} (verified {verified}) at restart {i}, ends {now:?}"
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }
    let submitted_ids: Vec<&str> = out
        .submitted
        .iter()
        .filter_map(|s| s.result.as_ref().ok().map(|r| r.command_id.as_str()))
        .collect();
    for c in &cmds {
        if !submitted_ids.contains(&c.id) {
            v.push(format!(
                "command {} in the journal was never submitted",
                c.id
            ));
        }
        if !TERMINAL.contains(&c.status) {
            v.push(format!("command {} ends {} in the journal", c.id, c.status));
        }
    }

    for c in &cmds {
        let d = &case.devices[c.dev];
        let slack = deadline_slack(d);
        let label = format!(
            "{} {}{:?}",
            device_id(&case.devices, c.dev),
            c.action,
            c.j.row.params
        );
        let outcome = format!("{} {}", c.status, c.code.unwrap_or(""));

        // Deadlines.
        if let (Some(end), Some(dl)) = (c.terminal, c.deadline) {
            let allowed = dl + slack + c.recovered_skew.unwrap_or(0);
            if end.0 > allowed {
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
                    && stop.is_some_and(|t| end.0 - t <= 30_000 + slack.max(1_000))
                {
                    known.push(format!("cancel held open for the stop: {msg}"));
                } else {
                    v.push(msg);
                }
            }
        }
        if let (Some(acc), Some(end)) = (c.accepted, c.terminal) {
            let queue_end =
                acc + (d.queue_timeout_s * 1000.0) as i64 + slack + requires_slack(case, d);
            let left_queue = c.dispatched.map_or(end.0, |(t, _)| t);
            if left_queue > queue_end {
                v.push(format!(
                    "{label}: left the queue at {left_queue} ms, accepted at {acc} ms with queue_timeout_s = {}",
                    d.queue_timeout_s
                ));
            }
        }

        // device_ack: the device acknowledged the plan at that instant.
        let ack = ack_index(out, &cmds, c);
        if c.ack.is_some() && ack.is_none() {
            v.push(format!(
                "{label}: device_ack at {:?} but no acknowledged write of {:?} then",
                c.ack, c.writes
            ));
        }
        let Some(end) = c.terminal else { continue };
        let dd = done_device(case, c);

        // completed + verified: done_when held physically on a read after the ack.
        if c.status == "completed" && c.verified {
            let reads: Vec<&Obs> = ack
                .map(|a| answered_reads(out, &cycles, dd, a, end.0).collect())
                .unwrap_or_default();
            if !reads.iter().any(|o| physically_done(case, c, &o.state)) {
                let msg = format!(
                    "{label}: completed verified at {} ms, but done_when never held physically on a read after the ack ({} reads, physical {:?})",
                    end.0,
                    reads.len(),
                    reads.last().map(|o| brief(&o.state))
                );
                let fooled = reads.iter().any(|o| lied(o));
                if fooled {
                    limitations.push(format!("inverted contact: {msg}"));
                } else {
                    v.push(msg);
                }
            }
        }

        // FEEDBACK_MISMATCH: the feedback never physically moved after the ack, up to the
        // deadline (every request the engine made is an instant the device was looked at).
        if c.code == Some("FEEDBACK_MISMATCH")
            && c.j.row.verification == "feedback"
            && let (Some(a), Some((t_disp, _)), Some((t_ack, _))) = (ack, c.dispatched, c.ack)
        {
            let model = &case.devices[dd].model;
            let base = out.obs[..a]
                .iter()
                .rfind(|o| o.dev == dd && o.t_ms() <= t_disp)
                .map(|o| feedback(model, &o.state));
            // Reads answered before the deadline: one that comes back in the deadline's own
            // millisecond races it (as for TIMEOUT below).
            let until = c.deadline.map_or(end.0, |d| (d - 1).min(end.0));
            let window: Vec<&Obs> = out.obs[a + 1..]
                .iter()
                .filter(|o| o.dev == dd && o.t_ms() <= until)
                .collect();
            let fresh: Vec<&Obs> = answered_reads(out, &cycles, dd, a, until).collect();
            if let (Some(base), Some(o)) = (
                base,
                window
                    .iter()
                    .find(|o| Some(feedback(model, &o.state)) != base),
            ) {
                let seen: Vec<&&Obs> = fresh.iter().filter(|o| reads_feedback(model, o)).collect();
                let last_seen = seen.iter().map(|o| o.t_ms()).max().unwrap_or(t_ack);
                let msg = format!(
                    "{label}: FEEDBACK_MISMATCH, but the feedback physically moved after the ack: {base:?} at dispatch, {:?} at {} ms; deadline {:?}, last answered read of the feedback at {last_seen} ms",
                    feedback(model, &o.state),
                    o.t_ms(),
                    c.deadline,
                );
                let poll = case.devices[dd].poll_ms as i64;
                let timeout = case.devices[dd].timeout_ms as i64;
                if window.iter().any(|o| lied(o)) {
                    limitations.push(format!("inverted contact: {msg}"));
                } else if seen
                    .iter()
                    .any(|r| shows_change(model, base, r, &fresh, until, poll + timeout))
                {
                    // The engine read the change and still said the feedback never moved.
                    v.push(msg);
                } else if until - last_seen > poll + 1 {
                    known.push(format!(
                        "FEEDBACK_MISMATCH on reads that stopped {} ms before the deadline: {msg}",
                        until - last_seen
                    ));
                } else {
                    // Moved and back between two polls, or after the last poll before the
                    // deadline: no read could have seen it.
                    limitations.push(format!("between polls: {msg}"));
                }
            }
        }

        // TIMEOUT says done_when never held: no read the engine had to judge (its own relay's
        // contact or heater's temperature, answered before the deadline and, for "already so",
        // taken expect_s after the ack) found it physically done through a truthful sensor.
        if c.code == Some("TIMEOUT")
            && c.action != "follow"
            && c.event("recovered").is_none()
            && !matches!(d.model, Model::Stepper { .. })
            && let (Some(a), Some((t_ack, _)), Some(dl), Some(e)) =
                (ack, c.ack, c.deadline, c.expect_s)
        {
            let settle = t_ack + (e * 1000.0).round() as i64;
            let done = answered_reads(out, &cycles, c.dev, a, dl - 1).find(|o| {
                reads_feedback(&d.model, o)
                    && matches!(o.kind, ObsKind::Read { done_ms, lied: false, .. } if done_ms >= settle)
                    && physically_done(case, c, &o.state)
            });
            if let Some(o) = done {
                v.push(format!(
                    "{label}: timeout TIMEOUT (done_when never held), but a read at {} ms found it physically done ({}); ack {t_ack} ms, expect_s {e}, deadline {dl} ms",
                    o.t_ms(),
                    brief(&o.state)
                ));
            }
        }

        // A fail_when code: the fault was physically on.
        if c.code == Some("MOTOR_STALL") && c.status != "rejected" {
            let on = ack.is_some_and(|a| {
                answered_reads(out, &cycles, c.dev, a, end.0).any(|o| o.state.fault == Some(true))
            });
            if !on {
                v.push(format!(
                    "{label}: failed MOTOR_STALL but no read after the ack found the fault physically on"
                ));
            }
        }
        if c.status == "rejected"
            && c.code == Some("INTERLOCK")
            && c.j
                .row
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("MOTOR_STALL"))
        {
            let last = out.obs.iter().rfind(|o| o.dev == c.dev && o.seen_by(end.0));
            if last.is_none_or(|o| o.state.fault != Some(true)) {
                v.push(format!(
                    "{label}: rejected for MOTOR_STALL, but the last read before it found no fault ({:?})",
                    last.map(|o| brief(&o.state))
                ));
            }
        }

        outcomes.push(
            format!("{} {}", c.status, c.code.unwrap_or(""))
                .trim_end()
                .to_string(),
        );
        recovered += usize::from(c.event("recovered").is_some());
        // Exact outcomes where the plant decides them.
        if let Some(e) = expected(case, out, c) {
            exact += 1;
            let got = (c.status, c.code, c.verified);
            if !e.matches(got) {
                v.push(format!("{label}: expected {e}, got {got:?}"));
            }
        }
    }

    check_writes(case, out, &cmds, v);
    check_groups(case, &cmds, v);
    Findings {
        violations,
        limitations,
        known,
        outcomes,
        exact,
        recovered,
    }
}

/// Extra queue slack for the fresh reads dispatch takes of every device `requires` reads.
fn requires_slack(case: &Case, d: &DeviceSpec) -> i64 {
    d.requires
        .map_or(0, |r| case.devices[r.device].timeout_ms as i64)
}
