//! The engine issue's scenario list, part three — commands that share a device: the per-device
//! queue and its timeout, DEVICE_BUSY, cancel during a move, idempotency keys — through the
//! engine API against simulated devices, in real time with a real SQLite journal.

mod common;

use closedloop_engine::Status;
use common::*;
use serde_json::json;
use std::time::Duration;

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
