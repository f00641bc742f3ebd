//! Exact outcomes, where the plant alone decides them.
//!
//! A command's outcome is decided by its plant when nothing else touches it: no restart, no
//! run-time fault, no cancel, no other command on its device, its exclusive group or a device
//! it reads, and only faults in force from the start. Then the simulator's physics and the
//! engine's timing rules (deadline = expect_s × 3 + floor + poll from dispatch; "already so"
//! needs expect_s) give one answer, unless the physics lands within a poll and 20 ms of the
//! deadline, where either answer is right and none is asserted.

use super::check::Cmd;
use super::rig::Outcome;
use super::spec::*;
use closedloop_sim::{Fault, FaultKind};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expected {
    pub status: &'static str,
    pub code: Option<&'static str>,
}

impl Expected {
    fn new(status: &'static str, code: Option<&'static str>) -> Option<Expected> {
        Some(Expected { status, code })
    }

    /// `verified` is true exactly when feedback read after the ack decided the outcome:
    /// a completion, or a `fail_when` code.
    pub fn matches(&self, (status, code, verified): (&str, Option<&str>, bool)) -> bool {
        let decided_by_feedback = status == "completed" || code == Some("MOTOR_STALL");
        status == self.status && code == self.code && verified == decided_by_feedback
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.code.unwrap_or(""))?;
        if self.status == "completed" {
            f.write_str(" (verified)")?;
        }
        Ok(())
    }
}

const COMPLETED: Option<Expected> = Some(Expected {
    status: "completed",
    code: None,
});

/// The devices a command on device `i` depends on: its own and those its criteria read.
fn reads(case: &Case, i: usize, follow: bool) -> Vec<usize> {
    let d = &case.devices[i];
    let mut out = vec![i];
    out.extend(d.requires.map(|r| r.device));
    if follow {
        out.extend(d.follow);
    }
    out
}

/// The exact outcome of `c`, if its plant decides it.
pub fn expected(case: &Case, out: &Outcome, c: &Cmd) -> Option<Expected> {
    if !alone(case, out, c) {
        return None;
    }
    let follow = c.action == "follow";
    let own = &case.devices[c.dev];
    if let Some(decided) = by_faults(own, follow) {
        return decided;
    }
    let Arg::On(on) = arg_of(c) else {
        return number_model(case, c, own);
    };
    let Model::Relay { pull_in_ms } = own.model else {
        return None;
    };
    relay_model(case, own, follow, on, pull_in_ms)
}

/// Whether nothing but its plant touches `c`: no step but submissions, no standing alarm
/// blocking its device, no other command on what it depends on, no board, no fault on the
/// devices it reads and none of its own's coming later.
fn alone(case: &Case, out: &Outcome, c: &Cmd) -> bool {
    let quiet = case.steps.iter().all(|s| matches!(s.op, Op::Submit { .. }));
    // A standing alarm blocking the device decides by what its own device reads, and first.
    let blocked = case.alarm.is_some_and(|a| a.blocks == c.dev);
    if !quiet || blocked {
        return false;
    }
    let follow = c.action == "follow";
    let own = &case.devices[c.dev];
    let own_id = device_id(&case.devices, c.dev);
    let group = own.group_name(&own_id);
    let touched = reads(case, c.dev, follow);
    // The only command on its device, its group and the devices it reads.
    let others = out
        .submitted
        .iter()
        .filter(|s| s.result.as_ref().is_ok_and(|r| r.command_id != c.id))
        .filter(|s| {
            let id = device_id(&case.devices, s.device);
            touched.contains(&s.device) || case.devices[s.device].group_name(&id) == group
        })
        .count();
    // A board reports when it likes: its heartbeat, not the plant's timing, decides (`check/board.rs`).
    if others > 0 || touched.iter().any(|&k| case.devices[k].push.is_some()) {
        return false;
    }
    // Devices read by the criteria, other than its own, are healthy; its own faults static.
    !(touched[1..]
        .iter()
        .any(|&k| !case.devices[k].faults.is_empty())
        || own.faults.iter().any(|f| f.after_ms.is_some()))
}

