//! `diff --journal` on a journal written here, row by row: what it re-judges and what it says it
//! could not judge (issue 52: a FEEDBACK_MISMATCH the new file passes was once "0 would change",
//! and a new `fail_when` on a signal never journaled was not named).

use super::journal::{Totals, commands};
use closedloop_journal::{CommandRow, EventRow, Journal};
use serde_json::json;

fn plant(tolerance: &str, fail_when: &str) -> closedloop_plant::Plant {
    let text = format!(
        r#"
[[device]]
id = "oven"
description = "An oven"
driver = {{ kind = "sim", model = "relay" }}
[device.signals]
temp_c = {{ input = 0, scale = 0.1 }}
overcurrent = {{ discrete_input = 1 }}
[[device.action]]
name = "set"
description = "Set the temperature."
params = {{ target = {{ type = "number", min = 0.0, max = 300.0 }} }}
write = [{{ holding = 0, scale = 0.1, value = "params.target" }}]
done_when = "abs(temp_c - params.target) <= {tolerance}"
{fail_when}
expect_s = 1.0
"#
    );
    closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("parses")
}

fn row(id: &str, status: &str, code: Option<&str>) -> CommandRow {
    CommandRow {
        command_id: id.into(),
        request_id: format!("req_{id}"),
        device: "oven".into(),
        action: "set".into(),
        params: json!({"target": 80.0}),
        status: status.into(),
        verified: status == "completed",
        verification: "feedback".into(),
        error_code: code.map(str::to_string),
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms: 1_000,
        updated_at_ms: 2_000,
        deadline_ms: Some(2_000),
        dispatched: true,
        caller: Some("t".into()),
        idempotency_key: None,
    }
}

fn reading(at_ms: i64, temp: f64) -> EventRow {
    EventRow {
        at_ms,
        event: "signal".into(),
        data: json!({"values": {"temp_c": temp}, "read_at": "t"}),
    }
}

async fn journal_with(rows: &[(CommandRow, f64)]) -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("j.db").display());
    let j = Journal::open(&url).await.unwrap();
    for (r, temp) in rows {
        j.insert(r, &[reading(1_500, *temp)]).await.unwrap();
    }
    (dir, j)
}

#[tokio::test]
async fn a_feedback_mismatch_the_new_file_passes_would_change() {
    let (_dir, j) = journal_with(&[
        (row("c1", "failed", Some("FEEDBACK_MISMATCH")), 79.0),
        (row("c2", "timeout", Some("TIMEOUT")), 70.0),
    ])
    .await;
    let (old, new) = (plant("0.5", ""), plant("2.0", ""));
    let mut totals = Totals::default();
    let mut moved = Vec::new();
    commands(&j, (&old, &new), &mut totals, |m| moved.push(m))
        .await
        .unwrap();
    assert_eq!((totals.judged, totals.moved), (2, 1), "{totals:?}");
    assert_eq!(moved[0].command_id, "c1");
    assert_eq!(moved[0].new.to_string(), "completed");
    assert!(
        moved[0].reading.contains("temp_c = 79"),
        "{}",
        moved[0].reading
    );
}

#[tokio::test]
async fn a_new_criterion_on_a_signal_never_journaled_is_said_not_judged() {
    let (_dir, j) = journal_with(&[
        (row("c1", "completed", None), 80.0),
        (row("c2", "failed", Some("FEEDBACK_MISMATCH")), 60.0),
    ])
    .await;
    let old = plant("0.5", "");
    let new = plant("0.5", r#"fail_when = { OVERCURRENT = "overcurrent" }"#);
    let mut totals = Totals::default();
    let mut moved = Vec::new();
    commands(&j, (&old, &new), &mut totals, |m| moved.push(m))
        .await
        .unwrap();
    assert!(moved.is_empty(), "{moved:?}");
    assert_eq!(totals.judged, 0, "{totals:?}");
    assert_eq!(
        totals.unjournaled.get("overcurrent"),
        Some(&2),
        "{totals:?}"
    );
    let text = super::render::journal(&totals, &moved, &[]);
    assert!(
        text.contains("could not judge 2 command(s): `overcurrent` is not journaled (2)"),
        "{text}"
    );
}
