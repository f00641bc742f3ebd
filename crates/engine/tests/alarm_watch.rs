//! The alarms' watchers as a hall runs them: alarms of different poll periods judged on their
//! own ticks, `for_ms` counted from the first judgement that held although the value never
//! changes after it, and the alarms that block each device found for that device alone.

mod common;

use closedloop_engine::Status;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// How long the door must stay open before `DOOR_HELD` is raised.
const FOR_MS: u64 = 1500;

/// The slide, the lamp, a door polled every 20 ms and a beacon polled every 50 ms. `DOOR_HELD`
/// blocks the slide and the lamp; `BEACON_ON` blocks the slide.
fn hall() -> String {
    let door = relay("").replace("id = \"lamp\"", "id = \"door\"");
    let beacon = relay("")
        .replace("id = \"lamp\"", "id = \"beacon\"")
        .replace("poll_ms = 20", "poll_ms = 50");
    let alarms = format!(
        r#"
[[alarm]]
name = "DOOR_HELD"
when = "devices.door.contact"
for_ms = {FOR_MS}
severity = "critical"
blocks = ["slide", "lamp"]
description = "The guard door has been open too long."

[[alarm]]
name = "BEACON_ON"
when = "devices.beacon.contact"
severity = "warning"
blocks = ["slide"]
description = "The beacon says the cell is being serviced."
"#
    );
    format!("{}{}{door}{beacon}{alarms}", slide(""), relay(""))
}

fn active(rig: &Rig) -> Vec<String> {
    let all = rig.engine.alarms().into_iter();
    all.filter(|a| a.active).map(|a| a.name).collect()
}

/// Waits (bounded) until the active alarms are `want`; how long that took.
async fn until_active(rig: &Rig, want: &[&str]) -> Duration {
    let start = Instant::now();
    for _ in 0..500 {
        if active(rig) == want {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("active alarms stayed {:?}, not {want:?}", active(rig));
}

fn blocking(rig: &Rig, device: &str) -> Vec<String> {
    rig.engine.device_state(device).unwrap().alarms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_of_two_periods_raise_and_clear_each_on_their_own_devices() {
    let rig = rig(&hall()).await;
    for d in ["slide", "lamp", "door", "beacon"] {
        rig.online(d).await;
    }
    until_active(&rig, &[]).await;

    // The door opens and stays open: its value never changes again, yet the alarm is raised
    // once it has held for FOR_MS, and not before.
    let opened = Instant::now();
    let open = rig.act("door", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(open.status, Status::Completed, "{open:#?}");
    until_active(&rig, &["DOOR_HELD"]).await;
    let held = opened.elapsed();
    assert!(
        held >= Duration::from_millis(FOR_MS),
        "raised after {held:?}"
    );
    assert_eq!(blocking(&rig, "slide"), ["DOOR_HELD"]);
    assert_eq!(blocking(&rig, "lamp"), ["DOOR_HELD"]);
    assert!(blocking(&rig, "beacon").is_empty());
    let refused = rig.act("lamp", "switch", json!({"on": true}), 0.0).await;
    assert_eq!(
        (refused.status, code(&refused).as_str()),
        (Status::Rejected, "INTERLOCK"),
        "{refused:#?}"
    );
    assert!(!rig.sim("lamp").peek().contact.unwrap(), "nothing written");

    // The beacon, polled on another period, raises its own alarm beside it.
    let on = rig.act("beacon", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(on.status, Status::Completed, "{on:#?}");
    until_active(&rig, &["DOOR_HELD", "BEACON_ON"]).await;
    assert_eq!(
        blocking(&rig, "slide"),
        ["DOOR_HELD", "BEACON_ON"],
        "plant order"
    );
    assert_eq!(blocking(&rig, "lamp"), ["DOOR_HELD"]);

    // The door closes: only its alarm clears, and the lamp takes commands again.
    let shut = rig.act("door", "switch", json!({"on": false}), 2.0).await;
    assert_eq!(shut.status, Status::Completed, "{shut:#?}");
    until_active(&rig, &["BEACON_ON"]).await;
    assert_eq!(blocking(&rig, "slide"), ["BEACON_ON"]);
    assert!(blocking(&rig, "lamp").is_empty());
    let lamp = rig.act("lamp", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(lamp.status, Status::Completed, "{lamp:#?}");
    assert!(rig.sim("lamp").peek().contact.unwrap());
}

/// Raises waiting for the journal when the gateway shuts down are written before it closes,
/// not dropped with the watchers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raises_still_waiting_for_the_journal_at_shutdown_are_written() {
    const ALARMS: usize = 100;
    let door = relay("").replace("id = \"lamp\"", "id = \"door\"");
    let alarms: String = (0..ALARMS)
        .map(|i| {
            format!(
                "\n[[alarm]]\nname = \"DOOR_{i}\"\nwhen = \"devices.door.contact\"\nblocks = [\"lamp\"]\ndescription = \"The door is open.\"\n"
            )
        })
        .collect();
    let rig = rig(&format!("{}{door}{alarms}", relay(""))).await;
    rig.online("lamp").await;
    rig.online("door").await;
    until_active(&rig, &[]).await;
    let open = rig.act("door", "switch", json!({"on": true}), 2.0).await;
    assert_eq!(open.status, Status::Completed, "{open:#?}");
    for _ in 0..500 {
        if active(&rig).len() == ALARMS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        active(&rig).len(),
        ALARMS,
        "every alarm raised on the board"
    );
    rig.engine.shutdown().await;
    let url = format!("sqlite://{}", rig.dir.path().join("journal.db").display());
    let journal = closedloop_journal::Journal::open_read_only(&url)
        .await
        .unwrap();
    let kept = journal.alarm_events(0, 10_000).await.unwrap();
    // Each alarm's last row is its raise. (On a loaded machine a poll late past the liveness
    // window may have raised and cleared one before: nothing showed it safe then.)
    let mut last = std::collections::BTreeMap::new();
    for a in &kept {
        last.insert(a.name.clone(), a.active);
    }
    let raised = last.values().filter(|active| **active).count();
    assert_eq!(raised, ALARMS, "raises journaled");
}
