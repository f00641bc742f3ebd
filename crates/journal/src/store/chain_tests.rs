//! The hash chain against SQLite itself: intact after group commit; each kind of tampering named
//! by `verify`; prune deleting a prefix that `verify` checks from its anchor; rows written before
//! the chain counted as a legacy prefix.

use super::*;
use crate::Journal;
use crate::chain::{GENESIS, event_hash_v2};
use crate::store::fixtures::{self, file_journal};
use crate::{Break, CommandRow, EventRow, VerifyReport};

fn row(id: &str, status: &str, updated_at_ms: i64) -> CommandRow {
    fixtures::row(id, "relay", status, updated_at_ms)
}

fn ev(event: &str) -> EventRow {
    fixtures::ev(7, event)
}

/// Commands `c1`..`cN`, each with the events `received` and `accepted`: `c{k}` holds seq 2k-1
/// and 2k.
async fn two_events_each(j: &Journal, n: usize, status: &str, updated_at_ms: i64) {
    for k in 1..=n {
        j.insert(
            &row(&format!("c{k}"), status, updated_at_ms),
            &[ev("received"), ev("accepted")],
        )
        .await
        .unwrap();
    }
}

async fn sql(j: &Journal, statement: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&j.sqlite().writer)
        .await
        .unwrap();
}

/// The first broken link's `(seq, command, kind)`.
fn broken(r: &VerifyReport) -> (i64, Option<&str>, Break) {
    let b = r.broken.as_ref().expect("a broken link");
    (b.seq, b.command_id.as_deref(), b.kind)
}

#[tokio::test]
async fn the_chain_is_intact_after_many_group_committed_writes() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let writes = (0..300).map(|i| {
        let j = j.clone();
        tokio::spawn(async move {
            let mut c = row(&format!("c{i}"), "accepted", 1);
            j.insert(&c, &[ev("received"), ev("accepted")]).await?;
            c.status = "completed".into();
            j.update(&c, &[ev("completed")]).await
        })
    });
    for w in writes.collect::<Vec<_>>() {
        w.await.unwrap().unwrap();
    }
    let (taken, commits) = j.write_counts();
    assert!(commits < taken, "nothing was grouped: {commits} commits");
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.legacy, report.anchor),
        (900, 0, None)
    );
    assert_eq!(report.head.as_ref().unwrap().0, 900);
    // The first rows are re-checkable by the documented encoding, from GENESIS: the first
    // entry of an insert carries no row digest, the last one does.
    type Row = (String, String, String, String, String, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT command_id, event, data, hash, prev_hash, row_digest FROM events
         WHERE seq <= 2 ORDER BY seq",
    )
    .fetch_all(&j.sqlite().writer)
    .await
    .unwrap();
    let mut expected = GENESIS.to_string();
    for (seq, (id, event, data, hash, prev, digest)) in (1..).zip(rows) {
        assert_eq!(prev, expected);
        assert_eq!(digest.is_some(), seq == 2, "seq {seq}");
        let again = event_hash_v2(&prev, seq, &id, 7, &event, &data, digest.as_deref());
        assert_eq!(hash, again);
        expected = hash;
    }
}

#[tokio::test]
async fn an_edited_event_is_named_by_its_seq_as_content_changed() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    two_events_each(&j, 3, "completed", 1).await;
    sql(
        &j,
        r#"UPDATE events SET data = '{"on":false}' WHERE seq = 4"#,
    )
    .await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (4, Some("c2"), Break::ContentChanged));
    assert_eq!(report.checked, 3);
    // Re-hashing the edited row moves the break to the next link.
    let (prev, data, digest): (String, String, Option<String>) =
        sqlx::query_as("SELECT prev_hash, data, row_digest FROM events WHERE seq = 4")
            .fetch_one(&j.sqlite().writer)
            .await
            .unwrap();
    let forged = event_hash_v2(&prev, 4, "c2", 7, "accepted", &data, digest.as_deref());
    sql(
        &j,
        &format!("UPDATE events SET hash = '{forged}' WHERE seq = 4"),
    )
    .await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (5, Some("c3"), Break::LinkBroken));
}

#[tokio::test]
async fn a_deleted_middle_event_breaks_the_next_link_and_a_cut_tail_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    two_events_each(&j, 3, "completed", 1).await;
    sql(&j, "DELETE FROM events WHERE seq = 6").await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (6, None, Break::Truncated));
    assert_eq!(report.head.as_ref().unwrap().0, 5);
    sql(&j, "DELETE FROM events WHERE seq = 3").await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (4, Some("c2"), Break::LinkBroken));
    assert!(
        report.broken.unwrap().detail.contains("seq 2"),
        "names the row before"
    );
}

