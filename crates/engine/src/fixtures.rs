//! Rows for unit tests: a command of the lamp's `switch`, as the journal would hold it.

use closedloop_journal::CommandRow;

/// A `lamp.switch` command `id` in `status`, accepted at 0 ms and never dispatched.
pub(crate) fn row(id: &str, status: &str) -> CommandRow {
    CommandRow {
        command_id: id.into(),
        request_id: format!("req-{id}"),
        device: "lamp".into(),
        action: "switch".into(),
        params: serde_json::json!({}),
        status: status.into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: serde_json::json!({}),
        readback_matched: None,
        accepted_at_ms: 0,
        updated_at_ms: 0,
        deadline_ms: None,
        dispatched: false,
        caller: None,
        idempotency_key: None,
    }
}
