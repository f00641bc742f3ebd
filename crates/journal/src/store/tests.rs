//! The store against SQLite itself: in memory, on disk, and read-only.

use super::*;
use crate::EventRow;
use crate::Journal;
use crate::store::fixtures::{ev, row};
use serde_json::json;

#[tokio::test]
async fn a_read_only_journal_reads_creates_nothing_and_takes_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("sqlite://{}", dir.path().join("none.db").display());
    assert!(Journal::open_read_only(&missing).await.is_err());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing created"
    );
    let url = format!("sqlite://{}", dir.path().join("j.db").display());
    let j = Journal::open(&url).await.unwrap();
    j.insert(&row("c1", "lamp", "completed", 10), &[ev(10, "accepted")])
        .await
        .unwrap();
    j.close().await;
    let r = Journal::open_read_only(&url).await.unwrap();
    assert_eq!(r.get("c1").await.unwrap().unwrap().status, "completed");
    let refused = r.insert(&row("c2", "lamp", "accepted", 20), &[]).await;
    assert!(
        matches!(&refused, Err(JournalError::Sqlite { code: 8, message })
            if message == "attempt to write a readonly database"),
        "a read-only journal took a write: {refused:?}"
    );
    assert!(r.get("c2").await.unwrap().is_none());
}

#[tokio::test]
async fn insert_update_get_round_trip() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    let mut c = row("c1", "lamp", "accepted", 10);
    j.insert(&c, &[ev(9, "received"), ev(10, "accepted")])
        .await
        .unwrap();
    c.status = "completed".into();
    c.verified = true;
    c.evidence = json!({"contact": {"value": true}});
    c.updated_at_ms = 30;
    j.update(&c, &[ev(30, "completed")]).await.unwrap();
    assert_eq!(j.get("c1").await.unwrap(), Some(c));
    let events: Vec<String> = j
        .events("c1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(events, ["received", "accepted", "completed"]);
    assert_eq!(j.get("nope").await.unwrap(), None);
}

#[tokio::test]
async fn a_memory_journal_keeps_its_commands_when_the_pool_reopens_its_connection() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    j.insert(&row("c1", "lamp", "accepted", 10), &[])
        .await
        .unwrap();
    // What sqlx does to a connection whose query future was dropped mid-flight.
    let mut conn = j.sqlite().writer.acquire().await.unwrap();
    conn.close_on_drop();
    drop(conn);
    for _ in 0..200 {
        if j.sqlite().writer.size() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(j.get("c1").await.unwrap().unwrap().status, "accepted");
}

#[tokio::test]
async fn duplicate_insert_is_refused() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    let c = row("c1", "lamp", "accepted", 10);
    j.insert(&c, &[]).await.unwrap();
    assert!(matches!(
        j.insert(&c, &[]).await,
        Err(JournalError::Duplicate(_))
    ));
}

#[tokio::test]
async fn list_filters_and_orders_newest_first() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    j.insert(&row("a", "lamp", "completed", 1), &[])
        .await
        .unwrap();
    j.insert(&row("b", "slide", "failed", 2), &[])
        .await
        .unwrap();
    j.insert(&row("c", "lamp", "running", 3), &[])
        .await
        .unwrap();
    let all = j
        .list(&ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter()
            .map(|c| c.command_id.as_str())
            .collect::<Vec<_>>(),
        ["c", "b", "a"]
    );
    let lamp = ListFilter {
        device: Some("lamp".into()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(j.list(&lamp).await.unwrap().len(), 2);
    let failed = ListFilter {
        status: Some("failed".into()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(j.list(&failed).await.unwrap()[0].command_id, "b");
    let one = ListFilter {
        limit: 1,
        ..Default::default()
    };
    assert_eq!(j.list(&one).await.unwrap().len(), 1);
    let open: Vec<String> = j
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.command_id)
        .collect();
    assert_eq!(open, ["c"]);
}

#[tokio::test]
async fn file_journal_survives_reopen_and_an_unknown_database_is_refused_naming_the_choices() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("j.db").display());
    {
        let j = Journal::open(&url).await.unwrap();
        let mut c = row("k", "lamp", "accepted", 5);
        c.idempotency_key = Some("key-1".into());
        j.insert(&c, &[ev(5, "accepted")]).await.unwrap();
        j.close().await;
    }
    let j = Journal::open(&url).await.unwrap();
    assert_eq!(j.unfinished().await.unwrap().len(), 1);
    assert_eq!(
        j.by_idempotency_key("key-1")
            .await
            .unwrap()
            .unwrap()
            .command_id,
        "k"
    );
    let err = Journal::open("mysql://x").await.unwrap_err();
    assert!(err.to_string().contains("postgres://USER@HOST"), "{err}");
}

