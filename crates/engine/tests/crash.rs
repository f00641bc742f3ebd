//! Nothing accepted is ever lost: a child process running the engine is killed with SIGKILL
//! while one command runs and another waits in the queue; a new engine on the same journal ends
//! both exactly as docs/architecture.md says.

mod common;

use closedloop_engine::Status;
use closedloop_journal::Journal;
use common::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn crash_plant() -> String {
    let lamp = relay("")
        .replace("expect_s = 0.02", "expect_s = 3.0\nhold_ms = 1500")
        .replace("max_silence_s = 0.5", "max_silence_s = 2.0");
    format!("{}{}", slide(""), lamp)
}

/// Not a test on its own: the child process of `kill_9_between_accept_and_dispatch_and_while_running`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by its parent test as a child process"]
async fn crash_child() {
    let Ok(dir) = std::env::var("CLOSEDLOOP_CRASH_DIR") else {
        return;
    };
    let plant = plant(&crash_plant());
    let url = format!("sqlite://{dir}/journal.db");
    let journal = Journal::open(&url).await.unwrap();
    let drivers = closedloop_connect::build_drivers(&plant).unwrap();
    let links = drivers.open(&plant.devices).expect("links");
    let engine = closedloop_engine::Engine::start(std::sync::Arc::new(plant), journal, links)
        .await
        .unwrap();
    let sub = |device: &str, action: &str, args: serde_json::Value| closedloop_engine::Submission {
        device: device.into(),
        action: action.into(),
        args: args.as_object().cloned().unwrap(),
        ..Default::default()
    };
    let hold = engine
        .submit(sub("lamp", "switch", json!({"on": false})))
        .await
        .unwrap();
    println!("HOLD {}", hold.command_id);
    let moving = engine
        .submit(sub("slide", "move_to", json!({"target_mm": 300.0})))
        .await
        .unwrap();
    println!("MOVE {}", moving.command_id);
    let queued = engine
        .submit(sub("slide", "move_to", json!({"target_mm": 10.0})))
        .await
        .unwrap();
    println!("QUEUED {}", queued.command_id);
    // Wait until the move is really running before announcing readiness.
    for _ in 0..200 {
        if engine
            .status(&moving.command_id, Duration::ZERO)
            .await
            .unwrap()
            .status
            == Status::Running
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("READY");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_between_accept_and_dispatch_and_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let ids = run_and_kill_the_child(dir.path());

    // Everything the child accepted is in the journal, none of it terminal.
    journal_holds_every_accepted_command_unfinished(dir.path(), &ids).await;

    // Restart on the same journal.
    let rig = rig_in(&crash_plant(), dir).await;
    the_queued_move_is_interrupted_and_never_sent(&rig, &ids).await;
    the_running_move_is_interrupted_on_fresh_reads(&rig, &ids).await;
    the_held_relay_command_completes(&rig, &ids).await;
}

/// Runs `crash_child` on the journal in `dir` until it is READY, then kills it with SIGKILL:
/// the ids it announced, by kind (`HOLD`, `MOVE`, `QUEUED`).
fn run_and_kill_the_child(dir: &std::path::Path) -> BTreeMap<String, String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CLOSEDLOOP_CRASH_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ids = BTreeMap::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        // The harness may print "test crash_child ... " in front of the first line.
        if line.ends_with("READY") {
            break;
        }
        for k in ["HOLD", "MOVE", "QUEUED"] {
            if let Some(pos) = line.find(&format!("{k} ")) {
                ids.insert(k.to_string(), line[pos + k.len() + 1..].trim().to_string());
            }
        }
    }
    assert_eq!(ids.len(), 3, "child announced {ids:?}");
    child.kill().unwrap(); // SIGKILL: no shutdown path runs.
    child.wait().unwrap();
    ids
}

/// The journal in `dir` holds every command in `ids`, none of them terminal; the queued one
/// never dispatched, the move dispatched.
async fn journal_holds_every_accepted_command_unfinished(
    dir: &std::path::Path,
    ids: &BTreeMap<String, String>,
) {
    let url = format!("sqlite://{}", dir.join("journal.db").display());
    let j = Journal::open(&url).await.unwrap();
    for (k, id) in ids {
        let row = j
            .get(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{k} lost"));
        assert!(
            ["accepted", "running"].contains(&row.status.as_str()),
            "{k}: {}",
            row.status
        );
    }
    assert!(!j.get(&ids["QUEUED"]).await.unwrap().unwrap().dispatched);
    assert!(j.get(&ids["MOVE"]).await.unwrap().unwrap().dispatched);
    j.close().await;
}

/// The queued move ends INTERRUPTED on the restarted engine, and was never sent late.
async fn the_queued_move_is_interrupted_and_never_sent(rig: &Rig, ids: &BTreeMap<String, String>) {
    let queued = rig
        .engine
        .status(&ids["QUEUED"], Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        (queued.status, code(&queued).as_str()),
        (Status::Failed, "INTERRUPTED"),
        "{queued:#?}"
    );
    assert!(queued.detail.as_deref().unwrap().contains("not sent late"));
    assert_eq!(
        rig.sim("slide").peek().target_mm,
        Some(0.0),
        "the queued move was never sent late"
    );
}

/// The interrupted move (3 s of travel, a 9.3 s deadline): the new simulator stands still
/// at 0 mm, so the first fresh reads after the restart end it INTERRUPTED, with that
/// evidence — long before its journaled deadline, and never completed.
async fn the_running_move_is_interrupted_on_fresh_reads(rig: &Rig, ids: &BTreeMap<String, String>) {
    let moved = rig
        .engine
        .status(&ids["MOVE"], Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(
        (moved.status, code(&moved).as_str()),
        (Status::Failed, "INTERRUPTED"),
        "time-to-truth: it must end on the first fresh reads, not at its deadline: {moved:#?}"
    );
    assert!(events(&moved).contains(&"recovered".to_string()));
    assert!(
        moved.detail.as_deref().unwrap().contains("standing still"),
        "{:?}",
        moved.detail
    );
    assert_eq!(ev_value(&moved, "moving"), json!(false), "{moved:#?}");
}

/// The held relay command: its done_when holds on fresh reads after the restart → completed.
async fn the_held_relay_command_completes(rig: &Rig, ids: &BTreeMap<String, String>) {
    let held = rig
        .settle(
            &rig.engine
                .status(&ids["HOLD"], Duration::ZERO)
                .await
                .unwrap(),
        )
        .await;
    assert_eq!(held.status, Status::Completed, "{held:#?}");
    assert!(held.verified);
}
