//! The keyed chain (`[server] journal_key`) against an intruder who can write the journal but
//! not read the key: an edit with the chain recomputed from its start, or from the edit on,
//! hashes unkeyed and `verify_keyed` says so; a journal keyed part-way checks its old rows as
//! before and its new ones under the key.

use crate::store::fixtures::{self, recompute_from};
use crate::{Break, Journal, JournalKey, VerifyReport};

fn key() -> JournalKey {
    JournalKey::new("k3y-0f-the-plant-kept-in-its-env").unwrap()
}

fn url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("j.db").display())
}

/// Commands `c{from}`…`c{to}` journaled by `j`, two events each.
async fn journal(j: &Journal, from: u32, to: u32) {
    for k in from..=to {
        let row = fixtures::row(&format!("c{k}"), "relay", "completed", 10);
        let events = [fixtures::ev(7, "received"), fixtures::ev(8, "completed")];
        j.insert(&row, &events).await.unwrap();
    }
}

async fn sql(j: &Journal, statement: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&j.sqlite().writer)
        .await
        .unwrap();
}

fn broken(r: &VerifyReport) -> (Break, i64, String) {
    let b = r.broken.as_ref().expect("broken");
    (b.kind, b.seq, b.detail.clone())
}

#[tokio::test]
async fn a_keyed_journal_verifies_with_its_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    journal(&j, 1, 3).await;
    let r = j.verify_keyed(&[], &key()).await.unwrap();
    assert!(r.intact(), "{r:?}");
    assert_eq!(
        (r.checked, r.keyed_from, r.covered_from),
        (6, Some(1), Some(1))
    );
    let (kind, seq, detail) = broken(&j.verify().await.unwrap());
    assert_eq!((kind, seq), (Break::ContentChanged, 1));
    assert!(detail.contains("verify with it"), "{detail}");
    let wrong = JournalKey::new("not-the-key-of-this-plant").unwrap();
    let (kind, seq, _) = broken(&j.verify_keyed(&[], &wrong).await.unwrap());
    assert_eq!((kind, seq), (Break::ContentChanged, 1));
}

#[tokio::test]
async fn an_edit_recomputed_without_the_key_is_unkeyed() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    journal(&j, 1, 3).await;
    sql(
        &j,
        "UPDATE events SET data = '{\"forged\":true}' WHERE seq = 4",
    )
    .await;
    // From the edit on: the rows before are keyed, the forged ones are not.
    recompute_from(&j, 4).await;
    let (kind, seq, detail) = broken(&j.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::Unkeyed, 4), "{detail}");
    assert!(
        detail.contains("after rows hashed with it (from seq 1)"),
        "{detail}"
    );
    // From the start: every row unkeyed, which checks out without the key.
    recompute_from(&j, 1).await;
    assert!(j.verify().await.unwrap().intact());
    let (kind, seq, detail) = broken(&j.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::Unkeyed, 6), "{detail}");
    assert!(
        detail.contains("rewritten by someone without the key"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_journal_keyed_part_way_checks_old_rows_unkeyed_and_new_ones_keyed() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(&url(&dir)).await.unwrap();
    journal(&j, 1, 2).await;
    j.close().await;
    // The key is set, but no command journaled since: the newest row is unkeyed.
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    let (kind, seq, detail) = broken(&j.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::Unkeyed, 4));
    assert!(detail.contains("no gateway has journaled a command since the key was set"));
    journal(&j, 3, 3).await;
    let r = j.verify_keyed(&[], &key()).await.unwrap();
    assert!(r.intact(), "{r:?}");
    assert_eq!(
        (r.checked, r.covered_from, r.keyed_from),
        (6, Some(1), Some(5))
    );
    // An unkeyed gateway writing after keyed rows: the next row is unkeyed.
    j.close().await;
    let plain = Journal::open(&url(&dir)).await.unwrap();
    journal(&plain, 4, 4).await;
    let (kind, seq, _) = broken(&plain.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::Unkeyed, 7));
}

