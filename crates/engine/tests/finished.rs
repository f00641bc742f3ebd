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

/// The reading that confirms a command and its final status go to the journal in one write:
/// written apart, a whole commit (an fsync) stood between the confirming read and the caller's
/// answer. The lamp's relay switches at once (no pull-in), so the first fresh reading after the
/// acknowledgement is the confirming one and the writes of one command are exactly these: the
/// insert (`received`, `accepted`), `dispatched`, `device_ack` with `running`, then the reading
/// with `completed`.
#[tokio::test]
async fn the_confirming_reading_and_the_final_status_are_one_journal_write() {
    let driver = r#"driver = { kind = "sim", model = "relay" }"#;
    let instant = r#"driver = { kind = "sim", model = "relay", pull_in_ms = 0 }"#;
    let rig = rig(&plants::replace_line(plants::LAMP, driver, instant)).await;
    rig.online("lamp").await;
    let (writes_before, _) = rig.engine.journal_write_counts();
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    let (writes_after, _) = rig.engine.journal_write_counts();
    let tail: Vec<(&str, &str)> = r.timeline[r.timeline.len() - 2..]
        .iter()
        .map(|e| (e.event.as_str(), e.at.as_str()))
        .collect();
    assert_eq!(
        (tail[0].0, tail[1].0, tail[0].1 == tail[1].1),
        ("signal", "completed", true),
        "{tail:?}"
    );
    assert_eq!(writes_after - writes_before, 4, "{:?}", events(&r));
}
