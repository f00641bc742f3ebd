//! What a case is: a plant of 1–3 simulated devices and a script of steps, both plain data that
//! proptest generates, shrinks and prints; and the plant file they render to.

use closedloop_sim::{Fault, FaultKind, FaultSpec};
use std::fmt::Write as _;

/// One generated case.
#[derive(Debug, Clone)]
pub struct Case {
    pub devices: Vec<DeviceSpec>,
    pub steps: Vec<Step>,
    /// A standing alarm on one device's feedback, blocking another (`alarm.rs`).
    pub alarm: Option<super::alarm::AlarmSpec>,
}

/// A simulated model and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    Relay {
        pull_in_ms: u64,
    },
    Stepper {
        speed_mm_s: f64,
        travel: [f64; 2],
        /// The action's `target_mm` range: may reach past the travel (the sim answers exception 3).
        param: [f64; 2],
    },
    Heater {
        rate_c_per_s: f64,
        ambient_c: f64,
    },
}

/// How the action's `expect_s` relates to how long the device really takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// The real duration plus `margin_ms`.
    Consistent { margin_ms: u64 },
    /// A constant, unrelated to the real duration (too short or too long).
    Fixed { ms: u64 },
}

/// A precondition on another device (`requires`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Requires {
    pub device: usize,
    /// Require the other device "off" (contact open, axis idle, heater cool) or "on".
    pub off: bool,
}

#[derive(Debug, Clone)]
pub struct DeviceSpec {
    pub model: Model,
    pub poll_ms: u64,
    pub max_silence_s: f64,
    /// The sim's request timeout (the engine waits this long for one answer).
    pub timeout_ms: u64,
    pub seed: u64,
    /// Faults in the plant file (static, or `after_ms` from the first actuating write).
    pub faults: Vec<FaultSpec>,
    pub expect: Expect,
    pub floor_ms: u64,
    pub queue: bool,
    pub queue_timeout_s: f64,
    /// `Some(g)`: `exclusive = "bench{g}"`, shared with every device that names it.
    pub group: Option<u8>,
    pub requires: Option<Requires>,
    pub idempotent: bool,
    /// Relays: a second action `follow` that writes this relay's coil and is confirmed by another
    /// relay's contact (`devices.<id>.contact`).
    pub follow: Option<usize>,
    /// Relays: behind a board that reports when it likes (`rig/board.rs`) instead of being polled.
    pub push: Option<Push>,
}

/// A relay board that reports when it likes (an MQTT board).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Push {
    /// It reports at least this often while it reports (and on every change it reads).
    pub heartbeat_ms: u64,
    /// Each report arrives this long after it was taken.
    pub late_ms: u64,
    /// How it starts: reporting, or silent (never heard from until the script wakes it).
    pub start: BoardMode,
}

/// What a board does (`Op::Board` changes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoardMode {
    /// Reports and carries out writes.
    Reports,
    /// Reports nothing; still carries out writes.
    Silent,
    /// Reports, and ignores every write (acknowledged by its broker all the same).
    Deaf,
    /// Reports (on its heartbeat and on every change it reads) and carries out writes, but every
    /// report carries no value (`None`, an empty payload, JSON `null`, `nan`): a payload fault,
    /// recorded as `Snapshot::no_value`.
    Garbled,
}

/// One step of a script, after `delay_ms` of (virtual) time.
#[derive(Debug, Clone)]
pub struct Step {
    pub delay_ms: u64,
    pub op: Op,
}

#[derive(Debug, Clone)]
pub enum Op {
    /// Submits on device `device % n`: action 0 (the device's own) or 1 (`follow`, if any).
    Submit {
        device: usize,
        follow: bool,
        arg: Arg,
        wait_ms: u64,
    },
    /// Cancels the `nth % submitted`-th command submitted so far, if any.
    Cancel { nth: usize },
    /// Injects a fault into device `device % n` now.
    Inject { device: usize, fault: FaultSpec },
    /// Clears a fault kind on device `device % n`.
    Clear { device: usize, kind: FaultKind },
    /// `Engine::shutdown`, then `Engine::start` on the same journal; `fresh`: the devices are
    /// new simulator instances (the plant was power-cycled too), else the same ones go on.
    Restart { fresh: bool },
    /// Device `device % n`'s feedback block (`alarm::feedback_block`) answers every read with
    /// exception 4 from now on (`on`), or reads again: one register failing while the rest of
    /// the device answers.
    Refuse { device: usize, on: bool },
    /// Board `device % n` (a relay with `push`) reports, goes silent, goes deaf or sends reports
    /// without a value from now on.
    Board { device: usize, mode: BoardMode },
}

/// The argument of an action: `on` (relays), `target_mm` (steppers), `to_c` (heaters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    On(bool),
    Number(f64),
}

