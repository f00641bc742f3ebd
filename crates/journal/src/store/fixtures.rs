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

/// Commands `c1`, `c2`, `c3` as the engine journals them — inserted with `received` and an
/// `accepted` confirmed by `alice`, then `completed` and verified — caller `ops`, idempotency
/// key `k1`…`k3`: `c{k}` holds seq 3k-2 to 3k, its row's digest recorded at seq 3k.
pub(crate) async fn three_confirmed_commands(j: &Journal) {
    for k in 1..=3 {
        let mut c = row(&format!("c{k}"), "lamp", "accepted", k);
        c.caller = Some("ops".into());
        c.idempotency_key = Some(format!("k{k}"));
        let mut accepted = ev(k, "accepted");
        accepted.data = json!({"confirmed_by": "alice"});
        j.insert(&c, &[ev(k, "received"), accepted]).await.unwrap();
        c.status = "completed".into();
        c.verified = true;
        j.update(&c, &[ev(k, "completed")]).await.unwrap();
    }
}

/// An edit of each covered field of `c2` (see [`three_confirmed_commands`]), in SQL that both
/// stores take: `(the fields verify names, SET clause, SET clause that undoes it)`.
pub(crate) const ROW_EDITS: [(&[&str], &str, &str); 10] = [
    (&["caller"], "caller = 'viewer'", "caller = 'ops'"),
    (&["caller"], "caller = NULL", "caller = 'ops'"),
    (&["device"], "device = 'saw'", "device = 'lamp'"),
    (&["action"], "action = 'home'", "action = 'switch'"),
    (
        &["params"],
        r#"params = '{"on":false}'"#,
        r#"params = '{"on":true}'"#,
    ),
    (
        &["idempotency_key"],
        "idempotency_key = 'k9'",
        "idempotency_key = 'k2'",
    ),
    (&["status"], "status = 'failed'", "status = 'completed'"),
    (
        &["error_code"],
        "error_code = 'TIMEOUT'",
        "error_code = NULL",
    ),
    (
        &["verified"],
        "verified = NOT verified",
        "verified = NOT verified",
    ),
    (
        &["status", "error_code"],
        "status = 'failed', error_code = 'TIMEOUT'",
        "status = 'completed', error_code = NULL",
    ),
];

/// What verify says of `c2` with the fields `fields` edited (its digest is at seq 6).
pub(crate) fn row_changed(fields: &[&str]) -> String {
    match fields {
        [one] => format!("field {one} differs from what the chain recorded at seq 6"),
        _ => format!(
            "fields {} differ from what the chain recorded at seq 6",
            fields.join(" and ")
        ),
    }
}

/// Every row's hash from `from_seq` on recomputed unkeyed (v2), linked to the row before: the
/// forgery of someone who knows the (public) chain rule and can write the table, not the key.
pub(crate) async fn recompute_from(j: &Journal, from_seq: i64) {
    /// seq, command_id, at_ms, event, data, row_digest, prev_hash.
    type Row = (i64, String, i64, String, String, Option<String>, String);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT seq, command_id, at_ms, event, data, row_digest, prev_hash FROM events
         WHERE seq >= ? ORDER BY seq",
    )
    .bind(from_seq)
    .fetch_all(&j.sqlite().writer)
    .await
    .unwrap();
    let mut prev = rows
        .first()
        .map_or(crate::chain::GENESIS.to_string(), |r| r.6.clone());
    for (seq, id, at, event, data, digest, _) in rows {
        let hash =
            crate::chain::event_hash_v2(&prev, seq, &id, at, &event, &data, digest.as_deref());
        sqlx::query("UPDATE events SET hash = ?, prev_hash = ? WHERE seq = ?")
            .bind(&hash)
            .bind(&prev)
            .bind(seq)
            .execute(&j.sqlite().writer)
            .await
            .unwrap();
        prev = hash;
    }
}
