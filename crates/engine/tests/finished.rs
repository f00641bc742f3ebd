//! A finished command's status is served from memory (no journal read) and must say exactly
//! what the journal says.

mod common;

use closedloop_engine::{CommandResult, Status};
use closedloop_journal::Journal;
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn a_finished_commands_status_from_memory_is_what_the_journal_says() {
    let rig = rig(plants::LAMP).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    // The supervisor lets go of the command right after its terminal row (bounded wait).
    for _ in 0..200 {
        if rig.engine.live_count() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(rig.engine.live_count(), 0, "the command is no longer live");
    let from_memory = rig
        .engine
        .status(&r.command_id, Duration::ZERO)
        .await
        .unwrap();
    let url = format!("sqlite://{}", rig.dir.path().join("journal.db").display());
    let journal = Journal::open(&url).await.unwrap();
    let row = journal
        .get(&r.command_id)
        .await
        .unwrap()
        .expect("journaled");
    let events = journal.events(&r.command_id).await.unwrap();
    let from_journal = CommandResult::from_rows(&row, &events, None);
    assert_eq!(from_memory, from_journal);
    assert_eq!(from_memory, r);
}
