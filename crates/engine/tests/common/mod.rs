//! A rig for engine tests: a plant from TOML, a journal in a temporary folder, simulated devices.

#![allow(dead_code)]

use closedloop_engine::{CommandResult, Engine, Submission};
use closedloop_journal::Journal;
use closedloop_sim::SimDevice;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub struct Rig {
    pub engine: Engine,
    pub sims: BTreeMap<String, SimDevice>,
    pub dir: tempfile::TempDir,
}

pub fn plant(src: &str) -> closedloop_plant::Plant {
    match closedloop_plant::parse(src, "test.toml", std::path::Path::new(".")) {
        Ok(p) => p,
        Err(e) => panic!("test plant does not parse:\n{e}"),
    }
}

pub async fn rig(src: &str) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    rig_in(src, dir).await
}

pub async fn rig_in(src: &str, dir: tempfile::TempDir) -> Rig {
    let plant = plant(src);
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    let drivers = closedloop_engine::build_drivers(&plant).unwrap();
    let engine = Engine::start(Arc::new(plant), journal, drivers.map)
        .await
        .unwrap();
    Rig {
        engine,
        sims: drivers.sims,
        dir,
    }
}

impl Rig {
    /// Submits and waits up to `wait_s` for a terminal status.
    pub async fn act(&self, device: &str, action: &str, args: Value, wait_s: f64) -> CommandResult {
        let args = args.as_object().cloned().unwrap_or_default();
        self.engine
            .submit(Submission {
                device: device.into(),
                action: action.into(),
                args,
                wait: Duration::from_secs_f64(wait_s),
                ..Submission::default()
            })
            .await
            .unwrap()
    }

    /// Polls status until terminal (bounded by 30 s).
    pub async fn settle(&self, r: &CommandResult) -> CommandResult {
        let mut cur = r.clone();
        for _ in 0..30 {
            if cur.status.is_terminal() {
                return cur;
            }
            cur = self
                .engine
                .status(&r.command_id, Duration::from_secs(1))
                .await
                .unwrap();
        }
        panic!("command never settled: {cur:#?}");
    }

    /// Waits until the device has answered once.
    pub async fn online(&self, device: &str) {
        for _ in 0..500 {
            if let Some(s) = self.engine.device_state(device)
                && s.liveness == closedloop_engine::Liveness::Online
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{device} never came online");
    }

    pub fn sim(&self, id: &str) -> &SimDevice {
        &self.sims[id]
    }
}

pub fn events(r: &CommandResult) -> Vec<String> {
    r.timeline.iter().map(|e| e.event.clone()).collect()
}

pub fn at_of<'a>(r: &'a CommandResult, event: &str) -> &'a str {
    &r.timeline
        .iter()
        .find(|e| e.event == event)
        .unwrap_or_else(|| panic!("no {event} in {:?}", events(r)))
        .at
}

pub fn code(r: &CommandResult) -> String {
    r.error_code
        .as_ref()
        .map(|c| c.as_str().to_string())
        .unwrap_or_default()
}

pub fn ev_value(r: &CommandResult, signal: &str) -> Value {
    r.evidence
        .get(signal)
        .and_then(|e| e.get("value"))
        .cloned()
        .unwrap_or(json!(null))
}

pub const RELAY: &str = r#"
[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" FAULTS }
poll_ms = 20
liveness = { max_silence_s = 0.5 }
[device.signals]
commanded = { coil = 0 }
contact   = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Turn the lamp on or off."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02
idempotent = true
"#;

/// The relay plant with a `faults = [...]` list (or none).
pub fn relay(faults: &str) -> String {
    let f = if faults.is_empty() {
        String::new()
    } else {
        format!(", faults = [{faults}]")
    };
    RELAY.replace(" FAULTS", &f)
}

pub const SLIDE: &str = r#"
[[device]]
id = "slide"
description = "Linear slide"
driver = { kind = "sim", model = "stepper", speed_mm_s = 100.0, travel_mm = [0.0, 300.0] FAULTS }
poll_ms = 20
liveness = { max_silence_s = 0.5 }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving      = { discrete_input = 0 }
fault       = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = { MOTOR_STALL = "fault" }
expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05"
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
queue_timeout_s = QUEUE
idempotent = false

[[device]]
id = "gripper"
description = "Gripper"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "close"
description = "Close the gripper."
params = {}
requires = "!devices.slide.fault && !devices.slide.moving"
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.02
idempotent = true
"#;

pub fn slide(faults: &str) -> String {
    slide_q(faults, 10.0)
}

pub fn slide_q(faults: &str, queue_timeout_s: f64) -> String {
    let f = if faults.is_empty() {
        String::new()
    } else {
        format!(", faults = [{faults}]")
    };
    SLIDE
        .replace(" FAULTS", &f)
        .replace("QUEUE", &format!("{queue_timeout_s:?}"))
}