impl DeviceSpec {
    pub fn model_name(&self) -> &'static str {
        match self.model {
            Model::Relay { .. } => "relay",
            Model::Stepper { .. } => "stepper",
            Model::Heater { .. } => "heater",
        }
    }

    /// The exclusive group of the device's actions.
    pub fn group_name(&self, id: &str) -> String {
        match self.group {
            Some(g) => format!("bench{g}"),
            None => id.to_string(),
        }
    }

    pub fn action_name(&self) -> &'static str {
        match self.model {
            Model::Relay { .. } => "switch",
            Model::Stepper { .. } => "move_to",
            Model::Heater { .. } => "heat",
        }
    }

    /// The writes of the cancel plan, as `Write`'s display shows them.
    pub fn cancel_writes(&self) -> Vec<String> {
        match self.model {
            Model::Relay { .. } => vec![],
            Model::Stepper { .. } => vec!["coil:1 <- [true]".into()],
            Model::Heater { .. } => vec!["coil:0 <- [false]".into()],
        }
    }
}

pub fn device_id(devices: &[DeviceSpec], i: usize) -> String {
    format!("{}{i}", devices[i].model_name())
}

/// The plant file of a case: its devices, then its alarm.
pub fn case_toml(case: &Case) -> String {
    let mut toml = plant_toml(&case.devices);
    if let Some(a) = &case.alarm {
        toml.push_str(&a.toml(&case.devices));
    }
    toml
}

/// The devices' part of a plant file.
pub fn plant_toml(devices: &[DeviceSpec]) -> String {
    let mut out = String::new();
    for (i, d) in devices.iter().enumerate() {
        let id = device_id(devices, i);
        device_toml(&mut out, d, &id);
        match &d.model {
            Model::Relay { pull_in_ms } => relay_toml(&mut out, devices, d, &id, *pull_in_ms),
            Model::Stepper {
                speed_mm_s, param, ..
            } => stepper_toml(&mut out, devices, d, &id, *speed_mm_s, *param),
            Model::Heater { rate_c_per_s, .. } => {
                heater_toml(&mut out, devices, d, &id, *rate_c_per_s)
            }
        }
    }
    out
}

/// A device's `[[device]]` table up to its signals: its driver, faults, polling and liveness.
fn device_toml(out: &mut String, d: &DeviceSpec, id: &str) {
    let faults: Vec<String> = d.faults.iter().map(fault_toml).collect();
    let model_opts = match &d.model {
        Model::Relay { pull_in_ms } => format!("pull_in_ms = {pull_in_ms}"),
        Model::Stepper {
            speed_mm_s, travel, ..
        } => format!(
            "speed_mm_s = {speed_mm_s:?}, travel_mm = [{:?}, {:?}]",
            travel[0], travel[1]
        ),
        Model::Heater {
            rate_c_per_s,
            ambient_c,
        } => format!("rate_c_per_s = {rate_c_per_s:?}, ambient_c = {ambient_c:?}"),
    };
    let _ = write!(
        out,
        r#"
[[device]]
id = "{id}"
description = "{id}"
driver = {{ kind = "sim", model = "{model}", {model_opts}, timeout_ms = {timeout}, seed = {seed}, faults = [{faults}] }}
poll_ms = {poll}
liveness = {{ max_silence_s = {silence:?} }}
"#,
        model = d.model_name(),
        timeout = d.timeout_ms,
        seed = d.seed,
        faults = faults.join(", "),
        poll = d.poll_ms,
        silence = d.max_silence_s,
    );
}

/// The keys every action of device `d` (id `id`) ends with: its floor, queue, group,
/// idempotence and `requires`.
fn action_common(out: &mut String, devices: &[DeviceSpec], d: &DeviceSpec, id: &str) {
    let _ = writeln!(out, "timeout_floor_ms = {}", d.floor_ms);
    let _ = writeln!(out, "queue = {}", d.queue);
    let _ = writeln!(out, "queue_timeout_s = {:?}", d.queue_timeout_s);
    let _ = writeln!(out, "exclusive = \"{}\"", d.group_name(id));
    let _ = writeln!(out, "idempotent = {}", d.idempotent);
    if let Some(r) = d.requires {
        let _ = writeln!(out, "requires = \"{}\"", requires_expr(devices, r));
    }
}

/// A relay's signals, its `switch` and, when it follows another relay, its `follow`.
fn relay_toml(out: &mut String, devices: &[DeviceSpec], d: &DeviceSpec, id: &str, pull_in_ms: u64) {
    out.push_str(
        r#"[device.signals]
commanded = { coil = 0 }
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the relay."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
"#,
    );
    let _ = writeln!(out, "expect_s = {:?}", expect_const(d.expect, pull_in_ms));
    action_common(out, devices, d, id);
    if let Some(k) = d.follow {
        let other = device_id(devices, k);
        let _ = write!(
            out,
            r#"[[device.action]]
name = "follow"
description = "Switch the relay; another relay's contact confirms it."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "devices.{other}.contact == params.on"
"#
        );
        let _ = writeln!(out, "expect_s = {:?}", expect_const(d.expect, pull_in_ms));
        action_common(out, devices, d, id);
    }
}

