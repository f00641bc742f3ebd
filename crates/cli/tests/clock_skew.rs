//! Gateways whose clocks disagree (`CLOSEDLOOP_PG_URL`): a command handed over is timed on the
//! database's clock, not on the accepting gateway's. The accepting gateway here is the test
//! itself, journaling a lamp call as a gateway whose clock runs a minute slow would (its
//! `accepted_at` a minute before the owner's now): the owner takes it over and runs it, where
//! counting the wait on two clocks timed it out unsent (`queue_timeout_s`, 10 s) the moment it
//! arrived. Ground truth is the lamp's contact in `closedloop sim`.

mod common;

use closedloop_journal::{CommandRow, EventRow, Journal};
use common::gateways::{call, gateway, modbus_read, now_ms, settled_owner, start_sim, wait_for};
use common::pg::Database;
use serde_json::json;

/// A lamp call accepted at `accepted_at_ms` (on the accepting gateway's clock) and handed to
/// `owner`, as `closedloop serve` journals one.
fn handed_lamp_call(id: &str, accepted_at_ms: i64, owner: &str) -> (CommandRow, Vec<EventRow>) {
    let row = CommandRow {
        command_id: id.into(),
        request_id: format!("req_{id}"),
        device: "lamp".into(),
        action: "switch".into(),
        params: json!({"on": true}),
        status: "accepted".into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms,
        updated_at_ms: accepted_at_ms,
        deadline_ms: None,
        dispatched: false,
        caller: Some("slow-clock".into()),
        idempotency_key: None,
    };
    let event = |event: &str, data| EventRow {
        at_ms: accepted_at_ms,
        event: event.into(),
        data,
    };
    let events = vec![
        event("received", json!({"request_id": row.request_id})),
        event("accepted", json!({"handed_to": owner})),
    ];
    (row, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_from_a_gateway_whose_clock_runs_slow_is_not_timed_out_on_arrival() {
    let Some(db) = Database::create("clock_skew").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let owner = settled_owner(&a_at, &b_at, "lamp").await;
    let owner_at = if owner == "a" { &a_at } else { &b_at };

    let journal = Journal::open(&db.url).await.unwrap();
    let id = "01a23950-0000-7000-8000-00000000c10c";
    let (row, events) = handed_lamp_call(id, now_ms() - 60_000, &owner);
    journal.insert(&row, &events).await.unwrap();
    journal.close().await;
    let done = call(owner_at, "get_command_status", &wait_for(id)).await;
    assert_eq!(
        (done["status"].as_str(), done["error_code"].as_str()),
        (Some("completed"), None),
        "{done}"
    );
    let contact = modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1;
    assert_eq!(contact, 1, "the lamp did not switch on: {done}");
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}