/// A verify without the key of a journal keyed part-way breaks at its first keyed row, and says
/// to verify with the key there too (not only when the very first row fails); with the key, an
/// edited row before any keyed one quotes both hashes it could have had.
#[tokio::test]
async fn a_verify_without_the_key_names_the_key_at_the_first_keyed_row_of_any_journal() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(&url(&dir)).await.unwrap();
    journal(&j, 1, 2).await;
    j.close().await;
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    journal(&j, 3, 3).await;
    let (kind, seq, detail) = broken(&j.verify().await.unwrap());
    assert_eq!((kind, seq), (Break::ContentChanged, 5), "{detail}");
    assert!(
        detail.contains("verify with it: keyed rows need the key"),
        "{detail}"
    );
    // With the key, an edit of an unkeyed row (before the first keyed one).
    sql(
        &j,
        "UPDATE events SET data = '{\"forged\":true}' WHERE seq = 2",
    )
    .await;
    let (kind, seq, detail) = broken(&j.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::ContentChanged, 2), "{detail}");
    assert!(
        detail.contains(" with the journal key), not to its stored"),
        "{detail}"
    );
    assert!(!detail.contains("verify with it"), "{detail}");
}

#[tokio::test]
async fn hashes_nulled_in_a_keyed_journal_do_not_pass_for_legacy_rows() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    journal(&j, 1, 2).await;
    sql(&j, "UPDATE events SET hash = NULL, prev_hash = NULL").await;
    let r = j.verify().await.unwrap();
    assert!(r.intact() && r.legacy == 4, "by itself it passes: {r:?}");
    let (kind, seq, detail) = broken(&j.verify_keyed(&[], &key()).await.unwrap());
    assert_eq!((kind, seq), (Break::Unkeyed, 4), "{detail}");
    assert!(detail.contains("its hashes removed"), "{detail}");
}

#[tokio::test]
async fn every_event_deleted_is_rows_missing_at_the_end_keyed_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    journal(&j, 1, 3).await;
    sql(&j, "PRAGMA foreign_keys = OFF; DELETE FROM events").await;
    for r in [
        j.verify().await.unwrap(),
        j.verify_keyed(&[], &key()).await.unwrap(),
    ] {
        let (kind, seq, detail) = broken(&r);
        assert_eq!((kind, seq), (Break::Truncated, 6), "{detail}");
    }
}

#[tokio::test]
async fn a_pruned_journal_counts_a_row_without_events_as_not_covered() {
    // A prune deletes events and then rows, in two transactions: a verify between them sees
    // finished rows without events. In a pruned journal that is no proof of an insertion.
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(&url(&dir)).await.unwrap();
    for (id, at) in [("c1", 10), ("c2", 10), ("c3", 100)] {
        let row = fixtures::row(id, "relay", "completed", at);
        let events = [fixtures::ev(at, "received"), fixtures::ev(at, "completed")];
        j.insert(&row, &events).await.unwrap();
    }
    assert!(j.prune(50).await.unwrap() > 0);
    sql(
        &j,
        "INSERT INTO commands (command_id, request_id, device, action, params, status,
         verified, verification, evidence, accepted_at_ms, updated_at_ms, dispatched)
         VALUES ('c0', 'r', 'relay', 'switch', '{}', 'completed', 1, 'feedback', '{}', 5, 5, 1)",
    )
    .await;
    let r = j.verify().await.unwrap();
    assert!(r.intact(), "{r:?}");
    assert_eq!((r.rows_checked, r.rows_uncovered), (1, 1));
}

#[tokio::test]
async fn a_dropped_anchor_table_does_not_turn_the_chain_into_legacy_rows() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(&url(&dir)).await.unwrap();
    journal(&j, 1, 2).await;
    sql(&j, "DROP TABLE chain_anchor").await;
    let (kind, seq, detail) = broken(&j.verify().await.unwrap());
    assert_eq!((kind, seq), (Break::LinkBroken, 0));
    assert!(detail.contains("chain_anchor table is gone"), "{detail}");
}

#[tokio::test]
async fn a_pruned_keyed_journal_verifies_with_its_key_from_the_anchor() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_keyed(&url(&dir), Some(key())).await.unwrap();
    for (id, at) in [("c1", 10), ("c2", 10), ("c3", 100)] {
        let row = fixtures::row(id, "relay", "completed", at);
        let events = [fixtures::ev(at, "received"), fixtures::ev(at, "completed")];
        j.insert(&row, &events).await.unwrap();
    }
    assert!(j.prune(50).await.unwrap() > 0);
    let r = j.verify_keyed(&[], &key()).await.unwrap();
    assert!(r.intact(), "{r:?}");
    assert_eq!((r.checked, r.keyed_from, r.rows_checked), (2, Some(5), 1));
    assert!(r.anchor.is_some());
}
