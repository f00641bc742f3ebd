//! The chain over command rows against SQLite itself: an untouched journal verifies with every
//! row checked; an edit of each covered field of a command row, or of the event that records
//! its confirmation, is named with its command; a write without entries is given one that
//! carries its row; a journal written with the v1 encoding still verifies and says where the
//! rows' coverage starts.

use super::*;
use crate::chain::{GENESIS, event_hash};
use crate::store::fixtures::{self, ROW_EDITS, ev, file_journal, row, row_changed};
use crate::{Break, Journal, VerifyReport};

async fn sql(j: &Journal, statement: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&j.sqlite().writer)
        .await
        .unwrap();
}

/// The first break's `(seq, command, kind, detail)`.
fn broken(r: &VerifyReport) -> (i64, Option<&str>, Break, &str) {
    let b = r.broken.as_ref().expect("a break");
    (b.seq, b.command_id.as_deref(), b.kind, b.detail.as_str())
}

#[tokio::test]
async fn an_untouched_journal_verifies_every_event_and_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    fixtures::three_confirmed_commands(&j).await;
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.v1, report.covered_from),
        (9, 0, Some(1))
    );
    assert_eq!((report.rows_checked, report.rows_uncovered), (3, 0));
    // Only the last entry of each write carries its row's digest.
    let stamped: Vec<i64> =
        sqlx::query_scalar("SELECT seq FROM events WHERE row_digest IS NOT NULL ORDER BY seq")
            .fetch_all(&j.sqlite().writer)
            .await
            .unwrap();
    assert_eq!(stamped, [2, 3, 5, 6, 8, 9]);
}

#[tokio::test]
async fn an_edit_of_each_covered_field_names_the_command_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    fixtures::three_confirmed_commands(&j).await;
    for (fields, edit, undo) in ROW_EDITS {
        sql(
            &j,
            &format!("UPDATE commands SET {edit} WHERE command_id = 'c2'"),
        )
        .await;
        let report = j.verify().await.unwrap();
        let detail = row_changed(fields);
        assert_eq!(
            broken(&report),
            (6, Some("c2"), Break::RowChanged, detail.as_str()),
            "{edit}"
        );
        assert_eq!((report.checked, report.rows_checked), (9, 1), "{edit}");
        sql(
            &j,
            &format!("UPDATE commands SET {undo} WHERE command_id = 'c2'"),
        )
        .await;
        assert!(j.verify().await.unwrap().intact(), "{undo}");
    }
}

#[tokio::test]
async fn an_edited_confirmation_is_named_as_its_event_of_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    fixtures::three_confirmed_commands(&j).await;
    sql(
        &j,
        r#"UPDATE events SET data = '{"confirmed_by":"mallory"}' WHERE seq = 5"#,
    )
    .await;
    let report = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&report);
    assert_eq!((seq, command, kind), (5, Some("c2"), Break::ContentChanged));
    // Rows are checked only once every event held.
    assert_eq!((report.checked, report.rows_checked), (4, 0));
}

#[tokio::test]
async fn a_write_without_entries_is_given_one_that_records_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let mut c = row("c1", "lamp", "accepted", 1);
    j.insert(&c, &[]).await.unwrap();
    c.status = "running".into();
    c.updated_at_ms = 2;
    j.update(&c, &[]).await.unwrap();
    // An appended entry carries no row: the row is checked against seq 2.
    j.append("c1", &[ev(3, "cancel_requested")]).await.unwrap();
    let names: Vec<(i64, String)> = j
        .events("c1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.at_ms, e.event))
        .collect();
    let state = |at: i64| (at, "state".to_string());
    assert_eq!(names, [state(1), state(2), (3, "cancel_requested".into())]);
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.rows_checked, 1);
    sql(&j, "UPDATE commands SET status = 'accepted'").await;
    let report = j.verify().await.unwrap();
    let detail = "field status differs from what the chain recorded at seq 2";
    assert_eq!(broken(&report), (2, Some("c1"), Break::RowChanged, detail));
}

/// A journal as the schema before row digests left it, written with the v1 encoding: `c0`
/// with three chained events and its row.
async fn v1_journal(path: &std::path::Path) {
    let url = format!("sqlite://{}", path.display());
    let options = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    sqlx::raw_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v <= 4) {
        sqlx::raw_sql(*sql).execute(&pool).await.unwrap();
        sqlx::query("INSERT INTO schema_version (version) VALUES (?)")
            .bind(version)
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::raw_sql(
        "INSERT INTO commands VALUES ('c0', 'r0', 'lamp', 'switch', '{}', 'completed', 0,
            'feedback', NULL, NULL, NULL, '{}', NULL, 1, 1, NULL, 0, 'ops', NULL);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut prev = GENESIS.to_string();
    for (seq, event) in (1..).zip(["received", "accepted", "completed"]) {
        let hash = event_hash(&prev, seq, "c0", 1, event, "null");
        sqlx::query(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash)
             VALUES (?, 'c0', 1, ?, 'null', ?, ?)",
        )
        .bind(seq)
        .bind(event)
        .bind(&prev)
        .bind(&hash)
        .execute(&pool)
        .await
        .unwrap();
        prev = hash;
    }
    pool.close().await;
}