/// What the device's own faults (in force from the start) and its interlock decide before any
/// physics: `Some` of the outcome (`None` inside: either answer is right), or `None` when they
/// leave it to the physics.
fn by_faults(own: &DeviceSpec, follow: bool) -> Option<Option<Expected>> {
    let has = |k: FaultKind| own.faults.iter().any(|f| f.fault.kind() == k);
    let fault = |k: FaultKind| {
        own.faults
            .iter()
            .find(|f| f.fault.kind() == k)
            .map(|f| f.fault)
    };
    let rejected = |code| Some(Expected::new("rejected", Some(code)));
    let failed = |code| Some(Expected::new("failed", Some(code)));

    // Never a valid answer: offline (or garbled) at admission.
    if has(FaultKind::PowerOff) || has(FaultKind::Zombie) {
        return rejected("DEVICE_OFFLINE");
    }
    if let Some(Fault::LatencyMs { ms }) = fault(FaultKind::LatencyMs) {
        // Every answer comes after the request timeout: none is ever heard.
        if ms > own.timeout_ms + 1 {
            return rejected("DEVICE_OFFLINE");
        }
        return Some(None);
    }
    if has(FaultKind::DropRate) || has(FaultKind::Reboot) {
        // Lost requests and a silence of its own: the last error may be either.
        return Some(None);
    }
    if has(FaultKind::CrcError) {
        // Answers arrive, every one garbled.
        return rejected("CRC_MISMATCH");
    }
    // Nak: every read answers exception 4 (a sign of life, no values), every write is refused.
    if has(FaultKind::Nak) {
        if !follow {
            // A criterion signal the device refuses to read: refused before anything is written.
            return rejected("BUS_NAK");
        }
        if own.requires.is_some_and(|r| !r.off) {
            return rejected("INTERLOCK");
        }
        return failed("BUS_NAK");
    }
    // Every device starts "off": contact open, axis idle, heater disabled.
    if own.requires.is_some_and(|r| !r.off) {
        return rejected("INTERLOCK");
    }
    if let Some(Fault::Stall { at_mm: None }) = fault(FaultKind::Stall) {
        // Struck at power-on: the fault output is latched before any command.
        return rejected("INTERLOCK");
    }
    None
}

/// The physics takes `t` ms after the ack: decided when well inside or well past the
/// deadline, with `late` the outcome of "still not there at the deadline".
fn by(own: &DeviceSpec, t: f64, expect_s: f64, late: Option<Expected>) -> Option<Expected> {
    let poll = own.poll_ms as f64;
    let floor = own.floor_ms as f64;
    let w = expect_s * 3000.0 + floor + poll;
    if t + poll + 20.0 < w {
        COMPLETED
    } else if t > w + 20.0 {
        late
    } else {
        None
    }
}

/// Relays: `switch` (or `follow`) to `on`.
fn relay_model(
    case: &Case,
    own: &DeviceSpec,
    follow: bool,
    on: bool,
    pull_in_ms: u64,
) -> Option<Expected> {
    let has = |k: FaultKind| own.faults.iter().any(|f| f.fault.kind() == k);
    let failed = |code| Expected::new("failed", Some(code));
    let e = expect_s(own, 0.0, pull_in_ms);
    if follow {
        // The watched relay stays open: `on = false` is already so, `on = true` never happens.
        let watched = &case.devices[own.follow?];
        if on {
            return failed("FEEDBACK_MISMATCH");
        }
        let t = e * 1000.0 + watched.poll_ms as f64;
        return by(own, t, e, None);
    }
    let pull = pull_in_ms as f64;
    if has(FaultKind::Brownout) {
        // The contact never closes; read inverted, it says "closed" throughout, which is
        // "already so" for on = true (the known limitation: not asserted).
        return match (on, has(FaultKind::SwappedContacts)) {
            (true, true) => None,
            (false, true) => failed("FEEDBACK_MISMATCH"),
            (true, false) => failed("FEEDBACK_MISMATCH"),
            (false, false) => COMPLETED,
        };
    }
    if has(FaultKind::SwappedContacts) {
        if !on {
            // Reads "closed" while open; the coil stays off: nothing ever changes.
            return failed("FEEDBACK_MISMATCH");
        }
        // Reads "closed" at dispatch ("already so"), then "open" once the contact closes.
        if e * 1000.0 + 1.0 < pull {
            // expect_s is shorter than the pull-in: the settle read still sees the inverted
            // open contact. A known limitation (reported, not asserted).
            return None;
        }
        let timeout = Expected::new("timeout", Some("TIMEOUT"));
        return match by(
            own,
            pull,
            e,
            Some(Expected::new("failed", Some("FEEDBACK_MISMATCH"))?),
        ) {
            Some(x) if x.status == "completed" => timeout,
            other => other,
        };
    }
    if !on {
        return COMPLETED;
    }
    by(own, pull, e, failed("FEEDBACK_MISMATCH"))
}

