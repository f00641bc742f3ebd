//! A gateway's lease moving under it (`CLOSEDLOOP_PG_URL`), made to happen at the worst moment
//! by changing the `leases` table behind its back, as another gateway's claim would: a command
//! accepted just as the lease went is refused `DEVICE_BUSY` and leaves nothing in the journal
//! that nobody supervises; a command started under a lease the gateway then lost and took back
//! is not written on under the new lease by its old task, but recovered — and when meanwhile
//! another gateway ended it, that ending stands. Ground truth is the simulator's registers.

mod common;

use common::gateways::{call, gateway, metric, owned_by, start_sim};
use common::pg::{Database, scalar, sql};
use common::truth::{modbus_read, slide_beyond, slide_mm};
use serde_json::Value;
use std::time::Duration;

/// The command's status once it is over, asked of `at` for at most 30 s.
async fn settled(at: &str, id: &str) -> Value {
    let mut end = Value::Null;
    for _ in 0..6 {
        let args = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
        end = call(at, "get_command_status", &args).await;
        if end["status"] != "running" && end["status"] != "accepted" {
            break;
        }
    }
    end
}

fn events(result: &Value) -> Vec<String> {
    result["timeline"]
        .as_array()
        .map(|t| t.iter().map(|e| e["event"].to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_lease_goes_before_it_is_journaled_is_refused_and_leaves_nothing() {
    let Some(db) = Database::create("lease_lost_at_accept").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Long leases: the gateway renews every 10 s, so it still believes it holds the lamp when
    // the call comes, and only the journal's fence can tell.
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 30);
    let (mut a, a_at) = gateway(dir.path(), "a");
    owned_by(&a_at, "lamp", Some("a")).await;
    sql(
        &db.url,
        "UPDATE leases SET owner = 'ghost', epoch = epoch + 1,
             expires_at = now() + interval '1 hour' WHERE device = 'lamp'",
    )
    .await;
    let r = call(&a_at, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(
        (r["status"].as_str(), r["error_code"].as_str()),
        (Some("rejected"), Some("DEVICE_BUSY")),
        "{r}"
    );
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("lost lamp's lease while accepting"),
        "{r}"
    );
    let hint = r["hint"].as_str().unwrap();
    assert!(
        hint.starts_with("The device's lease is changing hands between gateways"),
        "{r}"
    );
    let open = "SELECT count(*) FROM commands WHERE device = 'lamp'
                AND status IN ('accepted', 'running')";
    assert_eq!(
        scalar(&db.url, open).await,
        0,
        "a command nobody supervises"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1,
        0,
        "the lamp moved"
    );
    let _ = a.kill();
    let _ = a.wait();
    db.drop().await;
}

/// Starts the slide on 0 → 250 mm (about 2.5 s) through `at`, then bumps its lease's epoch
/// behind the gateway's back (as a claim elsewhere would), running `also` in the same
/// transaction; the command id.
async fn move_then_lose_the_lease(url: &str, at: &str, modbus: &str, also: &str) -> String {
    owned_by(at, "slide", Some("a")).await;
    let r = call(at, "slide_move_to", r#"{"target_mm":250,"wait_s":0}"#).await;
    let id = r["command_id"].as_str().unwrap().to_string();
    slide_beyond(modbus, 20.0).await;
    let also = also.replace("{id}", &id);
    sql(
        url,
        &format!(
            "BEGIN; UPDATE leases SET epoch = epoch + 1 WHERE device = 'slide'; {also} COMMIT;"
        ),
    )
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_under_a_lease_lost_and_taken_back_is_recovered_not_written_on_by_its_old_task() {
    let Some(db) = Database::create("lease_taken_back").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let id = move_then_lose_the_lease(&db.url, &a_at, &modbus, "").await;
    let end = settled(&a_at, &id).await;
    assert_eq!(end["status"], "completed", "{end}");
    assert!(
        events(&end).contains(&"\"recovered\"".to_string()),
        "supervised on by the task of the lost lease: {:?}",
        events(&end)
    );
    let at = slide_mm(&modbus).await;
    assert!((at - 250.0).abs() < 0.5, "the slide is at {at} mm");
    // The metrics say so: every device held, and one lease more taken than held (the slide's
    // second claim).
    let held = metric(&a_at, "closedloop_leases_held").await.unwrap();
    let taken = metric(&a_at, "closedloop_leases_taken_total")
        .await
        .unwrap();
    assert!(
        held >= 1.0 && taken == held + 1.0,
        "held {held}, taken {taken}"
    );
    let rounds = metric(&a_at, r#"closedloop_lease_rounds_total{outcome="ok"}"#).await;
    assert!(rounds.unwrap() >= 2.0, "{rounds:?}");
    let _ = a.kill();
    let _ = a.wait();
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_another_gateway_ended_meanwhile_keeps_that_ending() {
    let Some(db) = Database::create("lease_ended_elsewhere").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let ended = "UPDATE commands SET status = 'failed', error_code = 'INTERRUPTED'
                 WHERE command_id = '{id}';";
    let id = move_then_lose_the_lease(&db.url, &a_at, &modbus, ended).await;
    // Long past the move's end and several lease rounds: the old task wrote nothing more.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kept = format!(
        "SELECT count(*) FROM commands WHERE command_id = '{id}'
         AND status = 'failed' AND error_code = 'INTERRUPTED'"
    );
    assert_eq!(
        scalar(&db.url, &kept).await,
        1,
        "the other gateway's ending was overwritten"
    );
    let late =
        format!("SELECT count(*) FROM events WHERE command_id = '{id}' AND event = 'completed'");
    assert_eq!(
        scalar(&db.url, &late).await,
        0,
        "a completion journaled under a later lease"
    );
    let _ = a.kill();
    let _ = a.wait();
    db.drop().await;
}
