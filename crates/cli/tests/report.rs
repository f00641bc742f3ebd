//! `closedloop report` against a journal `serve` wrote: a simulated cell is driven over MCP
//! through completions, a stall, an interlock, a `sent` and refused arguments, and the report
//! must count exactly those — with the median time to truth the journal's own rows give.

mod common;

use common::{act, call, connect, run, sc};
use serde_json::json;
use std::path::Path;

const PLANT: &str = r#"
[server]
name = "report"
journal = "sqlite://journal.db"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
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

[[device]]
id = "slide"
description = "Linear slide that jams at 70 mm"
driver = { kind = "sim", model = "stepper", speed_mm_s = 100.0, travel_mm = [0.0, 300.0], faults = [{ kind = "stall", at_mm = 70.0 }] }
poll_ms = 20
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving      = { discrete_input = 0 }
fault       = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide to an absolute position."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = { MOTOR_STALL = "fault" }
expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05"
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
[[device.action]]
name = "reset"
description = "Clear the slide driver's fault output."
params = {}
write = [{ coil = 2, value = "true" }]
done_when = "!fault"
expect_s = 0.02
idempotent = true

[[device]]
id = "gripper"
description = "Gripper on the slide carriage"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "close"
description = "Close the gripper while the slide stands still without fault."
params = {}
requires = "!devices.slide.fault && !devices.slide.moving"
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.02

[[device]]
id = "buzzer"
description = "Buzzer without a feedback contact"
driver = { kind = "sim", model = "relay", feedback = false }
poll_ms = 20
[device.signals]
commanded = { coil = 0 }
[[device.action]]
name = "switch"
description = "Sound or silence the buzzer."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
expect_s = 0.02
verification = "none"
"#;

/// Serves the plant and makes eight calls, each with a known outcome.
async fn drive(dir: &Path) {
    let c = connect(dir).await;
    let expect = [
        ("lamp_switch", json!({"on": true}), "completed", ""),
        ("lamp_switch", json!({"on": false}), "completed", ""),
        (
            "lamp_switch",
            json!({"on": "yes"}),
            "rejected",
            "INVALID_PARAMS",
        ),
        ("lamp_switch", json!({}), "rejected", "INVALID_PARAMS"),
        (
            "slide_move_to",
            json!({"target_mm": 150}),
            "failed",
            "MOTOR_STALL",
        ),
        (
            "slide_move_to",
            json!({"target_mm": 500}),
            "rejected",
            "INVALID_PARAMS",
        ),
        ("gripper_close", json!({}), "rejected", "INTERLOCK"),
        ("buzzer_switch", json!({"on": true}), "sent", ""),
    ];
    for (tool, args, status, code) in expect {
        let (s, e, result) = act(&c, tool, args.clone()).await;
        assert_eq!(
            (s.as_str(), e.as_str()),
            (status, code),
            "{tool} {args}: {result}"
        );
    }
    let listed = call(&c, "list_commands", json!({"limit": 20})).await;
    assert_eq!(sc(&listed)["commands"].as_array().map(Vec::len), Some(8));
    c.cancel().await.unwrap();
}

/// The median of `updated_at_ms - accepted_at_ms` over one tool's completed and failed
/// commands, read straight from the SQLite file; also checks that each such row was last
/// written with its final event, which is what the report's definition relies on.
async fn truth_ms(dir: &Path, device: &str, action: &str) -> Vec<i64> {
    let url = format!("sqlite://{}", dir.join("journal.db").display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT c.accepted_at_ms, c.updated_at_ms,
                (SELECT MAX(e.at_ms) FROM events e WHERE e.command_id = c.command_id
                   AND e.event = c.status)
         FROM commands c WHERE device = ? AND action = ? AND status IN ('completed', 'failed')",
    )
    .bind(device)
    .bind(action)
    .fetch_all(&db)
    .await
    .unwrap();
    db.close().await;
    rows.iter()
        .map(|&(accepted, updated, final_event)| {
            assert_eq!(
                updated, final_event,
                "the final status was not the last write"
            );
            updated - accepted
        })
        .collect()
}

