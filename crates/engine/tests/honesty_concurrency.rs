//! The edges of the honesty rule (docs/architecture.md) where calls meet on a device —
//! concurrent `queue = false` calls, idempotency replays, raw writes and exclusive groups, a
//! queued command's estimate — each a regression test named after the false outcome it once
//! allowed, checked against the simulator's physical state.

mod common;

use closedloop_engine::{Status, Submission};
use common::*;
use serde_json::json;
use std::time::Duration;

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
    let w = closedloop_contract::Write::Coils {
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