#[tokio::test]
async fn audit_lists_commands_since_oldest_first_with_their_caller_and_confirmation() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    let mut by_ops = row("b", "lamp", "completed", 20);
    by_ops.caller = Some("ops".into());
    let confirmed = EventRow {
        at_ms: 30,
        event: "accepted".into(),
        data: json!({"confirmed_by": "alice"}),
    };
    j.insert(&row("a", "lamp", "completed", 10), &[ev(10, "accepted")])
        .await
        .unwrap();
    j.insert(&by_ops, &[ev(20, "accepted")]).await.unwrap();
    j.insert(&row("c", "lamp", "completed", 30), &[confirmed])
        .await
        .unwrap();
    let page = |since_ms, caller: Option<&str>, after, limit| AuditFilter {
        since_ms,
        caller: caller.map(str::to_string),
        after,
        limit,
    };
    let ids = |rows: Vec<AuditRow>| -> Vec<(String, Option<String>)> {
        rows.into_iter()
            .map(|r| (r.command.command_id, r.confirmed_by))
            .collect()
    };
    let all = ids(j.audit(&page(15, None, None, 10)).await.unwrap());
    assert_eq!(
        all,
        [("b".into(), None), ("c".into(), Some("alice".into()))]
    );
    let ops = ids(j.audit(&page(0, Some("ops"), None, 10)).await.unwrap());
    assert_eq!(ops, [("b".into(), None)]);
    let first = j.audit(&page(0, None, None, 2)).await.unwrap();
    let last = first.last().unwrap();
    let after = Some((last.command.accepted_at_ms, last.command.command_id.clone()));
    let rest = ids(j.audit(&page(0, None, after, 2)).await.unwrap());
    assert_eq!(rest, [("c".into(), Some("alice".into()))]);
}

#[tokio::test]
async fn alarms_raised_and_cleared_are_kept_with_their_evidence_oldest_first() {
    let j = Journal::open("sqlite::memory:").await.unwrap();
    let raised = crate::AlarmRow {
        name: "GUARD_DOOR_OPEN".into(),
        at_ms: 10,
        active: true,
        evidence: json!({"why": "door.open = true"}),
    };
    let cleared = crate::AlarmRow {
        at_ms: 20,
        active: false,
        evidence: json!({"why": "door.open = false"}),
        ..raised.clone()
    };
    j.record_alarm(&raised).await.unwrap();
    j.record_alarm(&cleared).await.unwrap();
    assert_eq!(
        j.alarm_events(0, 10).await.unwrap(),
        [raised, cleared.clone()]
    );
    assert_eq!(j.alarm_events(15, 10).await.unwrap(), [cleared]);
}