#[tokio::test]
async fn prune_deletes_a_prefix_and_verify_checks_from_its_anchor() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    // seq 1-2, 3-4, 5-6, 7-8.
    for (id, status, at) in [
        ("old-done", "completed", 100),
        ("old-running", "running", 100),
        ("old-done-later", "completed", 100),
        ("new-done", "completed", 5_000),
    ] {
        j.insert(&row(id, status, at), &[ev("received"), ev(status)])
            .await
            .unwrap();
    }
    assert_eq!(
        j.prune(1_000).await.unwrap(),
        1,
        "only the prefix before old-running"
    );
    assert!(j.get("old-done-later").await.unwrap().is_some(), "waits");
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    let anchor = report.anchor.clone().unwrap();
    assert_eq!((anchor.seq, report.checked), (3, 6));
    // old-running ends (seq 9): the line moves to new-done's first event (seq 7), so
    // old-done-later goes while old-running, with an event above the line, waits.
    let mut done = row("old-running", "completed", 200);
    done.accepted_at_ms = 100;
    j.update(&done, &[ev("completed")]).await.unwrap();
    assert_eq!(j.prune(1_000).await.unwrap(), 1);
    assert!(j.get("old-done-later").await.unwrap().is_none());
    assert_eq!(j.events("old-running").await.unwrap().len(), 1);
    // The writer's chain continues past the prune.
    j.insert(&row("after", "accepted", 6_000), &[ev("accepted")])
        .await
        .unwrap();
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.anchor.unwrap().seq, report.checked), (7, 4));
    // The first row after the anchor is as protected as any other.
    sql(&j, "DELETE FROM events WHERE seq = 7").await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (8, Some("new-done"), Break::LinkBroken));
}

#[tokio::test]
async fn a_prune_of_everything_leaves_an_anchor_the_next_event_links_to() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    two_events_each(&j, 2, "completed", 1).await;
    assert_eq!(j.prune(1_000).await.unwrap(), 2);
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.anchor.unwrap().seq, report.checked), (5, 0));
    j.close().await;
    // A restart loads the head from the anchor.
    let j = file_journal(&dir).await;
    j.insert(&row("next", "accepted", 9), &[ev("accepted")])
        .await
        .unwrap();
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.head.unwrap().0, report.checked), (5, 1));
}

/// A journal as the schema before the chain left it: `c0` with three events, no hashes.
async fn legacy_journal(path: &std::path::Path) {
    let url = format!("sqlite://{}", path.display());
    let options = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    sqlx::raw_sql("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    for (version, sql) in &MIGRATIONS[..2] {
        sqlx::raw_sql(*sql).execute(&pool).await.unwrap();
        sqlx::query("INSERT INTO schema_version (version) VALUES (?)")
            .bind(version)
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::raw_sql(
        "INSERT INTO commands VALUES ('c0', 'r0', 'relay', 'switch', '{}', 'completed', 0,
            'feedback', NULL, NULL, NULL, '{}', NULL, 1, 1, NULL, 0, 'ops', NULL);
         INSERT INTO events (command_id, at_ms, event, data) VALUES
            ('c0', 1, 'received', 'null'), ('c0', 1, 'accepted', 'null'),
            ('c0', 1, 'completed', 'null');",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

#[tokio::test]
async fn rows_written_before_the_chain_are_a_legacy_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    legacy_journal(&path).await;
    let url = format!("sqlite://{}", path.display());
    // Read-only, the journal is not migrated: all legacy, nothing broken.
    let old = Journal::open_read_only(&url).await.unwrap();
    let report = old.verify().await.unwrap();
    assert_eq!(
        (report.legacy, report.checked, report.intact()),
        (3, 0, true)
    );
    old.close().await;
    let j = file_journal(&dir).await;
    j.insert(&row("c1", "accepted", 2), &[ev("received"), ev("accepted")])
        .await
        .unwrap();
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.legacy, report.checked), (3, 2));
    let first: String = sqlx::query_scalar("SELECT prev_hash FROM events WHERE seq = 4")
        .fetch_one(&j.sqlite().writer)
        .await
        .unwrap();
    assert_eq!(first, GENESIS, "the chain begins after the legacy rows");
    // Pruning through the legacy rows anchors on a row without a hash.
    assert_eq!(j.prune(10).await.unwrap(), 1);
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.legacy, report.checked), (0, 2));
    assert_eq!(
        report.anchor.unwrap(),
        Anchor {
            seq: 4,
            prev_hash: None
        }
    );
    // Once the chain began, a row without a hash is a break.
    sql(&j, "UPDATE events SET hash = NULL WHERE seq = 5").await;
    let report = j.verify().await.unwrap();
    assert_eq!(broken(&report), (5, Some("c1"), Break::Unhashed));
}
