//! `closedloop diff OLD NEW --journal`: a journal recorded by a real run — relays switching, a
//! slide moving, the slide stalling at 70 mm on the simulator and raising the JAMMED alarm, its
//! fault reset — judged again under a new file with a tighter tolerance and an alarm that must
//! hold a minute before it is raised. Exactly the command whose recorded readings fail the
//! tighter tolerance is named (the slide's move to 20.004 mm, which the simulator rounds to the
//! 0.01 mm it can reach), with the reading that decides it; the alarm raised at the stall's
//! reading and cleared at the reset's is no longer raised or cleared. On SQLite (the journal
//! named by its plant file) and PostgreSQL (by URL).

mod common;

use common::pg::Database;
use common::{act, connect};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

fn plant(journal: &str) -> String {
    format!(
        r#"
[server]
name = "rejudge"
journal = "{journal}"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = {{ kind = "sim", model = "relay" }}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.02

[[device]]
id = "slide"
description = "Linear slide that jams at 70 mm"
driver = {{ kind = "sim", model = "stepper", speed_mm_s = 200.0, faults = [{{ kind = "stall", at_mm = 70.0 }}] }}
poll_ms = 20
[device.signals]
position_mm = {{ holding = 2, type = "i32", scale = 0.01, unit = "mm" }}
moving = {{ discrete_input = 0 }}
fault = {{ discrete_input = 1 }}
[[device.action]]
name = "move_to"
description = "Move the slide to an absolute position."
params = {{ target_mm = {{ type = "number", min = 0.0, max = 300.0, unit = "mm" }} }}
write = [{{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }}, {{ coil = 0, value = "true" }}]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = {{ MOTOR_STALL = "fault" }}
expect_s = "abs(params.target_mm - position_mm) / 200.0 + 0.05"
cancel = [{{ coil = 1, value = "true" }}]
stopped_when = "!moving"
[[device.action]]
name = "reset"
description = "Clear the slide driver's fault output."
params = {{}}
write = [{{ coil = 2, value = "true" }}]
done_when = "!fault"
expect_s = 0.02
[[device.action]]
name = "store_target"
description = "Store the slide's next target without moving it."
params = {{ target_mm = {{ type = "number", min = 0.0, max = 300.0 }} }}
write = [{{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }}]
expect_s = 0.05
verification = "readback"

[[alarm]]
name = "JAMMED"
when = "devices.slide.fault"
blocks = ["lamp"]
description = "The slide reports a fault."
"#
    )
}

/// The new file: a tolerance of 0.001 mm, and JAMMED raised only once the fault held a minute.
fn tightened(old: &str) -> String {
    old.replacen("<= 0.2 &&", "<= 0.001 &&", 1).replacen(
        "blocks = [\"lamp\"]",
        "blocks = [\"lamp\"]\nfor_ms = 60000",
        1,
    )
}

/// Runs the scenario; returns the id of the move to 20.004 mm.
async fn record(dir: &Path) -> String {
    let c = connect(dir).await;
    let mut near = String::new();
    let steps = [
        ("lamp_switch", json!({"on": true}), "completed", ""),
        (
            "slide_move_to",
            json!({"target_mm": 20.004}),
            "completed",
            "",
        ),
        ("slide_move_to", json!({"target_mm": 50.0}), "completed", ""),
        ("lamp_switch", json!({"on": false}), "completed", ""),
        (
            "slide_move_to",
            json!({"target_mm": 150.0}),
            "failed",
            "MOTOR_STALL",
        ),
        ("slide_reset", json!({}), "completed", ""),
        // Confirmed by reading the register back: no readings journaled, nothing to re-judge.
        (
            "slide_store_target",
            json!({"target_mm": 60.0}),
            "completed",
            "",
        ),
    ];
    for (i, (tool, args, status, code)) in steps.into_iter().enumerate() {
        let (s, e, result) = act(&c, tool, args).await;
        assert_eq!(
            (s.as_str(), e.as_str()),
            (status, code),
            "step {i}: {result}"
        );
        if i == 1 {
            near = result["command_id"].as_str().unwrap().to_string();
        }
        if i == 4 {
            jammed(&c).await;
        }
    }
    c.cancel().await.unwrap();
    near
}

