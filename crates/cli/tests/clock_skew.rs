//! Gateways whose clocks disagree (`CLOSEDLOOP_PG_URL`): a command handed over is timed on the
//! database's clock, not on the accepting gateway's. The accepting gateway here is the test
//! itself, journaling a lamp call as a gateway whose clock runs a minute slow would (its
//! `accepted_at` a minute before the owner's now): the owner takes it over and runs it, where
//! counting the wait on two clocks timed it out unsent (`queue_timeout_s`, 10 s) the moment it
//! arrived. Ground truth is the lamp's contact in `closedloop sim`.

mod common;

use closedloop_journal::Journal;
use common::gateways::{call, gateway, handed_call, now_ms, settled_owner, start_sim, wait_for};
use common::pg::Database;
use common::truth::modbus_read;
use serde_json::json;

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
    let switch = ("lamp", "switch", json!({"on": true}));
    let (row, events) = handed_call(id, switch, now_ms() - 60_000, &owner);
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