fn arg_of(c: &Cmd) -> Arg {
    let p = &c.j.row.params;
    if let Some(on) = p.get("on").and_then(|v| v.as_bool()) {
        return Arg::On(on);
    }
    let x = p
        .get("target_mm")
        .or_else(|| p.get("to_c"))
        .and_then(|v| v.as_f64())
        .unwrap_or(f64::NAN);
    Arg::Number(x)
}

/// expect_s as the engine evaluates it at dispatch: `distance_s` is the real duration.
fn expect_s(d: &DeviceSpec, distance_s: f64, pull_in_ms: u64) -> f64 {
    match (d.expect, &d.model) {
        (Expect::Fixed { ms }, _) => ms as f64 / 1000.0,
        (Expect::Consistent { margin_ms }, Model::Relay { .. }) => {
            (pull_in_ms + margin_ms) as f64 / 1000.0
        }
        (Expect::Consistent { margin_ms }, _) => distance_s + margin_ms as f64 / 1000.0,
    }
}

/// Steppers and heaters.
fn number_model(case: &Case, c: &Cmd, own: &DeviceSpec) -> Option<Expected> {
    let _ = case;
    let Arg::Number(x) = arg_of(c) else {
        return None;
    };
    let poll = own.poll_ms as f64;
    let window = |e: f64| e * 3000.0 + own.floor_ms as f64 + poll;
    let decide = |t: f64, e: f64, done: Option<Expected>, late: Option<Expected>| {
        let w = window(e);
        if t + poll + 20.0 < w {
            done
        } else if t > w + 20.0 && w > 2.0 * poll + 10.0 {
            late
        } else {
            None
        }
    };
    let timeout = Expected::new("timeout", Some("TIMEOUT"));
    match &own.model {
        Model::Stepper {
            speed_mm_s, travel, ..
        } => {
            let p0 = if (travel[0]..=travel[1]).contains(&0.0) {
                0.0
            } else {
                travel[0]
            };
            let e = expect_s(own, (x - p0).abs() / speed_mm_s, 0);
            if x < travel[0] || x > travel[1] {
                return Expected::new("failed", Some("REGISTER_INVALID"));
            }
            if (x - p0).abs() <= 0.2 {
                return COMPLETED;
            }
            let ahead = |at: f64| {
                if x >= p0 {
                    at > p0 && at <= x
                } else {
                    at < p0 && at >= x
                }
            };
            let stall = own.faults.iter().find_map(|f| match f.fault {
                Fault::Stall { at_mm: Some(at) } if ahead(at) => Some(at),
                _ => None,
            });
            match stall {
                Some(at) => {
                    let t = (at - p0).abs() / speed_mm_s * 1000.0;
                    decide(t, e, Expected::new("failed", Some("MOTOR_STALL")), timeout)
                }
                None => {
                    let t = (x - p0).abs() / speed_mm_s * 1000.0;
                    decide(t, e, COMPLETED, timeout)
                }
            }
        }
        Model::Heater {
            rate_c_per_s,
            ambient_c,
        } => {
            let e = expect_s(own, (x - ambient_c).max(0.0) / rate_c_per_s, 0);
            if *ambient_c >= x - 0.5 {
                return COMPLETED;
            }
            let t = (x - 0.55 - ambient_c) / rate_c_per_s * 1000.0;
            decide(t, e, COMPLETED, timeout)
        }
        Model::Relay { .. } => None,
    }
}
