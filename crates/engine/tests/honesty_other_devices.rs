//! The edges of the honesty rule (docs/architecture.md) where an action's `requires` or
//! `done_when` reads another device, each a regression test named after the false outcome it
//! once allowed, checked against the simulator's physical state.

mod common;

use closedloop_engine::Status;
use closedloop_sim::{Fault, FaultSpec};
use common::*;
use serde_json::json;
use std::time::Duration;

/// A lamp whose switch requires the meter's contact open, and whose `follow` action is
/// confirmed by the meter's contact.
fn meter_and_lamp() -> String {
    let meter = relay("")
        .replace("id = \"lamp\"", "id = \"meter\"")
        .replace("max_silence_s = 0.5", "max_silence_s = 3.0");
    let lamp = relay("")
        .replace(
            "expect_s = 0.02",
            "expect_s = 0.1\nrequires = \"!devices.meter.contact\"",
        )
        .replace("max_silence_s = 0.5", "max_silence_s = 3.0");
    let follow = r#"
[[device.action]]
name = "follow"
description = "Switch the lamp; the meter senses it."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "devices.meter.contact == params.on"
expect_s = 0.05
"#;
    format!("{meter}{lamp}{follow}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requires_on_a_powered_off_device_is_rejected_not_judged_on_its_cache() {
    let rig = rig(&meter_and_lamp()).await;
    rig.online("meter").await;
    rig.online("lamp").await;
    // The meter loses power; for its 3 s liveness window its cache still says "open".
    rig.sim("meter").inject(FaultSpec::now(Fault::PowerOff));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{r:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("meter"),
        "{:?}",
        r.detail
    );
    assert!(!rig.sim("lamp").peek().coils[0], "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_when_on_another_device_never_completes_on_that_device_s_stale_cache() {
    let rig = rig(&meter_and_lamp()).await;
    rig.online("meter").await;
    let on = rig.act("meter", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(on.status, Status::Completed, "{on:#?}");
    rig.online("lamp").await;
    // The meter's cache says "closed" — but it is powered off from now on.
    rig.sim("meter").inject(FaultSpec::now(Fault::PowerOff));
    let r = rig.act("lamp", "follow", json!({"on": true}), 5.0).await;
    let r = rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "no fresh read of the meter came back: {r:#?}"
    );
    assert!(!r.verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_when_on_another_device_completes_on_its_reads_after_the_ack() {
    let rig = rig(&meter_and_lamp()).await;
    rig.online("meter").await;
    rig.online("lamp").await;
    let on = rig.act("meter", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(on.status, Status::Completed, "{on:#?}");
    let r = rig.act("lamp", "follow", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    assert!(r.verified);
    let at = r.evidence["devices.meter.contact"]["at"].as_str().unwrap();
    assert!(
        at >= at_of(&r, "device_ack"),
        "meter read {at} before the ack"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_when_on_another_device_is_judged_on_that_device_s_reads_while_its_own_is_stuck() {
    let rig = rig(&meter_and_lamp()).await;
    rig.online("meter").await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "follow", json!({"on": true}), 0.0).await;
    let mut cur = r.clone();
    for _ in 0..200 {
        if events(&cur).iter().any(|e| e == "device_ack") {
            break;
        }
        cur = rig
            .engine
            .status(&r.command_id, Duration::from_millis(10))
            .await
            .unwrap();
    }
    // From the acknowledgement on, every read of the lamp times out (no sample for seconds):
    // only the meter's reads can decide the command.
    rig.sim("lamp")
        .inject(FaultSpec::now(Fault::LatencyMs { ms: 10_000 }));
    let on = rig.act("meter", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(on.status, Status::Completed, "{on:#?}");
    let r = rig.settle(&r).await;
    assert_eq!((r.status, r.verified), (Status::Completed, true), "{r:#?}");
    assert_eq!(ev_value(&r, "devices.meter.contact"), json!(true));
    assert_eq!(
        rig.sim("meter").peek().contact,
        Some(true),
        "the meter's contact is closed"
    );
}
