//! `diff --journal` on a journal written here, row by row: what it re-judges and what it says it
//! could not judge (issue 52: a FEEDBACK_MISMATCH the new file passes was once "0 would change",
//! and a new `fail_when` on a signal never journaled was not named).

use super::journal::{Moved, Totals, commands};
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

fn event(at_ms: i64, event: &str, data: serde_json::Value) -> EventRow {
    EventRow {
        at_ms,
        event: event.into(),
        data,
    }
}

/// A command's timeline as the engine journals it: dispatched at 1.01 s (deadline 2.5 s later,
/// the oven at 20 °C then), acknowledged at 1.02 s, one reading at 1.5 s; without the
/// acknowledgement when `acked` is false.
fn timeline(temp: f64, acked: bool) -> Vec<EventRow> {
    let at = closedloop_engine::clock::rfc3339;
    let dispatched = json!({"deadline": at(3_510), "budget_s": 2.5, "expect_s": 1.0,
                            "baseline": {"temp_c": 20.0}});
    let read = json!({"values": {"temp_c": temp}, "read_at": at(1_500), "read_from": at(1_500)});
    let mut events = vec![event(1_010, "dispatched", dispatched)];
    if acked {
        events.push(event(1_020, "device_ack", json!(null)));
    }
    events.push(event(1_500, "signal", read));
    events
}

async fn journal_with(rows: &[(CommandRow, f64)]) -> (tempfile::TempDir, Journal) {
    journal_of(rows, true).await
}

async fn journal_of(rows: &[(CommandRow, f64)], acked: bool) -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("j.db").display());
    let j = Journal::open(&url).await.unwrap();
    for (r, temp) in rows {
        j.insert(r, &timeline(*temp, acked)).await.unwrap();
    }
    (dir, j)
}

/// `commands` over `j` under `(old, new)`: the totals and what moved.
async fn judged_again(
    j: &Journal,
    plants: (&closedloop_plant::Plant, &closedloop_plant::Plant),
) -> (Totals, Vec<Moved>) {
    let mut totals = Totals::default();
    let mut moved = Vec::new();
    commands(j, plants, &mut totals, |m| moved.push(m))
        .await
        .unwrap();
    (totals, moved)
}

#[tokio::test]
async fn a_feedback_mismatch_the_new_file_passes_would_change() {
    let (_dir, j) = journal_with(&[
        (row("c1", "failed", Some("FEEDBACK_MISMATCH")), 79.0),
        (row("c2", "timeout", Some("TIMEOUT")), 70.0),
    ])
    .await;
    let (old, new) = (plant("0.5", ""), plant("2.0", ""));
    let (totals, moved) = judged_again(&j, (&old, &new)).await;
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
    let (totals, moved) = judged_again(&j, (&old, &new)).await;
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

#[tokio::test]
async fn a_command_whose_acknowledgement_is_not_journaled_is_said_not_judged_again() {
    let (_dir, j) = journal_of(
        &[(row("c1", "failed", Some("FEEDBACK_MISMATCH")), 79.0)],
        false,
    )
    .await;
    let (old, new) = (plant("0.5", ""), plant("2.0", ""));
    let (totals, moved) = judged_again(&j, (&old, &new)).await;
    assert!(
        moved.is_empty(),
        "never a verdict without the acknowledgement: {moved:?}"
    );
    assert_eq!(totals.judged, 0, "{totals:?}");
    let text = super::render::journal(&totals, &moved, &[]);
    let want = "could not judge 1 command(s) again by the engine's rules: its acknowledgement is not journaled (1)";
    assert!(text.contains(want), "{text}");
}