/// Waits (at most 5 s) until the stall has raised JAMMED: its watch sees the fault.
async fn jammed(c: &common::Client) {
    let mut listed = Value::Null;
    for _ in 0..250 {
        listed = common::sc(&common::call(c, "list_alarms", json!({})).await).clone();
        if listed["alarms"][0]["active"] == true {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("JAMMED never raised: {listed}");
}

/// `closedloop diff old.toml new.toml --journal JOURNAL --json` in `dir`: (exit code, report).
fn rejudge(dir: &Path, journal: &str) -> (Option<i32>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .current_dir(dir)
        .args([
            "diff",
            "old.toml",
            "new.toml",
            "--json",
            "--journal",
            journal,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}

/// The checks both journals must pass: exactly the near move changes verdict; the readback
/// command is counted, not judged; JAMMED stands active under the old file from the stall's
/// reading and not under the new (which would need the fault for a minute); at the reset's
/// reading both stand inactive again.
fn names_exactly_the_moved(report: &Value, near: &str) {
    let j = &report["journal"];
    assert_eq!(
        j["totals"],
        json!({"commands": 7, "judged": 6, "unjudged": 1, "moved": 1, "gone": 0,
               "readings": j["totals"]["readings"], "alarm_moves": 1, "looser": 1,
               "unjournaled": {}}),
        "{j}"
    );
    let moved = j["commands"].as_array().unwrap();
    assert_eq!(moved.len(), 1, "{j}");
    assert_eq!(moved[0]["command_id"], near);
    assert_eq!(moved[0]["action"], "slide.move_to");
    assert_eq!(moved[0]["old"], "completed");
    let new = moved[0]["new"].as_str().unwrap();
    assert!(new.starts_with("undecided"), "{j}");
    // The physical position the simulator reached: 20.00 mm, 0.004 from the target.
    let reading = moved[0]["reading"].as_str().unwrap();
    assert!(reading.contains("position_mm = 20.0 (read at"), "{reading}");
    let alarms = j["alarms"].as_array().unwrap();
    assert_eq!(alarms.len(), 1, "{j}");
    let field = |k: &str| alarms[0][k].as_str().unwrap();
    assert_eq!(
        (field("alarm"), field("old"), field("new")),
        ("JAMMED", "active", "inactive")
    );
    assert!(field("reading").contains("fault = true"), "{j}");
    assert_eq!(report["fails"], true);
}

fn write_files(dir: &Path, journal: &str) {
    let old = plant(journal);
    std::fs::write(dir.join("plant.toml"), &old).unwrap();
    std::fs::write(dir.join("old.toml"), &old).unwrap();
    std::fs::write(dir.join("new.toml"), tightened(&old)).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tighter_tolerance_names_exactly_the_commands_whose_readings_fail_it_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("journal.db").display());
    write_files(dir.path(), &url);
    let near = record(dir.path()).await;
    // The run raised JAMMED for real: the alarm watch journaled it (the server may still be
    // writing as it shuts down: asked again for up to 5 s).
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let mut first: Option<(String, bool)> = None;
    for _ in 0..100 {
        first = sqlx::query_as("SELECT name, active FROM alarm_events ORDER BY seq LIMIT 1")
            .fetch_optional(&db)
            .await
            .unwrap();
        if first.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    db.close().await;
    assert_eq!(first, Some(("JAMMED".to_string(), true)));
    let (code, report) = rejudge(dir.path(), "plant.toml");
    assert_eq!(code, Some(1), "{report}");
    names_exactly_the_moved(&report, &near);
    // The same journal under the old file: nothing moves.
    std::fs::copy(dir.path().join("old.toml"), dir.path().join("new.toml")).unwrap();
    let (code, report) = rejudge(dir.path(), "plant.toml");
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["journal"]["totals"]["moved"], 0);
    assert_eq!(report["journal"]["alarms"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tighter_tolerance_names_exactly_the_commands_whose_readings_fail_it_on_postgres() {
    let Some(pg) = Database::create("rejudge").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &pg.url);
    let near = record(dir.path()).await;
    let (code, report) = rejudge(dir.path(), &pg.url);
    assert_eq!(code, Some(1), "{report}");
    names_exactly_the_moved(&report, &near);
    pg.drop().await;
}
