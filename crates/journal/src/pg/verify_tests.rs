//! The chain over command rows on PostgreSQL (`CLOSEDLOOP_PG_URL`; each test a database of its
//! own): an untouched journal verifies with every row checked, an edit of each covered field of
//! a command row or of its confirmation is named with its command, and a journal written with
//! the v1 encoding (and not yet migrated) still verifies and says where the coverage starts.

use super::test_db::Database;
use crate::chain::{GENESIS, event_hash};
use crate::store::fixtures::{self, ROW_EDITS, ev, row, row_changed};
use crate::{Break, Journal, VerifyReport};

/// The first break's `(seq, command, kind, detail)`.
fn broken(r: &VerifyReport) -> (i64, Option<&str>, Break, &str) {
    let b = r.broken.as_ref().expect("a break");
    (b.seq, b.command_id.as_deref(), b.kind, b.detail.as_str())
}

#[tokio::test]
async fn an_edit_of_each_covered_field_or_a_confirmation_is_named_on_postgres() {
    let Some(db) = Database::create("row_edits").await else {
        return;
    };
    let j = db.journal().await;
    fixtures::three_confirmed_commands(&j).await;
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.checked, report.covered_from), (9, Some(1)));
    assert_eq!((report.rows_checked, report.rows_uncovered), (3, 0));
    for (fields, edit, undo) in ROW_EDITS {
        db.sql(&format!(
            "UPDATE commands SET {edit} WHERE command_id = 'c2'"
        ))
        .await;
        let report = j.verify().await.unwrap();
        let detail = row_changed(fields);
        assert_eq!(
            broken(&report),
            (6, Some("c2"), Break::RowChanged, detail.as_str()),
            "{edit}"
        );
        db.sql(&format!(
            "UPDATE commands SET {undo} WHERE command_id = 'c2'"
        ))
        .await;
        assert!(j.verify().await.unwrap().intact(), "{undo}");
    }
    db.sql(r#"UPDATE events SET data = '{"confirmed_by":"mallory"}' WHERE seq = 5"#)
        .await;
    let report = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&report);
    assert_eq!((seq, command, kind), (5, Some("c2"), Break::ContentChanged));
    j.close().await;
    db.drop().await;
}

/// `c0`'s row and three events hashed with the v1 encoding, the chain's head after them, and
/// the schema as it was before row digests: what an old gateway left.
fn v1_rows() -> String {
    let mut sql = String::from(
        "INSERT INTO commands (command_id, request_id, device, action, params, status, verified,
            verification, evidence, accepted_at_ms, updated_at_ms, dispatched, caller)
         VALUES ('c0', 'r0', 'lamp', 'switch', '{}', 'completed', false, 'feedback', '{}', 1, 1,
            false, 'ops');",
    );
    let mut prev = GENESIS.to_string();
    for (seq, event) in (1..).zip(["received", "accepted", "completed"]) {
        let hash = event_hash(&prev, seq, "c0", 1, event, "null");
        sql += &format!(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash)
             VALUES ({seq}, 'c0', 1, '{event}', 'null', '{prev}', '{hash}');"
        );
        prev = hash;
    }
    sql += &format!(
        "UPDATE chain_head SET seq = 3, hash = '{prev}';
         ALTER TABLE events DROP COLUMN row_digest;
         DELETE FROM schema_version WHERE version = 11;"
    );
    sql
}

#[tokio::test]
async fn a_v1_postgres_journal_verifies_and_says_where_the_rows_coverage_starts() {
    let Some(db) = Database::create("v1_rows").await else {
        return;
    };
    db.journal().await.close().await;
    db.sql(&v1_rows()).await;
    // Read-only, nothing is migrated: all v1, the row not covered yet.
    let old = Journal::open_read_only(&db.url).await.unwrap();
    let report = old.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.v1, report.covered_from),
        (3, 3, None)
    );
    assert_eq!((report.rows_checked, report.rows_uncovered), (0, 1));
    old.close().await;
    // A gateway of this version migrates and writes: v2 from seq 4.
    let j = db.journal().await;
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
    db.sql("UPDATE commands SET params = '{\"on\":false}' WHERE command_id = 'c1'")
        .await;
    let report = j.verify().await.unwrap();
    let detail = "field params differs from what the chain recorded at seq 5";
    assert_eq!(broken(&report), (5, Some("c1"), Break::RowChanged, detail));
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_command_row_inserted_or_deleted_afterwards_is_named_on_postgres() {
    let Some(db) = Database::create("row_insert_delete").await else {
        return;
    };
    let j = db.journal().await;
    fixtures::three_confirmed_commands(&j).await;
    db.sql(
        "INSERT INTO commands (command_id, request_id, caller, device, action, params,
         idempotency_key, status, verified, verification, error_code, detail, hint,
         readback_matched, evidence, accepted_at_ms, updated_at_ms, deadline_ms, dispatched)
         SELECT 'c0-forged', request_id, caller, device, action, params, NULL, status, verified,
         verification, error_code, detail, hint, readback_matched, evidence, accepted_at_ms,
         updated_at_ms, deadline_ms, dispatched FROM commands WHERE command_id = 'c1'",
    )
    .await;
    let r = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&r);
    assert_eq!(
        (seq, command, kind),
        (0, Some("c0-forged"), Break::RowInserted)
    );
    db.sql("DELETE FROM commands WHERE command_id = 'c0-forged'")
        .await;
    // Whoever can write the tables can drop the constraint that keeps c2's events to its row.
    db.sql("ALTER TABLE events DROP CONSTRAINT IF EXISTS events_command_id_fkey")
        .await;
    db.sql("DELETE FROM commands WHERE command_id = 'c2'").await;
    let r = j.verify().await.unwrap();
    let (seq, command, kind, _) = broken(&r);
    assert_eq!((seq, command, kind), (5, Some("c2"), Break::RowMissing));
    j.close().await;
    db.drop().await;
}
