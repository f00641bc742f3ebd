//! The properties: what the journal says against what the simulator physically did.

use super::expect::expected;
use super::rig::{Epoch, Journaled, Obs, ObsKind, Outcome};
use super::spec::*;
use closedloop_sim::SimState;
use std::collections::BTreeMap;
use std::fmt::Write as _;

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
                deadline,
                ack: at("device_ack"),
                terminal,
                recovered_skew,
                epochs: &out.epochs,
            }
        })
        .collect()
}

/// The device whose state `done_when` reads: the command's own, or the one `follow` watches.
pub fn done_device(case: &Case, c: &Cmd) -> usize {
    match (c.action, case.devices[c.dev].follow) {
        ("follow", Some(k)) => k,
        _ => c.dev,
    }
}

fn param(c: &Cmd, name: &str) -> Option<serde_json::Value> {
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
fn feedback(model: &Model, s: &SimState) -> (i64, bool, bool) {
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

/// The log index of the acknowledgement of `c`'s plan: the last acknowledged write of its last
/// plan entry on its device at the journaled `device_ack` instant.
fn ack_index(out: &Outcome, c: &Cmd) -> Option<usize> {
    let (t, epoch) = c.ack?;
    let last = c.writes.last()?;
    out.obs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.dev == c.dev && o.epoch == epoch && o.t_ms() == t)
        .filter(|(_, o)| match &o.kind {
            ObsKind::WriteDone { sent, ok: true } => {
                matches!(&out.obs[*sent].kind, ObsKind::Write { what } if what == last)
            }
            _ => false,
        })
        .map(|(i, _)| i)
        .next_back()
}

/// Reads of `dev` the engine issued after log index `after` and up to case time `until`, that
/// came back with data.
fn answered_reads(
    out: &Outcome,
    dev: usize,
    after: usize,
    until: i64,
) -> impl Iterator<Item = &Obs> {
    out.obs
        .iter()
        .enumerate()
        .filter(move |(i, o)| *i > after && o.dev == dev && o.seen_by(until))
        .map(|(_, o)| o)
}

/// Whether `o` is a read that came back with the block holding the feedback `done_when` reads.
fn reads_feedback(model: &Model, o: &Obs) -> bool {
    use closedloop_driver::Area;
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
fn shows_change(
    model: &Model,
    base: (i64, bool, bool),
    r: &Obs,
    window: &[&Obs],
    until: i64,
    timeout_ms: i64,
) -> bool {
    use closedloop_driver::Area;
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
fn lied(o: &Obs) -> bool {
    matches!(o.kind, ObsKind::Read { lied: true, .. })
}

/// Slack on top of a deadline: 2 s, the device's liveness window and one request timeout.
fn deadline_slack(d: &DeviceSpec) -> i64 {
    2000 + (d.max_silence_s * 1000.0) as i64 + d.timeout_ms as i64
}

pub fn check(case: &Case, out: &Outcome) -> Findings {
    let cmds = commands(case, out);
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
                // safe-state limit: a device that gives no such read keeps the command open
                // that long (reported as an engine bug, see the regression test).
                let stop = c.event("cancel_sent");
                if c.status == "cancelled" && stop.is_some_and(|t| end.0 - t >= 30_000) {
                    known.push(format!("cancel held open 30 s: {msg}"));
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
        let ack = ack_index(out, c);
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
                .map(|a| answered_reads(out, dd, a, end.0).collect())
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
            let until = c.deadline.map_or(end.0, |d| d.min(end.0));
            let window: Vec<&Obs> = out.obs[a + 1..]
                .iter()
                .filter(|o| o.dev == dd && o.t_ms() <= until)
                .collect();
            if let (Some(base), Some(o)) = (
                base,
                window
                    .iter()
                    .find(|o| Some(feedback(model, &o.state)) != base),
            ) {
                let seen: Vec<&&Obs> = window
                    .iter()
                    .filter(|o| reads_feedback(model, o) && o.seen_by(until))
                    .collect();
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
                    .any(|r| shows_change(model, base, r, &window, until, poll + timeout))
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

        // A fail_when code: the fault was physically on.
        if c.code == Some("MOTOR_STALL") && c.status != "rejected" {
            let on = ack.is_some_and(|a| {
                answered_reads(out, c.dev, a, end.0).any(|o| o.state.fault == Some(true))
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

pub fn brief(s: &SimState) -> String {
    let mut out = String::new();
    if s.silent {
        out.push_str("silent ");
    }
    if let Some(c) = s.contact {
        let _ = write!(
            out,
            "coil={} contact={c}",
            s.coils.first().copied().unwrap_or(false)
        );
    }
    if let Some(p) = s.position_mm {
        let _ = write!(
            out,
            "pos={p:.2} target={:.2} moving={} fault={}",
            s.target_mm.unwrap_or(f64::NAN),
            s.moving.unwrap_or(false),
            s.fault.unwrap_or(false)
        );
    }
    if let Some(t) = s.temperature_c {
        let _ = write!(
            out,
            "temp={t:.2} sp={:.1} enabled={}",
            s.setpoint_c.unwrap_or(f64::NAN),
            s.coils.first().copied().unwrap_or(false)
        );
    }
    out
}

/// A readable account of a case for a failure message.
pub fn report(case: &Case, out: &Outcome) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "--- plant ---{}", plant_toml(&case.devices));
    let _ = writeln!(s, "--- steps ---");
    let mut t = 0;
    for (i, st) in case.steps.iter().enumerate() {
        t += st.delay_ms;
        let _ = writeln!(s, "#{i} at {t} ms: {:?}", st.op);
    }
    let _ = writeln!(s, "--- epochs --- {:?}", out.epochs);
    let _ = writeln!(s, "--- commands ---");
    for c in commands(case, out) {
        let evs: Vec<String> =
            c.j.events
                .iter()
                .filter(|(_, e)| e.event != "signal")
                .map(|(ep, e)| {
                    let ep_ = &out.epochs[(*ep).min(out.epochs.len() - 1)];
                    format!("{}@{}", e.event, ep_.start_ms + e.at_ms - ep_.wall_ms)
                })
                .collect();
        let _ = writeln!(
            s,
            "{} {} {} {} -> {} {:?} verified={} deadline={:?} | {}\n    detail: {}",
            c.id,
            device_id(&case.devices, c.dev),
            c.action,
            c.j.row.params,
            c.status,
            c.code,
            c.verified,
            c.deadline,
            evs.join(" "),
            c.j.row.detail.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(s, "--- device log (first 200) ---");
    for o in out.obs.iter().take(200) {
        let _ = writeln!(
            s,
            "{:>6} e{} {} {:?} {}",
            o.t_ms(),
            o.epoch,
            device_id(&case.devices, o.dev),
            o.kind,
            brief(&o.state)
        );
    }
    s
}
