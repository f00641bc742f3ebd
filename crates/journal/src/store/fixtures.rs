//! Rows and journals the store's tests share, so each test names only what it is about.

use crate::Journal;
use crate::{CommandRow, EventRow};
use serde_json::json;

/// A switch command on `device` in `status`, accepted and last updated at `at`, by caller `stdio`.
pub(crate) fn row(id: &str, device: &str, status: &str, at: i64) -> CommandRow {
    CommandRow {
        command_id: id.into(),
        request_id: format!("req_{id}"),
        device: device.into(),
        action: "switch".into(),
        params: json!({"on": true}),
        status: status.into(),
        verified: false,
        verification: "feedback".into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: json!({}),
        readback_matched: None,
        accepted_at_ms: at,
        updated_at_ms: at,
        deadline_ms: None,
        dispatched: false,
        caller: Some("stdio".into()),
        idempotency_key: None,
    }
}

/// A timeline event named `event` at `at`, with no data.
pub(crate) fn ev(at: i64, event: &str) -> EventRow {
    EventRow {
        at_ms: at,
        event: event.into(),
        data: serde_json::Value::Null,
    }
}

/// A journal in a file `j.db` under `dir`, opened read-write.
pub(crate) async fn file_journal(dir: &tempfile::TempDir) -> Journal {
    Journal::open(&format!("sqlite://{}", dir.path().join("j.db").display()))
        .await
        .unwrap()
}
