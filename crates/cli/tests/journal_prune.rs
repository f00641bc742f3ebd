//! `closedloop journal prune`: finished commands past retention leave the journal with their
//! timelines; unfinished ones and recent ones stay; a missing or bad retention is refused with
//! what to give; what prune leaves still passes `closedloop journal verify`.

mod common;

use closedloop_journal::{CommandRow, EventRow, Journal};
use common::run;
use serde_json::json;
use std::process::Command;

const PLANT: &str = r#"
[server]
name = "prune"
journal = "sqlite://prune.db"

[[device]]
id = "lamp"
description = "Lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
on = { discrete_input = 0 }
"#;

fn row(id: &str, status: &str, updated_at_ms: i64) -> CommandRow {
    CommandRow {
        command_id: id.into(),
        request_id: format!("req_{id}"),
        device: "lamp".into(),
        action: "switch".into(),
        params: json!({}),
        status: status.into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms: updated_at_ms,
        updated_at_ms,
        deadline_ms: None,
        dispatched: false,
        caller: None,
        idempotency_key: None,
    }
}

#[tokio::test]
async fn prune_deletes_finished_commands_past_retention_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("prune.toml");
    std::fs::write(&plant, PLANT).unwrap();
    let url = format!("sqlite://{}", dir.path().join("prune.db").display());
    let j = Journal::open(&url).await.unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let two_days = 2 * 24 * 3_600_000;
    let ev = |e: &str| EventRow {
        at_ms: 0,
        event: e.into(),
        data: json!(null),
    };
    j.insert(
        &row("old-done", "completed", now - two_days),
        &[ev("completed")],
    )
    .await
    .unwrap();
    j.insert(
        &row("old-running", "running", now - two_days),
        &[ev("running")],
    )
    .await
    .unwrap();
    j.insert(&row("fresh-done", "completed", now), &[ev("completed")])
        .await
        .unwrap();
    j.close().await;

    let (code, out, err) = run(&["journal", "prune"], &plant, &["--older-than", "1d"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.trim(), "pruned 1 finished command(s) older than 24 h");

    let j = Journal::open(&url).await.unwrap();
    assert!(j.get("old-done").await.unwrap().is_none());
    assert!(j.events("old-done").await.unwrap().is_empty());
    assert!(
        j.get("old-running").await.unwrap().is_some(),
        "an unfinished command was pruned"
    );
    assert!(
        j.get("fresh-done").await.unwrap().is_some(),
        "a recent command was pruned"
    );
    j.close().await;

    // Prune deleted a prefix of the hash chain: what is left verifies from its anchor.
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["journal", "verify"])
        .arg(&plant)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("checked 2 chained event(s)\npruned below seq 2 ")
            && text.ends_with("intact\n"),
        "{text}"
    );
}

#[test]
fn prune_without_a_retention_or_with_a_bad_one_says_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("prune.toml");
    std::fs::write(&plant, PLANT).unwrap();
    let (code, _, err) = run(&["journal", "prune"], &plant, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("no [server] retain and no --older-than") && err.contains("--older-than 30d"),
        "{err}"
    );
    let (code, _, err) = run(&["journal", "prune"], &plant, &["--older-than", "5"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--older-than: retain = \"5\" is not a retention"),
        "{err}"
    );
}

#[tokio::test]
async fn serve_applies_the_plant_s_retention_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("prune.toml");
    std::fs::write(
        &plant,
        PLANT.replace("journal = ", "retain = \"1d\"\njournal = "),
    )
    .unwrap();
    let url = format!("sqlite://{}", dir.path().join("prune.db").display());
    let j = Journal::open(&url).await.unwrap();
    let ev = EventRow {
        at_ms: 0,
        event: "completed".into(),
        data: json!(null),
    };
    j.insert(
        &row("ancient", "completed", 1_000),
        std::slice::from_ref(&ev),
    )
    .await
    .unwrap();
    j.close().await;
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("serve")
        .arg(&plant)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let reader = Journal::open_read_only(&url).await.unwrap();
    let mut gone = false;
    for _ in 0..100 {
        if reader.get("ancient").await.unwrap().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    serve.kill().await.unwrap();
    assert!(
        gone,
        "serve kept a command finished in 1970 with retain = \"1d\""
    );
}
