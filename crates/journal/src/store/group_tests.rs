//! Group commit against SQLite itself: writes waiting together share a commit, each caller
//! hears its own outcome, and the writer outlives the runtime that opened the journal.

use super::*;
use crate::store::fixtures::{self, file_journal};
use crate::{CommandRow, EventRow};

fn row(id: &str) -> CommandRow {
    fixtures::row(id, "relay", "accepted", 1)
}

fn ev(event: &str) -> EventRow {
    fixtures::ev(1, event)
}

#[tokio::test]
async fn writes_waiting_together_share_one_commit_and_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let writes = (0..400).map(|i| {
        let j = j.clone();
        tokio::spawn(async move { j.insert(&row(&format!("c{i}")), &[ev("accepted")]).await })
    });
    for w in writes.collect::<Vec<_>>() {
        w.await.unwrap().unwrap();
    }
    let (taken, commits) = j.write_counts();
    assert_eq!(taken, 400);
    assert!(
        commits < 400,
        "400 writes in flight at once took {commits} commits: nothing was grouped"
    );
    for i in [0, 199, 399] {
        let id = format!("c{i}");
        let cmd = j.get(&id).await.unwrap().expect("committed");
        assert_eq!(cmd.command_id, id);
        assert_eq!(j.events(&id).await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_failing_write_fails_alone_and_its_batch_neighbours_land() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    j.insert(&row("taken"), &[]).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let j = j.clone();
        tasks.push(tokio::spawn(async move {
            match i % 3 {
                // A timeline entry of no command: the foreign key refuses it.
                0 => j.append("no-such-command", &[ev("signal")]).await,
                1 => j.insert(&row("taken"), &[ev("accepted")]).await,
                _ => j.insert(&row(&format!("ok{i}")), &[ev("accepted")]).await,
            }
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let outcome = t.await.unwrap();
        match i % 3 {
            0 => assert!(
                matches!(&outcome, Err(JournalError::Sqlite { code: 787, message })
                    if message == "FOREIGN KEY constraint failed"),
                "write {i}: {outcome:?}"
            ),
            1 => assert!(
                matches!(&outcome, Err(JournalError::Duplicate(id)) if id == "taken"),
                "write {i}: {outcome:?}"
            ),
            _ => {
                assert!(outcome.is_ok(), "write {i}: {outcome:?}");
                assert!(j.get(&format!("ok{i}")).await.unwrap().is_some());
            }
        }
    }
    // Only the entry its own insert was given (it had none: `store::batch::STATE`).
    let events = j.events("taken").await.unwrap();
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names, ["state"], "a refused duplicate left {events:?}");
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "failed writes broke the chain: {report:?}");
}

#[test]
fn the_writer_outlives_the_runtime_that_opened_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let opener = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let j = opener.block_on(file_journal(&dir));
    drop(opener);
    let user = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    user.block_on(async {
        j.insert(&row("late"), &[ev("accepted")]).await.unwrap();
        assert!(j.get("late").await.unwrap().is_some());
    });
}

#[tokio::test]
async fn one_batch_ends_as_its_writes_would_one_after_the_other() {
    use crate::writes::Write;
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let mut running = row("a");
    running.status = "running".into();
    let mut done = row("a");
    done.status = "completed".into();
    done.verified = true;
    let mut stolen = row("a");
    stolen.device = "someone-else".into();
    let writes = [
        Write::Insert(row("a"), vec![ev("received"), ev("accepted")]),
        Write::Update(running, vec![ev("running")]),
        Write::Append("a".into(), vec![ev("signal")]),
        Write::Insert(stolen, vec![ev("never")]),
        Write::Update(done, vec![ev("completed")]),
        Write::Insert(row("b"), vec![ev("accepted")]),
    ];
    let refs: Vec<&Write> = writes.iter().collect();
    let path = dir.path().join("j.db");
    let chain = crate::chain::Chain::default();
    let mut committer = super::SqliteCommitter::open(&path, true, chain).unwrap();
    let outcomes = committer.run(&refs).unwrap();
    let failed: Vec<usize> = (0..outcomes.len())
        .filter(|&i| outcomes[i].is_err())
        .collect();
    assert_eq!(failed, [3], "{outcomes:?}");
    assert!(matches!(&outcomes[3], Err(JournalError::Duplicate(id)) if id == "a"));
    let a = j.get("a").await.unwrap().unwrap();
    assert_eq!(
        (a.status.as_str(), a.verified, a.device.as_str()),
        ("completed", true, "relay")
    );
    let timeline: Vec<String> = j
        .events("a")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        timeline,
        ["received", "accepted", "running", "signal", "completed"]
    );
    assert_eq!(j.events("b").await.unwrap().len(), 1);
}

#[tokio::test]
async fn prune_deletes_only_finished_commands_older_than_the_cut_off_with_their_timelines() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let at = |id: &str, status: &str, updated: i64| {
        let mut r = row(id);
        r.status = status.into();
        r.updated_at_ms = updated;
        r
    };
    for (id, status, updated) in [
        ("old-done", "completed", 100),
        ("old-refused", "rejected", 100),
        ("old-running", "running", 100),
        ("old-accepted", "accepted", 100),
        ("new-done", "completed", 5_000),
    ] {
        j.insert(&at(id, status, updated), &[ev("received"), ev(status)])
            .await
            .unwrap();
    }
    assert_eq!(j.prune(1_000).await.unwrap(), 2);
    for gone in ["old-done", "old-refused"] {
        assert!(j.get(gone).await.unwrap().is_none(), "{gone} kept");
        assert!(
            j.events(gone).await.unwrap().is_empty(),
            "{gone}'s timeline kept"
        );
    }
    for kept in ["old-running", "old-accepted", "new-done"] {
        assert!(j.get(kept).await.unwrap().is_some(), "{kept} pruned");
        assert_eq!(j.events(kept).await.unwrap().len(), 2);
    }
    assert_eq!(
        j.prune(1_000).await.unwrap(),
        0,
        "a second prune finds nothing"
    );
}

#[tokio::test]
async fn prune_works_through_more_than_one_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let j = file_journal(&dir).await;
    let writes = (0..2_500).map(|i| {
        let j = j.clone();
        let mut r = row(&format!("c{i}"));
        r.status = "completed".into();
        tokio::spawn(async move { j.insert(&r, &[ev("completed")]).await })
    });
    for w in writes.collect::<Vec<_>>() {
        w.await.unwrap().unwrap();
    }
    assert_eq!(j.prune(2).await.unwrap(), 2_500);
    let left = j
        .list(&ListFilter {
            limit: 10,
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert!(left.is_empty(), "{} left", left.len());
}
