//! A head kept outside the journal (`journal verify --head SEQ:HASH`) against an intruder with
//! write access who leaves a chain that checks out on its own: every hash nulled ("legacy"), an
//! event edited and the chain recomputed from it, rows deleted at the end with the reserved
//! `seq` reset, a fake prune. Each is intact, or at most broken otherwise, by itself; each
//! differs from the head kept elsewhere.

use crate::Journal;
use crate::store::fixtures::{self, file_journal, recompute_from};
use crate::{Break, VerifyReport};

async fn journal_of_three(dir: &tempfile::TempDir) -> (Journal, (i64, String)) {
    let j = file_journal(dir).await;
    for k in 1..=3 {
        let row = fixtures::row(&format!("c{k}"), "relay", "completed", 10);
        let events = [fixtures::ev(7, "received"), fixtures::ev(8, "completed")];
        j.insert(&row, &events).await.unwrap();
    }
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    let head = report.head.clone().expect("a head");
    (j, head)
}

async fn sql(j: &Journal, statement: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(&j.sqlite().writer)
        .await
        .unwrap();
}

fn differs(r: &VerifyReport) -> String {
    let b = r.broken.as_ref().expect("broken");
    assert_eq!(b.kind, Break::HeadDiffers, "{b:?}");
    b.detail.clone()
}

#[tokio::test]
async fn a_chain_recomputed_after_an_edit_checks_out_alone_but_not_against_a_kept_head() {
    let dir = tempfile::tempdir().unwrap();
    let (j, head) = journal_of_three(&dir).await;
    sql(
        &j,
        "UPDATE events SET data = '{\"forged\":true}' WHERE seq = 2",
    )
    .await;
    recompute_from(&j, 1).await;
    assert!(
        j.verify().await.unwrap().intact(),
        "a forgery the chain alone cannot show"
    );
    let detail = differs(&j.verify_heads(std::slice::from_ref(&head)).await.unwrap());
    assert!(detail.contains("was rewritten"), "{detail}");
}

#[tokio::test]
async fn hashes_nulled_as_legacy_differ_from_a_kept_head() {
    let dir = tempfile::tempdir().unwrap();
    let (j, head) = journal_of_three(&dir).await;
    sql(&j, "UPDATE events SET hash = NULL, prev_hash = NULL").await;
    let r = j.verify_heads(&[head]).await.unwrap();
    assert!(!r.intact(), "{r:?}");
}

#[tokio::test]
async fn rows_cut_off_the_end_and_a_fake_prune_differ_from_a_kept_head() {
    let dir = tempfile::tempdir().unwrap();
    let (j, head) = journal_of_three(&dir).await;
    sql(
        &j,
        &format!("DELETE FROM events WHERE seq >= {}", head.0 - 1),
    )
    .await;
    sql(
        &j,
        &format!(
            "UPDATE sqlite_sequence SET seq = {} WHERE name = 'events'",
            head.0 - 2
        ),
    )
    .await;
    let detail = differs(&j.verify_heads(std::slice::from_ref(&head)).await.unwrap());
    assert!(detail.contains("were deleted"), "{detail}");
    // A head below a prune anchor: pruned since, or deleted by someone who wrote the anchor.
    let dir = tempfile::tempdir().unwrap();
    let (j, _) = journal_of_three(&dir).await;
    let first: (i64, String) = sqlx::query_as("SELECT seq, hash FROM events WHERE seq = 2")
        .fetch_one(&j.sqlite().writer)
        .await
        .unwrap();
    sql(&j, "DELETE FROM events WHERE seq <= 2").await;
    let prev: String = sqlx::query_scalar("SELECT prev_hash FROM events WHERE seq = 3")
        .fetch_one(&j.sqlite().writer)
        .await
        .unwrap();
    sql(
        &j,
        &format!("INSERT INTO chain_anchor (id, seq, prev_hash) VALUES (1, 3, '{prev}')"),
    )
    .await;
    let detail = differs(&j.verify_heads(&[first]).await.unwrap());
    assert!(detail.contains("below the prune anchor"), "{detail}");
}