/// The group commits on a connection of its own, while prune and alarms write through sqlx's:
/// they take SQLite's write lock in turn. Prune reads, then deletes: begun `DEFERRED`, a group
/// commit between the two voided its transaction ("database is locked", SQLITE_BUSY_SNAPSHOT).
#[tokio::test]
async fn prune_and_alarms_write_while_the_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let j = crate::store::fixtures::file_journal(&dir).await;
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let j = j.clone();
            tokio::spawn(async move {
                for i in 0..100 {
                    let mut c = row(&format!("w{w}-{i}"), "lamp", "accepted", 1);
                    j.insert(&c, &[ev(1, "accepted")]).await?;
                    c.status = "completed".into();
                    j.update(&c, &[ev(1, "completed")]).await?;
                }
                Ok::<(), JournalError>(())
            })
        })
        .collect();
    let mut pruned = 0;
    for n in 0..40 {
        pruned += j.prune(1_000).await.expect("prune beside the group");
        let alarm = crate::AlarmRow {
            name: "hot".into(),
            at_ms: n,
            active: n % 2 == 0,
            evidence: json!({"n": n}),
        };
        j.record_alarm(&alarm)
            .await
            .expect("alarm beside the group");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for w in writers {
        w.await.unwrap().expect("every write landed");
    }
    assert!(pruned > 0, "prune ran while the commands were written");
    assert_eq!(j.alarm_events(0, 100).await.unwrap().len(), 40);
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
}

#[tokio::test]
async fn closing_commits_what_was_handed_over_and_refuses_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let j = crate::store::fixtures::file_journal(&dir).await;
    let pending: Vec<_> = (0..50)
        .map(|i| {
            let j = j.clone();
            tokio::spawn(async move {
                j.insert(&row(&format!("c{i}"), "lamp", "accepted", 1), &[])
                    .await
            })
        })
        .collect();
    // Every insert reaches the writer before the close does (one thread runs the test).
    tokio::task::yield_now().await;
    j.close().await;
    for p in pending {
        p.await.unwrap().expect("handed over before the close");
    }
    let late = j.insert(&row("late", "lamp", "accepted", 1), &[]).await;
    assert!(
        matches!(&late, Err(JournalError::Writer(m)) if m == "it has stopped"),
        "{late:?}"
    );
    let r = Journal::open_read_only(&format!("sqlite://{}", dir.path().join("j.db").display()))
        .await
        .unwrap();
    let all = r
        .list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 50);
}

#[tokio::test]
async fn a_url_parameter_that_would_split_the_writers_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.db");
    for bad in ["immutable=1", "vfs=unix-dotfile", "mode=memory", "mode=ro"] {
        let url = format!("sqlite://{}?{bad}", path.display());
        let err = Journal::open(&url).await.unwrap_err().to_string();
        assert!(
            err.contains(&format!("the parameter `{bad}` is not supported")),
            "{err}"
        );
    }
    let url = format!("sqlite://{}?mode=rwc&cache=private", path.display());
    let j = Journal::open(&url).await.unwrap();
    j.insert(&row("c1", "lamp", "accepted", 1), &[])
        .await
        .unwrap();
}

/// A `ROLLBACK` that failed leaves its transaction open, and every `BEGIN` after it would fail:
/// the next batch rolls it back first.
#[tokio::test]
async fn a_transaction_left_open_is_rolled_back_before_the_next_batch() {
    use crate::writes::Write;
    let dir = tempfile::tempdir().unwrap();
    let j = crate::store::fixtures::file_journal(&dir).await;
    j.close().await;
    let path = dir.path().join("j.db");
    let chain = crate::chain::Chain::default();
    let mut committer = super::SqliteCommitter::open(&path, true, chain).unwrap();
    committer.db.exec("BEGIN").unwrap();
    let write = Write::Insert(row("c1", "lamp", "accepted", 1), vec![ev(1, "accepted")]);
    let outcomes = committer.run(&[&write]).unwrap();
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    assert!(!committer.db.in_transaction(), "committed");
}

/// The journal holds who asked for what: its files are the owner's alone (0600), the database
/// and its -wal and -shm files alike (they were once 0644, readable by every account).
#[tokio::test]
async fn a_new_journal_file_is_readable_by_its_owner_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("j.db").display());
    let j = Journal::open(&url).await.unwrap();
    j.insert(&row("c1", "lamp", "completed", 10), &[ev(10, "accepted")])
        .await
        .unwrap();
    for name in ["j.db", "j.db-wal", "j.db-shm"] {
        let path = dir.path().join(name);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}: {mode:o}");
    }
    j.close().await;
}
