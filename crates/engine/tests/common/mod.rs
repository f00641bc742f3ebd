//! A rig for engine tests: a plant from TOML, a journal in a temporary folder, simulated devices.

#![allow(dead_code)]

use closedloop_engine::{CommandResult, Engine, Submission};
use closedloop_journal::Journal;
use closedloop_sim::SimDevice;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[path = "../../../../tests/plants/mod.rs"]
pub mod plants;

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
    let drivers = closedloop_connect::build_drivers(&plant).unwrap();
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal, links)
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

/// The journal's causal order: the first timeline entry `decided` picks (the reading on which a
/// failure held, the alarm) stands before the stop it triggered (`cancel_sent`) and before the
/// terminal status.
pub fn assert_causal(
    r: &CommandResult,
    decided: impl Fn(&closedloop_engine::TimelineEntry) -> bool,
) {
    let place =
        |f: &dyn Fn(&closedloop_engine::TimelineEntry) -> bool| r.timeline.iter().position(f);
    let cause = place(&decided).unwrap_or_else(|| panic!("no deciding entry in {:?}", events(r)));
    let stop = place(&|e| e.event == "cancel_sent");
    let end = place(&|e| e.event == r.status.as_str());
    assert!(
        stop.is_none_or(|s| cause < s) && end.is_some_and(|e| cause < e),
        "the cause at {cause} is not before the stop ({stop:?}) and the verdict ({end:?}): {:?}",
        events(r)
    );
}

/// A `signal` entry whose values have `name` = `value`.
pub fn reads(e: &closedloop_engine::TimelineEntry, name: &str, value: Value) -> bool {
    e.event == "signal" && e.data.get("values").and_then(|v| v.get(name)) == Some(&value)
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

/// The shared lamp (`tests/plants/lamp.toml`) with a `faults = [...]` list (or none), liveness
/// after 0.5 s of silence and its coil readable as `commanded`.
pub fn relay(faults: &str) -> String {
    let lamp = plants::replace_lines(
        plants::LAMP,
        &[
            (RELAY_DRIVER, &plants::with_faults(RELAY_DRIVER, faults)),
            ("poll_ms = 20", LIVENESS),
            (
                CONTACT,
                &format!("commanded = {{ coil = 0 }}\n{CONTACT_ALIGNED}"),
            ),
        ],
    );
    format!("\n{lamp}")
}

pub fn slide(faults: &str) -> String {
    slide_q(faults, 10.0)
}

/// The shared slide (`tests/plants/slide.toml`) with a `faults = [...]` list (or none), liveness
/// after 0.5 s of silence, a queue timeout and no idempotency; then the shared gripper.
pub fn slide_q(faults: &str, queue_timeout_s: f64) -> String {
    let slide = plants::replace_lines(
        plants::SLIDE,
        &[
            (STEPPER_DRIVER, &plants::with_faults(STEPPER_DRIVER, faults)),
            ("poll_ms = 20", LIVENESS),
            (
                r#"stopped_when = "!moving""#,
                &format!(
                    "stopped_when = \"!moving\"\nqueue_timeout_s = {queue_timeout_s:?}\nidempotent = false"
                ),
            ),
        ],
    );
    format!("\n{slide}\n{}", plants::GRIPPER)
}

/// The shared lamp's driver line.
const RELAY_DRIVER: &str = r#"driver = { kind = "sim", model = "relay" }"#;
/// The shared lamp's contact line, and as these tests align it below `commanded`.
const CONTACT: &str = "contact = { discrete_input = 0 }";
const CONTACT_ALIGNED: &str = "contact   = { discrete_input = 0 }";
/// The shared slide's driver line.
const STEPPER_DRIVER: &str =
    r#"driver = { kind = "sim", model = "stepper", speed_mm_s = 100.0, travel_mm = [0.0, 300.0] }"#;
/// `poll_ms` and the liveness these tests add after it: offline after 0.5 s of silence.
const LIVENESS: &str = "poll_ms = 20\nliveness = { max_silence_s = 0.5 }";
