//! One endpoint, any gateway (`CLOSEDLOOP_PG_URL`): two `closedloop serve` processes on one
//! PostgreSQL journal over the Modbus workshop `closedloop sim` serves. A call to the gateway
//! that does not drive the device is accepted there and taken over by the owner, whose
//! admission checks still hold (a refusal ends the command `failed` with the code, nothing
//! written); and a command queued behind a move moves with the device when its owner is killed.
//! Ground truth is read from the simulator's registers with Modbus requests written here.

mod common;

use common::gateways::{
    call, entry, gateway, modbus_read, owned_by, settled_owner, signal, slide_beyond, slide_mm,
    start_sim, wait_for,
};
use common::pg::{Database, scalar};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_call_the_owner_refuses_ends_failed_with_its_code_and_nothing_written() {
    let Some(db) = Database::create("handed_refused").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let gripper_owner = settled_owner(&a_at, &b_at, "gripper").await;
    let other_at = if gripper_owner == "a" { &b_at } else { &a_at };
    // The slide moves (0 → 250 mm, about 2.5 s): the gripper's `requires` does not hold.
    let moving = call(&a_at, "slide_move_to", r#"{"target_mm":250,"wait_s":0}"#).await;
    assert_eq!(moving["status"], "accepted", "{moving}");
    slide_beyond(&modbus, 20.0).await;
    let r = call(other_at, "gripper_close", r#"{"wait_s":5}"#).await;
    assert_eq!(
        (r["status"].as_str(), r["error_code"].as_str()),
        (Some("failed"), Some("INTERLOCK")),
        "{r}"
    );
    assert_eq!(entry(&r, "accepted")["handed_to"], gripper_owner.as_str());
    assert_eq!(entry(&r, "claimed")["by"], gripper_owner.as_str(), "{r}");
    assert!(entry(&r, "dispatched").is_null(), "{r}");
    let detail = r["detail"].as_str().unwrap();
    assert!(detail.contains("devices.slide.moving"), "{r}");
    assert_eq!(
        modbus_read(&modbus, 3, 2, 0, 1).await[0] & 1,
        0,
        "the gripper closed while the slide moved"
    );
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_queued_behind_a_move_moves_with_the_device_when_its_owner_is_killed() {
    let Some(db) = Database::create("queued_moves").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let slide_owner = settled_owner(&a_at, &b_at, "slide").await;
    let (doomed, doomed_at, survivor, survivor_at) = if slide_owner == "a" {
        (&mut a, &a_at, "b", &b_at)
    } else {
        (&mut b, &b_at, "a", &a_at)
    };
    let first = call(
        doomed_at,
        "slide_move_to",
        r#"{"target_mm":250,"wait_s":0}"#,
    )
    .await;
    // Queued at the owner behind the first move (accepted there, never handed): only the
    // survivor's take-over of the device can move it.
    let second = call(
        doomed_at,
        "slide_move_to",
        r#"{"target_mm":100,"wait_s":0}"#,
    )
    .await;
    assert_eq!(second["status"], "accepted", "{second}");
    slide_beyond(&modbus, 20.0).await;
    signal(doomed, "-KILL");
    let _ = doomed.wait();
    owned_by(survivor_at, "slide", Some(survivor)).await;
    let first_id = first["command_id"].as_str().unwrap();
    let end = call(survivor_at, "get_command_status", &wait_for(first_id)).await;
    assert_eq!(end["status"], "completed", "{end}");
    let second_id = second["command_id"].as_str().unwrap();
    let mut end = call(survivor_at, "get_command_status", &wait_for(second_id)).await;
    if end["status"] == "accepted" || end["status"] == "running" {
        end = call(survivor_at, "get_command_status", &wait_for(second_id)).await;
    }
    assert_eq!(end["status"], "completed", "{end}");
    let claims: Vec<_> = end["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "claimed")
        .map(|e| e["by"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(claims, [survivor], "{end}");
    assert!(entry(&end, "accepted")["handed_to"].is_null(), "{end}");
    let at = slide_mm(&modbus).await;
    assert!((at - 100.0).abs() < 0.5, "the slide is at {at} mm, not 100");
    // The journal is consistent: nothing left accepted or running.
    let open = "SELECT count(*) FROM commands WHERE status IN ('accepted', 'running')";
    assert_eq!(scalar(&db.url, open).await, 0);
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    db.drop().await;
}