/// A stepper's signals and its `move_to` (with targets within `param`).
fn stepper_toml(
    out: &mut String,
    devices: &[DeviceSpec],
    d: &DeviceSpec,
    id: &str,
    speed_mm_s: f64,
    param: [f64; 2],
) {
    let _ = write!(
        out,
        r#"[device.signals]
position_mm = {{ holding = 2, type = "i32", scale = 0.01, unit = "mm" }}
moving = {{ discrete_input = 0 }}
fault = {{ discrete_input = 1 }}
[[device.action]]
name = "move_to"
description = "Move the axis."
params = {{ target_mm = {{ type = "number", min = {:?}, max = {:?}, unit = "mm" }} }}
write = [{{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }}, {{ coil = 0, value = "true" }}]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = {{ MOTOR_STALL = "fault" }}
cancel = [{{ coil = 1, value = "true" }}]
stopped_when = "!moving"
"#,
        param[0], param[1]
    );
    let expect = match d.expect {
        Expect::Consistent { margin_ms } => format!(
            "\"abs(params.target_mm - position_mm) / {speed_mm_s:?} + {:?}\"",
            margin_ms as f64 / 1000.0
        ),
        Expect::Fixed { ms } => format!("{:?}", ms as f64 / 1000.0),
    };
    let _ = writeln!(out, "expect_s = {expect}");
    action_common(out, devices, d, id);
}

/// A heater's signals and its `heat`.
fn heater_toml(
    out: &mut String,
    devices: &[DeviceSpec],
    d: &DeviceSpec,
    id: &str,
    rate_c_per_s: f64,
) {
    out.push_str(
        r#"[device.signals]
setpoint_c = { holding = 0, type = "i16", scale = 0.1, unit = "°C" }
enabled = { coil = 0 }
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
[[device.action]]
name = "heat"
description = "Heat to a temperature."
params = { to_c = { type = "number", min = 0.0, max = 300.0, unit = "°C" } }
write = [{ holding = 0, type = "i16", value = "params.to_c * 10.0" }, { coil = 0, value = "true" }]
done_when = "temperature_c >= params.to_c - 0.5"
cancel = [{ coil = 0, value = "false" }]
stopped_when = "!enabled"
"#,
    );
    let expect = match d.expect {
        Expect::Consistent { margin_ms } => format!(
            "\"max(params.to_c - temperature_c, 0.0) / {rate_c_per_s:?} + {:?}\"",
            margin_ms as f64 / 1000.0
        ),
        Expect::Fixed { ms } => format!("{:?}", ms as f64 / 1000.0),
    };
    let _ = writeln!(out, "expect_s = {expect}");
    action_common(out, devices, d, id);
}

/// A relay's `expect_s` as a constant: its pull-in time plus the margin, or the fixed value.
fn expect_const(e: Expect, pull_in_ms: u64) -> f64 {
    match e {
        Expect::Consistent { margin_ms } => (pull_in_ms + margin_ms) as f64 / 1000.0,
        Expect::Fixed { ms } => ms as f64 / 1000.0,
    }
}

/// The `requires` expression: the other device off (or on).
pub fn requires_expr(devices: &[DeviceSpec], r: Requires) -> String {
    let other = device_id(devices, r.device);
    let on = match devices[r.device].model {
        Model::Relay { .. } => format!("devices.{other}.contact"),
        Model::Stepper { .. } => format!("devices.{other}.moving"),
        Model::Heater { .. } => format!("devices.{other}.enabled"),
    };
    if r.off { format!("!{on}") } else { on }
}

fn fault_toml(f: &FaultSpec) -> String {
    let mut s = format!("{{ kind = \"{}\"", f.fault.kind());
    match f.fault {
        Fault::Stall { at_mm: Some(at) } => {
            let _ = write!(s, ", at_mm = {at:?}");
        }
        Fault::Reboot { down_ms } => {
            let _ = write!(s, ", down_ms = {down_ms}");
        }
        Fault::LatencyMs { ms } => {
            let _ = write!(s, ", ms = {ms}");
        }
        Fault::DropRate { p } => {
            let _ = write!(s, ", p = {p:?}");
        }
        _ => {}
    }
    if let Some(ms) = f.after_ms {
        let _ = write!(s, ", after_ms = {ms}");
    }
    s.push_str(" }");
    s
}
