//! The engine issue's scenario list, part one — the fault matrix (brownout, swapped contacts,
//! stall, power off, zombie, NAK, reboot, CRC errors, latency, dropped answers, a frozen
//! heartbeat) and the fault-free relay — through the engine API against simulated devices, in
//! real time with a real SQLite journal.

mod common;

use closedloop_engine::Status;
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
    // The reading that showed the fault, before the stop it caused.
    assert_causal(&r, |e| reads(e, "fault", json!(true)));
    let before_stop = r.timeline.iter().take_while(|e| e.event != "cancel_sent");
    let last_read = before_stop.filter(|e| e.event == "signal").last().unwrap();
    assert_eq!(
        last_read.data["values"]["fault"],
        json!(true),
        "{:?}",
        events(&r)
    );
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
async fn status_past_expect_s_counts_the_deadline_not_less_than_a_tenth_left() {
    // A browned-out relay never closes: the command runs past its expect_s (0.02 s) towards a
    // deadline 3 s away. Its status says how long the deadline still gives it.
    let plant = relay(r#"{ kind = "brownout" }"#).replace(
        "expect_s = 0.02",
        "expect_s = 0.02\ntimeout_floor_ms = 3000",
    );
    let rig = rig(&plant).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.3).await;
    assert_eq!(r.status, Status::Running, "{r:#?}");
    let s = rig
        .engine
        .status(&r.command_id, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(s.estimated_remaining_seconds, Some(0.0), "{s:#?}");
    let left = s
        .deadline_in_s
        .expect("a dispatched command has a deadline");
    assert!((2.0..3.1).contains(&left), "{left}");
    let text = s.summary();
    assert!(
        text.contains(&format!(
            "(expected done by now; its deadline is in {left:.1} s)"
        )),
        "{text}"
    );
    assert!(!text.contains("less than 0.1 s"), "{text}");
    let end = rig
        .engine
        .status(&r.command_id, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        (end.status, code(&end).as_str()),
        (Status::Failed, "FEEDBACK_MISMATCH")
    );
    assert_eq!(rig.sim("lamp").peek().contact, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_device_s_state_says_why_as_its_refusal_does() {
    let rig = rig(&relay("")).await;
    rig.online("lamp").await;
    rig.sim("lamp").inject(FaultSpec {
        fault: Fault::PowerOff,
        after_ms: None,
    });
    let mut state = rig.engine.device_state("lamp").unwrap();
    for _ in 0..100 {
        if state.liveness == closedloop_engine::Liveness::Offline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        state = rig.engine.device_state("lamp").unwrap();
    }
    assert_eq!(state.liveness, closedloop_engine::Liveness::Offline);
    let detail = state.detail.expect("an offline device says why");
    assert!(
        detail.starts_with("lamp gave no valid answer for more than"),
        "{detail}"
    );
    let r = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(code(&r).as_str(), "DEVICE_OFFLINE");
    let refused = r.detail.unwrap();
    assert!(
        refused.starts_with(&detail[..detail.find(" s").unwrap()]),
        "{refused} / {detail}"
    );
}