#[tokio::test]
async fn a_v1_journal_verifies_and_says_where_the_rows_coverage_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    v1_journal(&path).await;
    let url = format!("sqlite://{}", path.display());
    // Read-only, the journal is not migrated (no `row_digest`): all v1, rows not covered yet.
    let old = Journal::open_read_only(&url).await.unwrap();
    let report = old.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.v1, report.covered_from),
        (3, 3, None)
    );
    assert_eq!((report.rows_checked, report.rows_uncovered), (0, 1));
    old.close().await;
    // Migrated and written to: the v2 chain continues the v1 one from seq 4.
    let j = file_journal(&dir).await;
    j.insert(
        &row("c1", "lamp", "accepted", 2),
        &[ev(2, "received"), ev(2, "accepted")],
    )
    .await
    .unwrap();
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.v1, report.covered_from),
        (5, 3, Some(4))
    );
    assert_eq!((report.rows_checked, report.rows_uncovered), (1, 1));
    // c0's row is not covered (counted, as said); c1's is.
    sql(
        &j,
        "UPDATE commands SET caller = 'viewer' WHERE command_id = 'c0'",
    )
    .await;
    assert!(j.verify().await.unwrap().intact());
    sql(
        &j,
        "UPDATE commands SET caller = 'viewer' WHERE command_id = 'c1'",
    )
    .await;
    let report = j.verify().await.unwrap();
    let detail = "field caller differs from what the chain recorded at seq 5";
    assert_eq!(broken(&report), (5, Some("c1"), Break::RowChanged, detail));
    sql(
        &j,
        "UPDATE commands SET caller = 'stdio' WHERE command_id = 'c1'",
    )
    .await;
    // A v1 event is still checked: an edit of one is named.
    sql(&j, "UPDATE events SET data = '{}' WHERE seq = 2").await;
    let report = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&report);
    assert_eq!((seq, command, kind), (2, Some("c0"), Break::ContentChanged));
}

#[tokio::test]
async fn a_v1_event_after_the_coverage_began_is_content_changed() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    fixtures::three_confirmed_commands(&j).await;
    // Someone appends an event hashed the old way, correctly linked: a downgrade.
    let head: String = sqlx::query_scalar("SELECT hash FROM events WHERE seq = 9")
        .fetch_one(&j.sqlite().writer)
        .await
        .unwrap();
    let forged = event_hash(&head, 10, "c3", 9, "completed", "null");
    sql(
        &j,
        &format!(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash)
             VALUES (10, 'c3', 9, 'completed', 'null', '{head}', '{forged}')"
        ),
    )
    .await;
    let report = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&report);
    assert_eq!(
        (seq, command, kind),
        (10, Some("c3"), Break::ContentChanged)
    );
}

#[tokio::test]
async fn a_row_read_back_and_updated_digests_as_it_was_stored() {
    // A gateway taking a command over updates the row it read from the journal, not the one
    // that was inserted: its params, written again, must be the text stored.
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let mut c = row("c1", "lamp", "accepted", 1);
    c.params = serde_json::json!({"z": 0.1, "a": [1e300, -0.0, 3], "é": "\u{1}\"q\"", "n": null});
    j.insert(&c, &[ev(1, "accepted")]).await.unwrap();
    let mut back = j.get("c1").await.unwrap().unwrap();
    back.status = "completed".into();
    j.update(&back, &[ev(2, "completed")]).await.unwrap();
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.rows_checked, 1);
}

#[tokio::test]
async fn a_command_row_inserted_or_deleted_afterwards_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    fixtures::three_confirmed_commands(&j).await;
    // A forged command row, copied from c1 under another id: no event names it.
    sql(
        &j,
        "INSERT INTO commands (command_id, request_id, caller, device, action, params,
         idempotency_key, status, verified, verification, error_code, detail, hint,
         readback_matched, evidence, accepted_at_ms, updated_at_ms, deadline_ms, dispatched)
         SELECT 'c0-forged', request_id, caller, device, action, params, NULL,
         status, verified, verification, error_code, detail, hint, readback_matched, evidence,
         accepted_at_ms, updated_at_ms, deadline_ms, dispatched
         FROM commands WHERE command_id = 'c1'",
    )
    .await;
    let r = j.verify().await.unwrap();
    let (seq, command, kind, detail) = broken(&r);
    assert_eq!(
        (seq, command, kind),
        (0, Some("c0-forged"), Break::RowInserted)
    );
    assert!(detail.contains("inserted afterwards"), "{detail}");
    sql(&j, "DELETE FROM commands WHERE command_id = 'c0-forged'").await;
    assert!(j.verify().await.unwrap().intact());
    // c2's row deleted (foreign keys off, as the sqlite3 shell has them): its events remain.
    let delete = "PRAGMA foreign_keys = OFF; DELETE FROM commands WHERE command_id = 'c2'";
    sql(&j, delete).await;
    let r = j.verify().await.unwrap();
    let (seq, command, kind, detail) = broken(&r);
    assert_eq!(
        (seq, command, kind),
        (5, Some("c2"), Break::RowMissing),
        "{detail}"
    );
    assert!(detail.contains("deleted afterwards"), "{detail}");
}
