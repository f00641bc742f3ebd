//! Two gateways on one PostgreSQL journal (`CLOSEDLOOP_PG_URL`), driving the Modbus workshop that
//! `closedloop sim` serves as its own process: each device has one owner; a call to the other
//! gateway is accepted there and run by the owner; the owner's `kill -9` hands its devices to
//! the survivor within the lease; an owner paused past its lease (SIGSTOP) writes nothing once
//! resumed (the call it took meanwhile is refused, or run by the survivor; the simulator's write
//! log shows every write since the pause from the survivor); and a keyed call is one command
//! whichever gateway it is sent to. Ground truth is read from the simulator's registers with
//! Modbus requests written here, and from its write log.

mod common;

use common::gateways::{
    acked_in_journal, call, call_once_settled, entry, gateway, gateway_through, now_ms, owned_by,
    settled_owner, signal, start_sim, wait_for, writes,
};
use common::pg::Database;
use common::proxy::Proxy;
use common::truth::{modbus_read, slide_beyond, slide_mm};
use serde_json::Value;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_per_device_and_the_survivor_takes_over_after_kill_9() {
    let Some(db) = Database::create("two_gateways").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let lamp_owner = settled_owner(&a_at, &b_at, "lamp").await;
    let (owner_at, other_at, owner_child, survivor, mut other_child) = if lamp_owner == "a" {
        (&a_at, &b_at, &mut a, "b", b)
    } else {
        (&b_at, &a_at, &mut b, "a", a)
    };
    // The gateway that does not own the lamp accepts the call and hands it to the owner, which
    // takes it over under its lease and switches the lamp; the caller waits at the first.
    let done = call(other_at, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(entry(&done, "accepted")["handed_to"], lamp_owner.as_str());
    assert_eq!(entry(&done, "claimed")["by"], lamp_owner.as_str(), "{done}");
    assert_eq!(
        modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1,
        1,
        "the contact did not move"
    );
    let status = format!(
        r#"{{"command_id":"{}"}}"#,
        done["command_id"].as_str().unwrap()
    );
    assert_eq!(call(owner_at, "get_command_status", &status).await, done);

    // The owner dies; after its lease the survivor holds the lamp and switches it.
    signal(owner_child, "-KILL");
    let _ = owner_child.wait();
    owned_by(other_at, "lamp", Some(survivor)).await;
    let done = call_once_settled(other_at, "lamp_switch", r#"{"on":false,"wait_s":5}"#).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1, 0);
    common::gateways::wind_up(db, &mut [&mut other_child]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_paused_past_its_lease_writes_nothing_once_resumed() {
    let Some(db) = Database::create("paused_owner").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    // Each gateway reaches the simulator through a proxy of its own, so the simulator's write
    // log tells whose every write was.
    let (proxy_a, proxy_b) = (Proxy::start(&modbus).await, Proxy::start(&modbus).await);
    let (mut a, a_at) = gateway_through(dir.path(), "a", &modbus, &proxy_a);
    let (mut b, b_at) = gateway_through(dir.path(), "b", &modbus, &proxy_b);
    let slide_owner = settled_owner(&a_at, &b_at, "slide").await;
    let (paused, paused_at, survivor, survivor_at) = if slide_owner == "a" {
        (&mut a, &a_at, "b", &b_at)
    } else {
        (&mut b, &b_at, "a", &a_at)
    };
    let paused_since = now_ms();
    signal(paused, "-STOP");
    owned_by(survivor_at, "slide", Some(survivor)).await;
    let moved = call_once_settled(
        survivor_at,
        "slide_move_to",
        r#"{"target_mm":50,"wait_s":5}"#,
    )
    .await;
    assert_eq!(moved["status"], "completed", "{moved}");
    // A call waits in the paused gateway's socket; resumed, it checks its lease before anything
    // else and finds it gone.
    let paused_at = paused_at.clone();
    let pending = tokio::spawn(async move {
        call(
            &paused_at,
            "slide_move_to",
            r#"{"target_mm":250,"wait_s":5}"#,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    signal(paused, "-CONT");
    // Resumed, it knows no live owner until its next keeper round: it refuses the call, or,
    // if that round came first, hands it to the survivor, which runs it. Either way the
    // resumed gateway wrote nothing.
    let answer = pending.await.unwrap();
    let at = if answer["status"] == "rejected" {
        assert_eq!(answer["error_code"], "DEVICE_BUSY", "{answer}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        50.0
    } else {
        let id = answer["command_id"].as_str().unwrap();
        let end = call(survivor_at, "get_command_status", &wait_for(id)).await;
        assert_eq!(end["status"], "completed", "{end}");
        assert_eq!(entry(&end, "claimed")["by"], survivor, "{end}");
        250.0
    };
    let mm = slide_mm(&modbus).await;
    assert!(
        (mm - at).abs() < 0.5,
        "the slide is at {mm} mm, not {at}: {answer}"
    );
    let survivor_proxy = if survivor == "a" { &proxy_a } else { &proxy_b };
    only_the_survivor_wrote_since(dir.path(), paused_since, survivor_proxy);
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// The simulator's write log shows writes since `since_ms` (at least the survivor's move), and
/// every one of them from the survivor's connections (through `survivor_proxy`).
fn only_the_survivor_wrote_since(dir: &std::path::Path, since_ms: i64, survivor_proxy: &Proxy) {
    let survivor: Vec<String> = survivor_proxy
        .upstream_locals()
        .iter()
        .map(ToString::to_string)
        .collect();
    let since: Vec<Value> = writes(dir)
        .into_iter()
        .filter(|w| w["at_ms"].as_i64().unwrap() >= since_ms)
        .collect();
    assert!(
        since.iter().any(|w| w["device"] == "slide"),
        "the survivor's move is not in the write log: {since:?}"
    );
    for w in &since {
        let peer = w["peer"].as_str().unwrap_or_default();
        assert!(
            survivor.iter().any(|s| s == peer),
            "a write since the pause came from {peer}, not from the survivor ({survivor:?}): {w}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_whose_owner_is_killed_mid_way_completes_under_the_survivor() {
    let Some(db) = Database::create("failover_mid_move").await else {
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
    // 0 → 250 mm at 100 mm/s: about 2.5 s, acknowledged and running when the owner dies.
    let started = call(
        doomed_at,
        "slide_move_to",
        r#"{"target_mm":250,"wait_s":0}"#,
    )
    .await;
    let id = started["command_id"].as_str().unwrap().to_string();
    slide_beyond(&modbus, 20.0).await;
    acked_in_journal(survivor_at, &id).await;
    signal(doomed, "-KILL");
    let _ = doomed.wait();
    owned_by(survivor_at, "slide", Some(survivor)).await;
    // The survivor recovered the command on taking the lease and supervises it to its end.
    let mut end = Value::Null;
    for _ in 0..10 {
        let args = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
        end = call(survivor_at, "get_command_status", &args).await;
        if end["status"] != "running" && end["status"] != "accepted" {
            break;
        }
    }
    assert_eq!(end["status"], "completed", "{end}");
    let events: Vec<&str> = end["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"recovered"), "{events:?}");
    let at = slide_mm(&modbus).await;
    assert!((at - 250.0).abs() < 0.5, "the slide is at {at} mm");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}

/// A keyed call is one command whichever gateway takes it: sent to the non-owner (which hands it
/// on) and again to the owner, the lamp is switched once and both answer with that command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_call_is_one_command_whichever_gateway_takes_it() {
    let Some(db) = Database::create("refused_key").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let (owner_at, other_at) = match settled_owner(&a_at, &b_at, "lamp").await.as_str() {
        "a" => (&a_at, &b_at),
        _ => (&b_at, &a_at),
    };
    let args = r#"{"on":true,"wait_s":5,"idempotency_key":"lamp-on-1"}"#;
    let done = call(other_at, "lamp_switch", args).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1, 1);
    for at in [owner_at, other_at] {
        let replayed = call(at, "lamp_switch", args).await;
        assert_eq!(replayed["command_id"], done["command_id"], "{replayed}");
        assert_eq!(replayed["status"], "completed", "{replayed}");
    }
    let one = "SELECT count(*) FROM commands WHERE idempotency_key = 'lamp-on-1'";
    assert_eq!(common::pg::scalar(&db.url, one).await, 1);
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}
