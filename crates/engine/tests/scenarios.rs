//! The engine issue's scenario list, through the engine API against simulated devices, in real
//! time with a real SQLite journal.

mod common;

use closedloop_engine::{EngineError, Status};
use closedloop_sim::{Fault, FaultSpec};
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_relay_completes_verified_with_evidence_read_after_the_ack() {
    let rig = rig(&relay("")).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    assert!(r.verified);
    assert_eq!(r.verification, "feedback");
    assert_eq!(ev_value(&r, "contact"), json!(true));
    assert!(r.error_code.is_none() && r.detail.is_none() && r.hint.is_none());
    assert_eq!(r.estimated_remaining_seconds, None);
    let evidence_at = r.evidence["contact"]["at"].as_str().unwrap();
    assert!(
        evidence_at >= at_of(&r, "device_ack"),
        "evidence {evidence_at} older than the ack"
    );
    let ev = events(&r);
    for e in [
        "received",
        "accepted",
        "dispatched",
        "device_ack",
        "signal",
        "completed",
    ] {
        assert!(ev.contains(&e.to_string()), "{e} missing from {ev:?}");
    }
    assert!(rig.sim("lamp").peek().contact == Some(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brownout_never_completes_and_fails_feedback_mismatch_at_its_own_short_deadline() {
    let rig = rig(&relay(r#"{ kind = "brownout" }"#)).await;
    rig.online("lamp").await;
    let asked = std::time::Instant::now();
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    // Its deadline is 0.18 s: the answer comes long before the caller's 5 s wait runs out.
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "FEEDBACK_MISMATCH"),
        "{r:#?}"
    );
    assert!(!r.verified);
    assert!(r.hint.as_deref().unwrap().contains("wiring"));
    // deadline = 0.02 × 3 + 0.1 + 0.02 = 0.18 s: it fails fast, it does not hang.
    let dispatched = at_of(&r, "dispatched").to_string();
    let failed = at_of(&r, "failed").to_string();
    assert!(failed > dispatched);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_contacts_never_complete_and_time_out() {
    let rig = rig(&relay(r#"{ kind = "swapped_contacts" }"#)).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_ne!(r.status, Status::Completed);
    // The contact moved (from an inverted "closed" to "open") but never matched: TIMEOUT.
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Timeout, "TIMEOUT"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_fails_motor_stall_near_the_stall_point_writes_the_stop_and_interlocks_the_gripper() {
    let rig = rig(&slide(r#"{ kind = "stall", at_mm = 70.0 }"#)).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 150.0}), 8.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "MOTOR_STALL"),
        "{r:#?}"
    );
    assert!(r.verified, "a fail_when decided by feedback is verified");
    let pos = ev_value(&r, "position_mm").as_f64().unwrap();
    assert!((pos - 70.0).abs() <= 0.5, "evidence position {pos}");
    assert_eq!(ev_value(&r, "fault"), json!(true));
    assert!(
        events(&r).contains(&"cancel_sent".to_string()),
        "{:?}",
        events(&r)
    );
    assert!(r.detail.as_deref().unwrap().contains("fault"));
    assert!(!rig.sim("slide").peek().moving.unwrap());

    let g = rig.act("gripper", "close", json!({}), 2.0).await;
    assert_eq!(
        (g.status, code(&g).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{g:#?}"
    );
    assert!(
        g.detail.as_deref().unwrap().contains("slide.fault"),
        "{:?}",
        g.detail
    );
    assert!(!rig.sim("gripper").peek().coils[0], "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_is_rejected_device_offline() {
    let rig = rig(&relay(r#"{ kind = "power_off" }"#)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    assert!(r.accepted_at.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_mid_move_fails_and_is_never_left_running() {
    let rig = rig(&slide(r#"{ kind = "power_off", after_ms = 300 }"#)).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 250.0}), 0.0)
        .await;
    assert_eq!(r.status, Status::Accepted);
    let r = rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_is_device_offline() {
    let rig = rig(&relay(r#"{ kind = "zombie" }"#)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nak_is_bus_nak_with_the_exception_named() {
    let rig = rig(&relay(r#"{ kind = "nak" }"#)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    // Its reads are refused too: the contact cannot be read, so nothing is written that could
    // never be confirmed.
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "BUS_NAK"),
        "{r:#?}"
    );
    assert!(!rig.sim("lamp").peek().coils[0]);
    assert!(
        r.detail
            .as_deref()
            .unwrap()
            .contains("Server Device Failure")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_mid_command_never_completes() {
    let rig = rig(&slide(
        r#"{ kind = "reboot", down_ms = 200, after_ms = 300 }"#,
    ))
    .await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 200.0}), 0.0)
        .await;
    let r = rig.settle(&r).await;
    // Silent for 0.2 s: a read issued then is dropped and waits out its 500 ms timeout, which
    // outlasts the 0.5 s liveness window — the device is offline mid-move, never completed.
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    let pos = rig.sim("slide").peek().position_mm.unwrap();
    assert!(pos < 199.0, "the reboot dropped the move: {pos}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crc_error_is_crc_mismatch() {
    // Garbled from the start: answers arrive but never verify.
    let rig = rig(&relay(r#"{ kind = "crc_error" }"#)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "CRC_MISMATCH"),
        "{r:#?}"
    );

    // Garbled mid-life: the write's answer fails its checksum.
    let rig = common::rig(&relay("")).await;
    rig.online("lamp").await;
    rig.sim("lamp").inject(FaultSpec {
        fault: Fault::CrcError,
        after_ms: None,
    });
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "CRC_MISMATCH"),
        "{r:#?}"
    );
    assert!(r.hint.as_deref().unwrap().contains("may have taken effect"));
    assert!(
        events(&r).contains(&"retry".to_string()),
        "an idempotent write is retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_longer_than_the_deadline_never_completes() {
    let src = relay(r#"{ kind = "latency_ms", ms = 400 }"#)
        .replace("max_silence_s = 0.5", "max_silence_s = 2.0");
    let rig = rig(&src).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    // The first answer comes after 400 ms (the submit waits for it), the write's ack after 400
    // more; the deadline (0.18 s after dispatch) passes before any fresh read can come back, so
    // nothing shows the feedback unmoved: DEVICE_OFFLINE, not FEEDBACK_MISMATCH.
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("No read"),
        "{:?}",
        r.detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_rate_never_yields_a_false_completion() {
    let rig = rig(&relay(r#"{ kind = "drop_rate", p = 1.0 }"#)).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE")
    );

    let rig2 = common::rig(&relay(r#"{ kind = "drop_rate", p = 0.3 }"#)).await;
    let rig = rig2;
    for on in [true, false, true, false] {
        let r = rig.act("lamp", "switch", json!({"on": on}), 5.0).await;
        let r = rig.settle(&r).await;
        if r.status == Status::Completed {
            assert_eq!(ev_value(&r, "contact"), json!(on), "{r:#?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_not_yet_polled_is_waited_for_instead_of_failing() {
    let src =
        relay(r#"{ kind = "latency_ms", ms = 150 }"#).replace("expect_s = 0.02", "expect_s = 0.5");
    let rig = rig(&src).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_none_is_sent_unverified_with_a_hint() {
    let src = r#"
[[device]]
id = "buzzer"
description = "Buzzer"
driver = { kind = "sim", model = "relay", feedback = false }
poll_ms = 20
[device.signals]
commanded = { coil = 0 }
[[device.action]]
name = "switch"
description = "Sound the buzzer."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
expect_s = 0.02
verification = "none"
"#;
    let rig = rig(src).await;
    let r = rig.act("buzzer", "switch", json!({"on": true}), 5.0).await;
    assert_eq!((r.status, r.verified), (Status::Sent, false), "{r:#?}");
    assert!(
        r.hint
            .as_deref()
            .unwrap()
            .contains("could not be confirmed")
    );
    assert!(r.error_code.is_none());
}

const OVEN: &str = r#"
[[device]]
id = "oven"
description = "Oven"
driver = { kind = "sim", model = "heater", rate_c_per_s = 10.0, ambient_c = 25.0 }
poll_ms = 50
[device.signals]
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
setpoint_c    = { holding = 0, scale = 0.1 }
[[device.action]]
name = "set_temperature"
description = "Heat."
params = { setpoint_c = { type = "number", min = 25.0, max = 6000.0 } }
write = [{ holding = 0, scale = 0.1, value = "params.setpoint_c" }, { coil = 0, value = "true" }]
done_when = "abs(temperature_c - params.setpoint_c) <= 0.5"
expect_s = "max(params.setpoint_c - temperature_c, 0.0) / 10.0 + 0.2"
idempotent = true
[[device.action]]
name = "store_setpoint"
description = "Store a setpoint without heating."
params = { setpoint_c = { type = "number", min = 0.0, max = 100.0 } }
write = [{ holding = 0, scale = 0.1, value = "params.setpoint_c" }]
expect_s = 0.05
idempotent = true
verification = "readback"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heater_that_takes_seconds_completes_without_a_false_timeout() {
    let rig = rig(OVEN).await;
    let r = rig
        .act("oven", "set_temperature", json!({"setpoint_c": 45.0}), 0.5)
        .await;
    assert_eq!(
        r.status,
        Status::Running,
        "still heating after 0.5 s: {r:#?}"
    );
    assert!(r.estimated_remaining_seconds.unwrap() > 0.5);
    let r = rig.settle(&r).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    assert!((ev_value(&r, "temperature_c").as_f64().unwrap() - 45.0).abs() <= 0.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readback_completion_is_unverified_with_readback_matched() {
    let rig = rig(OVEN).await;
    let r = rig
        .act("oven", "store_setpoint", json!({"setpoint_c": 60.0}), 5.0)
        .await;
    assert_eq!(
        (r.status, r.verified, r.readback_matched),
        (Status::Completed, false, Some(true)),
        "{r:#?}"
    );
    assert!(r.hint.as_deref().unwrap().contains("not sensed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_and_unrepresentable_params_are_rejected_with_nothing_written() {
    let rig = rig(&format!("{}{}", slide(""), OVEN)).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 400.0}), 0.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{r:#?}"
    );
    assert!(r.detail.as_deref().unwrap().contains("target_mm"));
    let r = rig
        .act("slide", "move_to", json!({"target_mm": "far"}), 0.0)
        .await;
    assert_eq!(code(&r), "INVALID_PARAMS");
    let r = rig.act("slide", "move_to", json!({}), 0.0).await;
    assert_eq!(code(&r), "INVALID_PARAMS");
    // 6000 °C × 10 = 60000 fits u16; 6553.6 × 10 would not — but min/max stop it first, so use
    // a value inside the declared range that the u16 register cannot hold.
    rig.online("oven").await;
    let r = rig
        .act(
            "oven",
            "set_temperature",
            json!({"setpoint_c": 5999.0}),
            0.0,
        )
        .await;
    assert_ne!(code(&r), "INVALID_PARAMS", "59990 fits a u16");
    let _ = rig
        .engine
        .cancel(&r.command_id, Duration::from_secs(5))
        .await;
    assert_eq!(rig.sim("slide").peek().target_mm, Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrepresentable_value_is_refused_before_anything_is_written() {
    let src = OVEN.replace("max = 6000.0", "max = 9000.0");
    let rig = rig(&src).await;
    rig.online("oven").await;
    let before = rig.sim("oven").peek().setpoint_c;
    let r = rig
        .act(
            "oven",
            "set_temperature",
            json!({"setpoint_c": 7000.0}),
            0.0,
        )
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "INVALID_PARAMS"),
        "{r:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("u16"),
        "{:?}",
        r.detail
    );
    assert_eq!(rig.sim("oven").peek().setpoint_c, before, "nothing written");
    assert!(!rig.sim("oven").peek().coils[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_commands_to_one_device_run_one_after_the_other_and_two_devices_in_parallel() {
    let rig = rig(&format!("{}{}", slide(""), relay(""))).await;
    rig.online("slide").await;
    rig.online("lamp").await;
    let a = rig
        .act("slide", "move_to", json!({"target_mm": 30.0}), 0.0)
        .await;
    let b = rig
        .act("slide", "move_to", json!({"target_mm": 60.0}), 0.0)
        .await;
    let l = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    let (a, b, l) = (
        rig.settle(&a).await,
        rig.settle(&b).await,
        rig.settle(&l).await,
    );
    assert_eq!(
        (a.status, b.status, l.status),
        (Status::Completed, Status::Completed, Status::Completed)
    );
    assert!(
        at_of(&b, "dispatched") >= at_of(&a, "completed"),
        "b ran only after a finished"
    );
    assert!(
        at_of(&l, "completed") < at_of(&a, "completed"),
        "the lamp did not wait for the slide"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_wait_that_runs_out_ends_the_command_not_the_device() {
    let rig = rig(&slide_q("", 0.2)).await;
    rig.online("slide").await;
    let a = rig
        .act("slide", "move_to", json!({"target_mm": 80.0}), 0.0)
        .await;
    let b = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    let b = rig.settle(&b).await;
    assert_eq!(
        (b.status, code(&b).as_str()),
        (Status::Timeout, "TIMEOUT"),
        "{b:#?}"
    );
    assert!(b.detail.as_deref().unwrap().contains("nothing was written"));
    assert!(!events(&b).contains(&"dispatched".to_string()));
    let a = rig.settle(&a).await;
    assert_eq!(a.status, Status::Completed);
    let c = rig
        .act("slide", "move_to", json!({"target_mm": 70.0}), 5.0)
        .await;
    assert_eq!(c.status, Status::Completed, "the device still works");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_device_rejects_an_action_that_does_not_queue() {
    let src = slide("").replace("idempotent = false", "idempotent = false\nqueue = false");
    let rig = rig(&src).await;
    rig.online("slide").await;
    let a = rig
        .act("slide", "move_to", json!({"target_mm": 100.0}), 0.0)
        .await;
    let b = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    assert_eq!(
        (b.status, code(&b).as_str()),
        (Status::Rejected, "DEVICE_BUSY"),
        "{b:#?}"
    );
    rig.settle(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_move_writes_the_stop_and_the_axis_stops() {
    let rig = rig(&slide("")).await;
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 250.0}), 0.0)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = rig
        .engine
        .cancel(&r.command_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (c.status, code(&c).as_str()),
        (Status::Cancelled, "CANCELLED"),
        "{c:#?}"
    );
    assert!(events(&c).contains(&"cancel_sent".to_string()));
    // The answer comes once the axis reads stopped, and says where: no sleep needed.
    let p = rig.sim("slide").peek();
    assert!(
        !p.moving.unwrap(),
        "cancel returned while the axis still moved"
    );
    let pos = p.position_mm.unwrap();
    assert!(pos > 5.0 && pos < 200.0, "stopped part-way: {pos}");
    assert_eq!(ev_value(&c, "moving"), json!(false), "{c:#?}");
    let at = ev_value(&c, "position_mm").as_f64().unwrap();
    assert!((at - pos).abs() < 0.5, "evidence {at} vs the axis at {pos}");
    assert!(
        c.detail.as_deref().unwrap().contains("reads stopped"),
        "{:?}",
        c.detail
    );
    // Terminal states never change: a second cancel returns the same outcome.
    let again = rig
        .engine
        .cancel(&r.command_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(again.status, Status::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_returns_the_same_command_and_refuses_other_arguments() {
    let rig = rig(&relay("")).await;
    let sub = |on: bool| closedloop_engine::Submission {
        device: "lamp".into(),
        action: "switch".into(),
        args: json!({"on": on}).as_object().cloned().unwrap(),
        idempotency_key: Some("k-1".into()),
        wait: Duration::from_secs(3),
        ..Default::default()
    };
    let a = rig.engine.submit(sub(true)).await.unwrap();
    let b = rig.engine.submit(sub(true)).await.unwrap();
    assert_eq!(a.command_id, b.command_id);
    let c = rig.engine.submit(sub(false)).await.unwrap();
    assert_eq!(
        (c.status, code(&c).as_str()),
        (Status::Rejected, "INVALID_PARAMS")
    );
    let list = rig.engine.list(Some("lamp"), None, 10).await.unwrap();
    assert_eq!(
        list.iter()
            .filter(|r| r.status == Status::Completed)
            .count(),
        1,
        "ran once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_command_and_unknown_action_are_errors_not_results() {
    let rig = rig(&relay("")).await;
    let e = rig
        .engine
        .status("0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77", Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(e, EngineError::UnknownCommand(_)));
    let e = rig
        .engine
        .submit(closedloop_engine::Submission {
            device: "lamp".into(),
            action: "dance".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, EngineError::UnknownAction(..)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_state_shows_values_units_ages_and_sources() {
    let rig = rig(OVEN).await;
    rig.online("oven").await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    let s = rig.engine.device_state("oven").unwrap();
    let t = &s.signals["temperature_c"];
    assert_eq!(t.value, json!(25.0));
    assert_eq!(t.unit.as_deref(), Some("°C"));
    assert_eq!(t.source, "input:0");
    assert!(t.age_ms >= 0);
    assert!(s.last_seen.is_some());
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["liveness"], json!("online"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_object_serialises_as_the_contract_shows() {
    let rig = rig(&relay("")).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "command_id",
        "request_id",
        "device",
        "action",
        "params",
        "status",
        "verified",
        "verification",
        "evidence",
        "estimated_remaining_seconds",
        "accepted_at",
        "updated_at",
        "timeline",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v:#}");
    }
    assert!(v.get("error_code").is_none() && v.get("detail").is_none());
    assert!(v["request_id"].as_str().unwrap().starts_with("req_"));
    let at = v["accepted_at"].as_str().unwrap();
    assert_eq!(at.len(), "2026-11-29T16:00:00.123Z".len());
    assert!(at.ends_with('Z'));
    assert_eq!(
        v["evidence"]["contact"]["source"],
        json!("discrete_input:0")
    );
    assert_eq!(v["params"], json!({"on": true}));
    let pending = rig.act("lamp", "switch", json!({"on": false}), 0.0).await;
    if !pending.status.is_terminal() {
        assert!(pending.estimated_remaining_seconds.is_some());
        assert!(pending.summary().contains("get_command_status"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_heartbeat_register_makes_a_device_offline_while_reads_still_succeed() {
    // The stepper's position register stands still while it is idle: as a heartbeat it is frozen.
    let src = slide("").replace(
        "liveness = { max_silence_s = 0.5 }",
        "liveness = { max_silence_s = 0.5, counter = { holding = 2 } }",
    );
    let rig = rig(&src).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    let state = rig.engine.device_state("slide").unwrap();
    assert_eq!(
        state.liveness,
        closedloop_engine::Liveness::Offline,
        "{state:?}"
    );
    assert!(
        state.signals.contains_key("position_mm"),
        "reads still succeed: {state:?}"
    );
    let r = rig
        .act("slide", "move_to", json!({"target_mm": 10.0}), 0.0)
        .await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    assert!(
        r.detail.as_deref().unwrap().contains("frozen"),
        "{:?}",
        r.detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_with_one_idempotency_key_create_one_command() {
    // The first answer takes 150 ms: both submissions wait for it between lookup and insert.
    let src =
        relay(r#"{ kind = "latency_ms", ms = 150 }"#).replace("expect_s = 0.02", "expect_s = 0.5");
    let rig = rig(&src).await;
    let sub = || closedloop_engine::Submission {
        device: "lamp".into(),
        action: "switch".into(),
        args: json!({"on": true}).as_object().cloned().unwrap(),
        idempotency_key: Some("same-key".into()),
        ..Default::default()
    };
    let (a, b) = tokio::join!(rig.engine.submit(sub()), rig.engine.submit(sub()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.command_id, b.command_id, "one command for one key");
    let all = rig.engine.list(Some("lamp"), None, 10).await.unwrap();
    assert_eq!(all.len(), 1, "{all:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expected_duration_that_is_no_number_fails_the_command_before_anything_is_written() {
    let src = relay("").replace(
        "expect_s = 0.02",
        "expect_s = \"0.02 / (commanded == params.on ? 0.0 : 1.0)\"",
    );
    let rig = rig(&src).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": false}), 5.0).await;
    let r = rig.settle(&r).await;
    assert_eq!(code(&r), "INVALID_PARAMS", "{r:#?}");
    assert!(r.detail.as_deref().unwrap().contains("expect_s"), "{r:#?}");
    assert!(!rig.sim("lamp").peek().coils[0], "nothing was written");
}
