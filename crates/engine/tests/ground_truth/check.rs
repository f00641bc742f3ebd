//! The properties: what the journal says against what the simulator physically did.

use super::expect::expected;
use super::physical::*;
use super::report::brief;
use super::rig::{Epoch, Journaled, Obs, ObsKind, Outcome};
use super::spec::*;
use std::collections::BTreeMap;

/// A command as the checks see it: its journal row and timeline, times in case milliseconds.
#[derive(Debug)]
pub struct Cmd<'a> {
    pub id: &'a str,
    pub dev: usize,
    pub action: &'a str,
    pub j: &'a Journaled,
    pub status: &'a str,
    pub code: Option<&'a str>,
    pub verified: bool,
    pub accepted: Option<i64>,
    pub dispatched: Option<(i64, usize)>,
    /// The plan as written at dispatch (`Write`'s display).
    pub writes: Vec<String>,
    /// expect_s as evaluated at dispatch.
    pub expect_s: Option<f64>,
    pub deadline: Option<i64>,
    pub ack: Option<(i64, usize)>,
    pub terminal: Option<(i64, usize)>,
    /// Extra time a later engine's clock gives a recovered command (its wall clock started
    /// behind the paused clock's, see `deadline_slack`).
    pub recovered_skew: Option<i64>,
    pub epochs: &'a [Epoch],
}

const TERMINAL: [&str; 6] = [
    "completed",
    "failed",
    "timeout",
    "cancelled",
    "rejected",
    "sent",
];

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

impl Cmd<'_> {
    /// Case time of the first `name` event, in the epoch that wrote it.
    pub fn event(&self, name: &str) -> Option<i64> {
        self.j
            .events
            .iter()
            .find(|(_, e)| e.event == name)
            .map(|(ep, e)| {
                let e0 = &self.epochs[(*ep).min(self.epochs.len() - 1)];
                e0.start_ms + (e.at_ms - e0.wall_ms)
            })
    }
}

pub fn commands<'a>(case: &Case, out: &'a Outcome) -> Vec<Cmd<'a>> {
    let ids: Vec<String> = (0..case.devices.len())
        .map(|i| device_id(&case.devices, i))
        .collect();
    let to_case = |epoch: usize, wall: i64| {
        let e = &out.epochs[epoch.min(out.epochs.len() - 1)];
        e.start_ms + (wall - e.wall_ms)
    };
    out.journal
        .iter()
        .map(|(id, j)| {
            let at = |name: &str| {
                j.events
                    .iter()
                    .find(|(_, e)| e.event == name)
                    .map(|(ep, e)| (to_case(*ep, e.at_ms), *ep))
            };
            let dispatched_ev = j.events.iter().find(|(_, e)| e.event == "dispatched");
            let writes = dispatched_ev
                .and_then(|(_, e)| e.data.get("writes"))
                .and_then(|w| w.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|w| w.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let expect_s = dispatched_ev
                .and_then(|(_, e)| e.data.get("expect_s"))
                .and_then(|v| v.as_f64());
            let dispatched = at("dispatched");
            let deadline = match (j.row.deadline_ms, dispatched) {
                (Some(d), Some((_, ep))) => Some(to_case(ep, d)),
                _ => None,
            };
            let recovered = at("recovered");
            let recovered_skew = match (recovered, dispatched) {
                (Some((_, later)), Some((_, ep))) => {
                    let (a, b) = (&out.epochs[ep], &out.epochs[later]);
                    Some(((b.start_ms - a.start_ms) - (b.wall_ms - a.wall_ms)).max(0))
                }
                _ => None,
            };
            let terminal = j
                .events
                .iter()
                .find(|(_, e)| TERMINAL.contains(&e.event.as_str()))
                .map(|(ep, e)| (to_case(*ep, e.at_ms), *ep));
            Cmd {
                id,
                dev: ids.iter().position(|d| *d == j.row.device).unwrap_or(0),
                action: &j.row.action,
                j,
                status: &j.row.status,
                code: j.row.error_code.as_deref(),
                verified: j.row.verified,
                accepted: at("accepted").map(|(t, _)| t),
                dispatched,
                writes,
                expect_s,
                deadline,
                ack: at("device_ack"),
                terminal,
                recovered_skew,
                epochs: &out.epochs,
            }
        })
        .collect()
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

/// Every write the devices received belongs to a command that was dispatched and not yet
/// terminal, or is the cancel plan of a command dispatched before it.
fn check_writes(case: &Case, out: &Outcome, cmds: &[Cmd], v: &mut Vec<String>) {
    for o in &out.obs {
        let ObsKind::Write { what } = &o.kind else {
            continue;
        };
        let t = o.t_ms();
        let mine = cmds.iter().filter(|c| c.dev == o.dev);
        let mut covered = false;
        for c in mine {
            let Some((td, _)) = c.dispatched else {
                continue;
            };
            if t < td {
                continue;
            }
            let before_end = c.terminal.is_none_or(|(te, _)| t <= te);
            if before_end && c.writes.contains(what) {
                covered = true;
            }
            if case.devices[c.dev].cancel_writes().contains(what) {
                covered = true;
            }
        }
        if !covered {
            v.push(format!(
                "{}: {what} written at {t} ms (epoch {}) by no running command and no cancel plan",
                device_id(&case.devices, o.dev),
                o.epoch
            ));
        }
    }
}

/// No two commands of one exclusive group between dispatch and terminal at the same time.
fn check_groups(case: &Case, cmds: &[Cmd], v: &mut Vec<String>) {
    let mut by_group: BTreeMap<String, Vec<(i64, i64, &str)>> = BTreeMap::new();
    for c in cmds {
        let (Some((a, _)), Some((b, _))) = (c.dispatched, c.terminal) else {
            continue;
        };
        let id = device_id(&case.devices, c.dev);
        by_group
            .entry(case.devices[c.dev].group_name(&id))
            .or_default()
            .push((a, b, c.id));
    }
    for (g, mut spans) in by_group {
        spans.sort();
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 {
                v.push(format!(
                    "group {g}: {} ran {}..{} ms while {} ran {}..{} ms",
                    w[1].2, w[1].0, w[1].1, w[0].2, w[0].0, w[0].1
                ));
            }
        }
    }
}