/// The report's `to truth` cell for a median of `ms` over `n` commands.
fn cell(mut ms: Vec<i64>) -> String {
    ms.sort_unstable();
    let n = ms.len();
    let median = if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2
    };
    if median < 1000 {
        format!("{median} ms ({n})")
    } else {
        format!("{:.1} s ({n})", median as f64 / 1000.0)
    }
}

/// The cells of `tool`'s row after its name, one space apart.
fn counts(out: &str, tool: &str) -> String {
    let prefix = format!("{tool} ");
    let line = out.lines().find(|l| l.starts_with(&prefix));
    let line = line.unwrap_or_else(|| panic!("no row for {tool}:\n{out}"));
    line.split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn report_counts_what_serve_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, PLANT).unwrap();
    drive(dir.path()).await;

    let (code, out, err) = run(&["report"], &plant, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{}: 8 call(s) since ", plant.display()))
            && lines[0].ends_with(", 4 accepted, 4 rejected"),
        "{out}"
    );
    let head = "tool calls accepted completed failed timeout sent cancelled open rejected INVALID_PARAMS to truth";
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>().join(" "),
        head
    );
    let lamp = cell(truth_ms(dir.path(), "lamp", "switch").await);
    let slide = cell(truth_ms(dir.path(), "slide", "move_to").await);
    for (tool, want) in [
        ("lamp_switch", format!("4 2 2 0 0 0 0 0 2 50% {lamp}")),
        ("slide_move_to", format!("2 1 0 1 0 0 0 0 1 50% {slide}")),
        ("slide_reset", "0 0 0 0 0 0 0 0 0 - -".into()),
        ("gripper_close", "1 0 0 0 0 0 0 0 1 0% -".into()),
        ("buzzer_switch", "1 1 0 0 0 1 0 0 0 0% -".into()),
    ] {
        assert_eq!(counts(&out, tool), want, "{tool}:\n{out}");
    }
    assert_eq!(lines.len(), 18, "{out}");
    assert_eq!(
        lines[9..15].join("\n"),
        "\
by code
  lamp_switch: rejected INVALID_PARAMS 2
  slide_move_to: failed MOTOR_STALL 1, rejected INVALID_PARAMS 1
  gripper_close: rejected INTERLOCK 1

lamp_switch: 2 of 4 calls (50%) refused INVALID_PARAMS: its parameters or description may confuse the model (`closedloop lint` names likely causes)
"
        .trim_end(),
        "{out}"
    );
    assert!(lines[16].starts_with("to truth: "), "{out}");

    // Nothing since a time to come: every tool listed, every count zero.
    let (code, out, err) = run(&["report"], &plant, &["--since", "2099-01-01"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(": 0 call(s) since 2099-01-01T00:00:00.000Z, 0 accepted, 0 rejected"),
        "{out}"
    );
    assert!(!out.contains("by code"), "{out}");
    for tool in [
        "lamp_switch",
        "slide_move_to",
        "slide_reset",
        "gripper_close",
        "buzzer_switch",
    ] {
        assert_eq!(
            counts(&out, tool),
            "0 0 0 0 0 0 0 0 0 - -",
            "{tool}:\n{out}"
        );
    }
}

#[test]
fn report_refuses_a_bad_since_and_a_journal_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, PLANT).unwrap();
    let (code, _, err) = run(&["report"], &plant, &["--since", "last week"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--since: \"last week\" is neither"), "{err}");
    let (code, out, err) = run(&["report"], &plant, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    let db = dir.path().join("journal.db");
    assert_eq!(
        err,
        format!(
            "error: no journal at {} yet: nothing has run\n",
            db.display()
        )
    );
    assert!(!db.exists(), "a report created the journal");
}
