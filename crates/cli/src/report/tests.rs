//! The report's rendering from hand-made rows: zero rows for tools never called, the codes,
//! the tools likely misread, and rows for commands the plant no longer declares.

use super::*;
use closedloop_journal::CommandRow;
use serde_json::json;

const PLANT: &str = r#"
[server]
journal = "sqlite::memory:"

[[device]]
id = "lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
[[device.action]]
name = "pulse"
description = "Pulse the lamp."
params = {}
write = [{ coil = 0, value = "true" }]
done_when = "contact"
"#;

/// A command of `action` on the lamp in `status`, ended `took_ms` after it was accepted.
pub(super) fn row(action: &str, status: &str, code: Option<&str>, took_ms: i64) -> CommandRow {
    CommandRow {
        command_id: "c".into(),
        request_id: "r".into(),
        device: "lamp".into(),
        action: action.into(),
        params: json!({}),
        status: status.into(),
        verified: false,
        verification: "feedback".into(),
        error_code: code.map(str::to_string),
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms: 1_000,
        updated_at_ms: 1_000 + took_ms,
        deadline_ms: None,
        dispatched: true,
        caller: None,
        idempotency_key: None,
    }
}

#[test]
fn every_tool_gets_a_row_and_a_misread_one_is_named() {
    let plant = closedloop_plant::parse(PLANT, "plant.toml", std::path::Path::new("/tmp")).unwrap();
    let mut report = Report::of(&closedloop_plant::JournalView::of(&plant));
    for r in [
        row("switch", "completed", None, 20),
        row("switch", "completed", None, 40),
        row("switch", "rejected", Some("INVALID_PARAMS"), 0),
        row("switch", "rejected", Some("INVALID_PARAMS"), 0),
        row("switch", "failed", Some("FEEDBACK_MISMATCH"), 1_500),
        row("raw_write", "sent", None, 3),
        row("dim", "cancelled", Some("CANCELLED"), 3),
    ] {
        report.add(&r);
    }
    let out = report.render("/srv/plant.toml", 1_795_968_000_123);
    let expected = "\
/srv/plant.toml: 7 call(s) since 2026-11-29T16:00:00.123Z, 5 accepted, 2 rejected

tool                         calls  accepted  completed  failed  timeout  sent  cancelled  open  rejected  INVALID_PARAMS   to truth
lamp_switch                      5         3          2       1        0     0          0     0         2             40%  40 ms (3)
lamp_pulse                       0         0          0       0        0     0          0     0         0               -          -
lamp_dim (not in the plant)      1         1          0       0        0     0          1     0         0              0%          -
modbus_write lamp                1         1          0       0        0     1          0     0         0              0%          -

by code
  lamp_switch: rejected INVALID_PARAMS 2, failed FEEDBACK_MISMATCH 1
  lamp_dim (not in the plant): cancelled CANCELLED 1

lamp_switch: 2 of 5 calls (40%) refused INVALID_PARAMS: its parameters or description may confuse the model (`closedloop lint` names likely causes)
";
    assert!(out.starts_with(expected), "{out}");
    assert!(out[expected.len()..].starts_with("\nto truth: "), "{out}");
}

#[test]
fn durations_read_in_their_own_unit() {
    assert_eq!(duration(35), "35 ms");
    assert_eq!(duration(1_234), "1.2 s");
    assert_eq!(duration(270_000), "4.5 min");
}
