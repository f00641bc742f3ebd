//! `closedloop audit` and `closedloop journal verify` against a journal `serve` wrote: each
//! command is printed with its caller (raw writes and rejections too), an untouched journal
//! verifies, and an event edited in the SQLite file afterwards is named by its seq.

mod common;

use common::{act, call, connect, run, sc};
use serde_json::json;
use std::path::Path;

const PLANT: &str = r#"
[server]
name = "audit"
journal = "sqlite://journal.db"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
raw_access = true
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02
idempotent = true
"#;

/// Serves the plant over stdio and runs a command, a raw write and a refused call through it.
async fn journal_three_calls(dir: &Path) {
    let c = connect(dir).await;
    let (status, _, _) = act(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(status, "completed");
    let raw = call(
        &c,
        "modbus_write",
        json!({"device": "lamp", "area": "coil", "address": 0, "values": [false]}),
    )
    .await;
    assert_eq!(raw.is_error, Some(false), "{:?}", raw.structured_content);
    let refused = call(&c, "lamp_switch", json!({"on": "maybe"})).await;
    assert_eq!(sc(&refused)["status"], "rejected");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn audit_prints_each_command_with_its_caller_and_verify_names_an_edited_event() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, PLANT).unwrap();
    journal_three_calls(dir.path()).await;

    let (code, out, err) = run(&["audit"], &plant, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let fields: Vec<Vec<&str>> = lines.iter().map(|l| l.split("  ").collect()).collect();
    for f in &fields {
        assert!(
            f[0].ends_with('Z') && f[0].contains('T'),
            "not UTC ISO 8601: {f:?}"
        );
        assert_eq!((f[1], f[2]), ("stdio", "lamp"), "{f:?}");
    }
    assert_eq!(fields[0][3..6], ["switch", "completed", "-"], "{out}");
    assert_eq!(
        fields[1][3..6],
        ["raw_write coil 0 [false]", "sent", "-"],
        "{out}"
    );
    assert_eq!(
        fields[2][3..6],
        ["switch", "rejected", "INVALID_PARAMS"],
        "{out}"
    );

    let (code, out, _) = run(&["audit"], &plant, &["--caller", "nobody", "--since", "1h"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("no commands since "), "{out}");

    let (code, out, err) = run(&["journal", "verify"], &plant, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.ends_with("intact\n"), "{out}");

    // Someone with the file rewrites what the first command's `accepted` event recorded.
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let seq: i64 = sqlx::query_scalar("SELECT MIN(seq) FROM events WHERE event = 'accepted'")
        .fetch_one(&db)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET data = '{\"on\":false}' WHERE seq = ?")
        .bind(seq)
        .execute(&db)
        .await
        .unwrap();
    db.close().await;
    let (code, out, err) = run(&["journal", "verify"], &plant, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains(&format!("BROKEN at seq {seq} (command ")) && out.contains("content changed"),
        "{out}"
    );
}

#[test]
fn audit_refuses_a_bad_since_and_neither_reads_a_journal_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, PLANT).unwrap();
    let (code, _, err) = run(&["audit"], &plant, &["--since", "yesterday"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--since: \"yesterday\" is neither"), "{err}");
    for args in [&["audit"][..], &["journal", "verify"]] {
        let (code, _, err) = run(args, &plant, &[]);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains("no journal at"), "{args:?}: {err}");
    }
    assert!(
        !dir.path().join("journal.db").exists(),
        "a read created the journal"
    );
}

/// The journal readers need only the journal's location: a desk where the drivers' variables
/// are unset, and a driver address that names nothing reachable, reads the journal all the same.
#[tokio::test]
async fn journal_readers_read_only_the_journal_location_not_drivers_or_their_variables() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, PLANT).unwrap();
    journal_three_calls(dir.path()).await;
    let elsewhere = PLANT.replace(
        r#"driver = { kind = "sim", model = "relay" }"#,
        r#"driver = { kind = "modbus-tcp", address = "${env:CLOSEDLOOP_TEST_NEVER_SET}" }"#,
    ) + "\n[[device]]\nid = \"far\"\ndriver = { kind = \"modbus-tcp\", address = \"x\" }\n";
    std::fs::write(&plant, elsewhere).unwrap();
    let (code, _, err) = run(&["check"], &plant, &[]);
    assert_eq!(code, Some(1), "the full loader still refuses it: {err}");

    let (code, out, err) = run(&["commands"], &plant, &[]);
    assert_eq!((code, out.lines().count()), (Some(0), 3), "{out}{err}");
    let id = out.lines().last().unwrap().split("  ").next().unwrap();
    let (code, out, err) = run(&["trace"], &plant, &[id]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("completed"), "{out}");
    for args in [&["audit"][..], &["report"], &["journal", "verify"]] {
        let (code, out, err) = run(args, &plant, &[]);
        assert_eq!(code, Some(0), "{args:?}: {out}{err}");
    }
    let (code, out, err) = run(&["journal", "prune"], &plant, &["--older-than", "1h"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("pruned 0 finished command(s)"), "{out}");
}
