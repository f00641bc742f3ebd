//! The edges of the honesty rule (docs/architecture.md), each a regression test named after the
//! false outcome it once allowed, checked against the simulator's physical state.

mod common;

use closedloop_engine::{Engine, Status, Submission};
use closedloop_journal::Journal;
use closedloop_sim::{Fault, FaultSpec};
use common::*;
use serde_json::json;
use std::sync::Arc;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readback_fails_with_the_fail_when_code_that_holds_after_the_ack() {
    // A heater fast enough to pass 30 °C within one poll of being enabled.
    let src = r#"
[[device]]
id = "oven"
description = "Oven"
driver = { kind = "sim", model = "heater", rate_c_per_s = 2000.0 }
poll_ms = 20
[device.signals]
setpoint_c = { holding = 0, scale = 0.1, unit = "°C" }
enabled = { coil = 0 }
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
[[device.action]]
name = "heat"
description = "Heat."
params = { to_c = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, value = "params.to_c * 10.0" }, { coil = 0, value = "true" }]
verification = "readback"
fail_when = { OVERHEAT = "temperature_c > 30.0" }
expect_s = 0.05
"#;
    let rig = rig(src).await;
    rig.online("oven").await;
    let r = rig.act("oven", "heat", json!({"to_c": 200.0}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "OVERHEAT"),
        "{r:#?}"
    );
    assert!(!r.verified, "readback never verifies");
    assert!(rig.sim("oven").peek().temperature_c.unwrap() > 30.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expect_s_that_is_not_a_number_is_rejected_before_anything_is_written() {
    let src = slide("").replace(
        r#"expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05""#,
        r#"expect_s = "(params.target_mm - 12.0) / (params.target_mm - 12.0) * 2.0""#,
    );
    let rig = rig(&src).await;
    rig.online("slide").await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 12.0}), 2.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{r:#?}"
    );
    let detail = r.detail.as_deref().unwrap();
    assert!(
        detail.contains("expect_s") && detail.contains("params.target_mm = 12"),
        "{detail}"
    );
    assert_eq!(
        rig.sim("slide").peek().target_mm,
        Some(0.0),
        "nothing written"
    );
    // Any other target is a duration of 2 s, and moves.
    let ok = rig
        .act("slide", "move_to", json!({"target_mm": 20.0}), 0.0)
        .await;
    assert_eq!(ok.status, Status::Accepted, "{ok:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_that_already_holds_is_rejected_interlock_before_writing() {
    let rig = rig(&slide(r#"{ kind = "stall", at_mm = 70.0 }"#)).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 150.0}), 8.0)
        .await;
    assert_eq!(code(&r), "MOTOR_STALL", "{r:#?}");
    // The fault is latched: the next move is refused before anything is written.
    let again = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 2.0)
        .await;
    assert_eq!(
        (again.status, code(&again).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{again:#?}"
    );
    assert!(again.detail.as_deref().unwrap().contains("MOTOR_STALL"));
    assert!(rig.sim("slide").peek().fault.unwrap());
    assert_ne!(
        rig.sim("slide").peek().target_mm,
        Some(10.0),
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_found_offline_at_dispatch_writes_no_stop() {
    let rig = rig(&slide("")).await;
    rig.online("slide").await;
    let first = rig
        .act("slide", "move_to", json!({"target_mm": 100.0}), 0.0)
        .await;
    let queued = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    assert_eq!(queued.status, Status::Accepted);
    rig.sim("slide").inject(FaultSpec::now(Fault::PowerOff));
    let first = rig.settle(&first).await;
    assert_eq!(code(&first), "DEVICE_OFFLINE", "{first:#?}");
    let queued = rig.settle(&queued).await;
    assert_eq!(
        (queued.status, code(&queued).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{queued:#?}"
    );
    let ev = events(&queued);
    for never in ["dispatched", "cancel_sent", "cancel_failed"] {
        assert!(!ev.contains(&never.to_string()), "{never} in {ev:?}");
    }
    assert!(
        queued
            .detail
            .as_deref()
            .unwrap()
            .contains("Nothing was written")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_calls_to_a_non_queueing_action_accept_only_one() {
    let src = slide("").replace("idempotent = false", "idempotent = false\nqueue = false");
    let rig = rig(&src).await;
    rig.online("slide").await;
    for _ in 0..5 {
        let (a, b) = tokio::join!(
            rig.act("slide", "move_to", json!({"target_mm": 50.0}), 0.0),
            rig.act("slide", "move_to", json!({"target_mm": 60.0}), 0.0)
        );
        let mut codes = [code(&a), code(&b)];
        codes.sort();
        assert_eq!(
            codes,
            ["".to_string(), "DEVICE_BUSY".to_string()],
            "{a:#?} {b:#?}"
        );
        let winner = if code(&a).is_empty() { a } else { b };
        rig.settle(&winner).await;
        // The device is free once the finished command let go of it.
        for _ in 0..200 {
            if rig.engine.live_count() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_replayed_after_a_rejection_returns_that_rejection() {
    let rig = rig(&slide(r#"{ kind = "power_off" }"#)).await;
    let keyed = |target: serde_json::Value| Submission {
        device: "slide".into(),
        action: "move_to".into(),
        args: json!({ "target_mm": target }).as_object().cloned().unwrap(),
        idempotency_key: Some("k-150".into()),
        ..Submission::default()
    };
    let first = rig.engine.submit(keyed(json!(150))).await.unwrap();
    assert_eq!(code(&first), "DEVICE_OFFLINE", "{first:#?}");
    // 150 and 150.0 are the same argument once normalised.
    for again in [json!(150), json!(150.0)] {
        let r = rig.engine.submit(keyed(again)).await.unwrap();
        assert_eq!(r.command_id, first.command_id, "{r:#?}");
        assert_eq!(code(&r), "DEVICE_OFFLINE");
    }
    // Other (here invalid) arguments: an INVALID_PARAMS result, never an engine error.
    let other = rig.engine.submit(keyed(json!(1000))).await.unwrap();
    assert_eq!(
        (other.status, code(&other).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{other:#?}"
    );
    assert_ne!(other.command_id, first.command_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_write_respects_every_exclusive_group_its_device_s_actions_use() {
    let src = format!(
        "{}{}",
        relay("")
            .replace(
                "idempotent = true",
                "idempotent = true\nexclusive = \"bench\""
            )
            .replace("expect_s = 0.02", "expect_s = 1.0\nhold_ms = 800"),
        slide("")
            .replace("id = \"gripper\"", "id = \"gripper\"\nraw_access = true")
            .replace(
                "idempotent = true",
                "idempotent = true\nexclusive = \"bench\""
            )
    );
    let rig = rig(&src).await;
    rig.online("lamp").await;
    rig.online("gripper").await;
    // A slow lamp command holds the "bench" group that the gripper's close action uses too.
    let slow = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(slow.status, Status::Accepted);
    for _ in 0..200 {
        let now = rig
            .engine
            .status(&slow.command_id, Duration::ZERO)
            .await
            .unwrap();
        if now.status == Status::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let w = closedloop_driver::Write::Coils {
        start: 0,
        values: vec![true],
    };
    let r = rig
        .engine
        .raw_write("gripper", w, Some("test".into()))
        .await;
    let err = r.expect_err("the bench group is held");
    assert_eq!(err.code.as_str(), "DEVICE_BUSY", "{err:?}");
    assert!(!rig.sim("gripper").peek().coils[0], "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_dispatch_record_the_journal_never_took_is_never_sent() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    // Every answer takes 300 ms: dispatch's fresh read gives time to fail the journal.
    let plant = plant(
        &relay(r#"{ kind = "latency_ms", ms = 300 }"#)
            .replace("max_silence_s = 0.5", "max_silence_s = 3.0"),
    );
    let drivers = closedloop_connect::build_drivers(&plant).unwrap();
    let lamp = drivers.sims["lamp"].clone();
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal.clone(), links)
        .await
        .unwrap();
    let r = engine
        .submit(Submission {
            device: "lamp".into(),
            action: "switch".into(),
            args: json!({"on": true}).as_object().cloned().unwrap(),
            ..Submission::default()
        })
        .await
        .unwrap();
    assert_eq!(r.status, Status::Accepted, "{r:#?}");
    journal.fail_writes(true);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    engine.shutdown().await;
    assert!(
        !lamp.peek().coils[0],
        "a write went out whose `dispatched` the journal never took"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_writes_the_stop_of_a_move_whose_write_was_never_acknowledged() {
    // The journal of a gateway that died between sending a move and hearing its answer.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let id = "01a22e00-0000-7000-8000-000000000001";
    {
        let j = Journal::open(&url).await.unwrap();
        let now = 1_790_000_000_000;
        let row = closedloop_journal::CommandRow {
            command_id: id.into(),
            request_id: "req_before_the_crash".into(),
            device: "slide".into(),
            action: "move_to".into(),
            params: json!({"target_mm": 250.0}),
            status: "accepted".into(),
            verified: false,
            verification: "feedback".into(),
            error_code: None,
            detail: None,
            hint: None,
            evidence: json!({}),
            readback_matched: None,
            accepted_at_ms: now,
            updated_at_ms: now,
            deadline_ms: Some(now + 8_000),
            dispatched: true,
            caller: None,
            idempotency_key: None,
        };
        let ev = |event: &str| closedloop_journal::EventRow {
            at_ms: now,
            event: event.into(),
            data: json!(null),
        };
        j.insert(&row, &[ev("received"), ev("accepted"), ev("dispatched")])
            .await
            .unwrap();
        j.close().await;
    }
    let rig = rig_in(&slide(""), dir).await;
    let r = rig.engine.status(id, Duration::from_secs(3)).await.unwrap();
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "INTERRUPTED"),
        "{r:#?}"
    );
    assert!(
        events(&r).contains(&"cancel_sent".to_string()),
        "{:?}",
        events(&r)
    );
    assert!(
        r.detail.as_deref().unwrap().contains("stop) was written"),
        "{:?}",
        r.detail
    );
    assert!(!rig.sim("slide").peek().moving.unwrap());
}

/// A Modbus TCP gateway whose unit behind it is gone: every request is answered with
/// exception 0x0B (Gateway Target Device Failed to Respond). Returns its address.
async fn gateway_without_its_unit() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut header = [0u8; 7];
                while sock.read_exact(&mut header).await.is_ok() {
                    let len = usize::from(u16::from_be_bytes([header[4], header[5]]));
                    let mut pdu = vec![0u8; len.saturating_sub(1)];
                    if sock.read_exact(&mut pdu).await.is_err() || pdu.is_empty() {
                        return;
                    }
                    let answer = [
                        header[0],
                        header[1],
                        0,
                        0,
                        0,
                        3,
                        header[6],
                        pdu[0] | 0x80,
                        0x0B,
                    ];
                    if sock.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_exceptions_0x0b_are_no_sign_of_the_unit_s_life() {
    let addr = gateway_without_its_unit().await;
    let src = relay("").replace(
        r#"driver = { kind = "sim", model = "relay" }"#,
        &format!(r#"driver = {{ kind = "modbus-tcp", address = "{addr}", unit = 3 }}"#),
    );
    let rig = rig(&src).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    let state = rig.engine.device_state("lamp").unwrap();
    assert_eq!(
        state.liveness,
        closedloop_engine::Liveness::Offline,
        "{state:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("exception 11"),
        "{:?}",
        r.detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_command_s_estimate_includes_the_wait_behind_the_commands_ahead() {
    let rig = rig(&slide("")).await;
    rig.online("slide").await;
    // 200 mm at 100 mm/s: about 2 s of travel ahead.
    let first = rig
        .act("slide", "move_to", json!({"target_mm": 200.0}), 0.0)
        .await;
    let queued = rig
        .act("slide", "move_to", json!({"target_mm": 190.0}), 0.0)
        .await;
    assert_eq!(queued.status, Status::Accepted);
    let ahead = first.estimated_remaining_seconds.unwrap();
    let mine = queued.estimated_remaining_seconds.unwrap();
    assert!(ahead > 1.5, "{first:#?}");
    assert!(
        mine >= ahead,
        "queued {mine} s must include the {ahead} s ahead of it"
    );
    rig.settle(&queued).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_call_with_huge_arguments_journals_a_bounded_digest() {
    let rig = rig(&relay("")).await;
    let garbage = "x".repeat(400_000);
    let r = rig
        .act("lamp", "switch", json!({"on": garbage.clone()}), 0.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{:?}",
        r.detail
    );
    let stored = serde_json::to_string(&r.params).unwrap();
    assert!(stored.len() < 3_000, "{} bytes journaled", stored.len());
    // {"on":"…"} around the string: 9 more bytes.
    assert_eq!(r.params["bytes"], json!(garbage.len() + 9), "{stored:.200}");
    assert!(r.detail.as_deref().unwrap().len() <= 1_100);
}
