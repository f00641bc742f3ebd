//! The PostgreSQL store against the machine's PostgreSQL (`CLOSEDLOOP_PG_URL`, e.g.
//! `postgres://postgres@127.0.0.1:5432/postgres`): each test creates a database of its own and
//! drops it. Without the variable these tests say so and pass; `.ci/run` sets it and fails when
//! no PostgreSQL answers.

use super::test_db::Database;
use crate::store::fixtures::{ev, row};
use crate::{AuditFilter, Break, Journal, JournalError, ListFilter};
use serde_json::json;

#[tokio::test]
async fn a_postgres_journal_keeps_commands_as_the_sqlite_one_does() {
    let Some(db) = Database::create("round_trip").await else {
        return;
    };
    let j = db.journal().await;
    let mut c = row("c1", "lamp", "accepted", 10);
    c.idempotency_key = Some("k1".into());
    j.insert(&c, &[ev(10, "received"), ev(10, "accepted")])
        .await
        .unwrap();
    assert!(matches!(
        j.insert(&c, &[ev(11, "accepted")]).await,
        Err(JournalError::Duplicate(id)) if id == "c1"
    ));
    c.status = "completed".into();
    c.verified = true;
    c.readback_matched = Some(true);
    c.evidence = json!({"contact": true});
    c.updated_at_ms = 20;
    j.update(&c, &[ev(20, "completed")]).await.unwrap();
    j.insert(&row("c2", "fan", "running", 30), &[ev(30, "accepted")])
        .await
        .unwrap();
    assert_eq!(j.get("c1").await.unwrap(), Some(c.clone()));
    let timeline: Vec<String> = j
        .events("c1")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(timeline, ["received", "accepted", "completed"]);
    assert_eq!(j.by_idempotency_key("k1").await.unwrap(), Some(c));
    let unfinished: Vec<String> = j
        .unfinished()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.command_id)
        .collect();
    assert_eq!(unfinished, ["c2"]);
    let lamp = ListFilter {
        device: Some("lamp".into()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(j.list(&lamp).await.unwrap().len(), 1);
    assert_eq!(
        j.accepted_since("lamp", Some("switch"), 5).await.unwrap(),
        [10]
    );
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn the_audit_trail_names_the_confirming_token_on_postgres() {
    let Some(db) = Database::create("audit").await else {
        return;
    };
    let j = db.journal().await;
    let mut confirmed = ev(5, "accepted");
    confirmed.data = json!({"confirmed_by": "operator"});
    j.insert(&row("a", "lamp", "accepted", 5), &[confirmed])
        .await
        .unwrap();
    j.insert(&row("b", "lamp", "rejected", 6), &[ev(6, "rejected")])
        .await
        .unwrap();
    let page = AuditFilter {
        since_ms: 0,
        limit: 10,
        ..Default::default()
    };
    let trail = j.audit(&page).await.unwrap();
    let seen: Vec<(&str, Option<&str>)> = trail
        .iter()
        .map(|r| (r.command.command_id.as_str(), r.confirmed_by.as_deref()))
        .collect();
    assert_eq!(seen, [("a", Some("operator")), ("b", None)]);
    let after = AuditFilter {
        after: Some((5, "a".into())),
        ..page
    };
    assert_eq!(j.audit(&after).await.unwrap().len(), 1);
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn two_writers_on_one_database_extend_one_intact_chain() {
    let Some(db) = Database::create("two_writers").await else {
        return;
    };
    // Two gateways' journals on one database, writing at once.
    let (a, b) = (db.journal().await, db.journal().await);
    let mut tasks = Vec::new();
    for i in 0..200 {
        let j = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let id = format!("c{i}");
            j.insert(
                &row(&id, "relay", "accepted", i),
                &[ev(i, "received"), ev(i, "accepted")],
            )
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let report = a.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 400);
    let (writes, commits) = a.write_counts();
    assert!(commits <= writes, "{writes} writes in {commits} commits");
    a.close().await;
    b.close().await;
    db.drop().await;
}

#[tokio::test]
async fn verify_names_an_edited_a_deleted_and_a_cut_off_event_on_postgres() {
    let Some(db) = Database::create("tamper").await else {
        return;
    };
    let j = db.journal().await;
    for i in 1..=4 {
        let id = format!("c{i}");
        j.insert(
            &row(&id, "relay", "accepted", i),
            &[ev(i, "received"), ev(i, "accepted")],
        )
        .await
        .unwrap();
    }
    db.sql("UPDATE events SET event = 'completed' WHERE seq = 3")
        .await;
    let broken = j.verify().await.unwrap().broken.unwrap();
    assert_eq!((broken.seq, broken.kind), (3, Break::ContentChanged));
    db.sql("UPDATE events SET event = 'received' WHERE seq = 3; DELETE FROM events WHERE seq = 5")
        .await;
    let broken = j.verify().await.unwrap().broken.unwrap();
    assert_eq!((broken.seq, broken.kind), (6, Break::LinkBroken));
    db.sql("DELETE FROM events WHERE seq >= 5").await;
    let broken = j.verify().await.unwrap().broken.unwrap();
    assert_eq!((broken.seq, broken.kind), (8, Break::Truncated));
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn prune_on_postgres_deletes_a_prefix_that_verify_checks_from_its_anchor() {
    let Some(db) = Database::create("prune").await else {
        return;
    };
    let j = db.journal().await;
    for (id, status, at) in [("old1", "completed", 100), ("old2", "failed", 200)] {
        j.insert(
            &row(id, "relay", status, at),
            &[ev(at, "received"), ev(at, status)],
        )
        .await
        .unwrap();
    }
    j.insert(&row("open", "relay", "running", 50), &[ev(300, "accepted")])
        .await
        .unwrap();
    j.insert(
        &row("new", "relay", "completed", 9_000),
        &[ev(9_000, "completed")],
    )
    .await
    .unwrap();
    assert_eq!(j.prune(1_000).await.unwrap(), 2);
    assert!(j.get("old1").await.unwrap().is_none());
    assert!(j.get("open").await.unwrap().is_some());
    let report = j.verify().await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.checked, report.anchor.map(|a| a.seq)), (2, Some(5)));
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_read_only_postgres_journal_takes_no_write() {
    let Some(db) = Database::create("read_only").await else {
        return;
    };
    db.journal().await.close().await;
    let url = db.url.clone();
    let j = Journal::open_read_only(&url).await.unwrap();
    assert!(
        j.insert(&row("x", "relay", "accepted", 1), &[])
            .await
            .is_err()
    );
    assert!(j.get("x").await.unwrap().is_none());
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_postgres_that_does_not_answer_is_named_without_its_password() {
    // Port 1 on loopback: nothing listens there.
    let url = "postgres://gateway:s3cret@127.0.0.1:1/plant";
    match Journal::open(url).await {
        Err(e @ JournalError::Unreachable { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("postgres://gateway:***@127.0.0.1:1/plant"),
                "{text}"
            );
            assert!(!text.contains("s3cret"), "{text}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn alarms_are_kept_on_postgres_as_on_sqlite() {
    let Some(db) = Database::create("alarms").await else {
        return;
    };
    let j = db.journal().await;
    let raised = crate::AlarmRow {
        name: "OVER_TEMP".into(),
        at_ms: 5,
        active: true,
        evidence: json!({"why": "oven.temperature_c = 81.0"}),
    };
    j.record_alarm(&raised).await.unwrap();
    assert_eq!(j.alarm_events(0, 10).await.unwrap(), [raised]);
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn every_insert_change_of_state_and_cancel_request_is_announced_and_appends_are_not() {
    let Some(db) = Database::create("feed").await else {
        return;
    };
    let j = db.journal().await;
    let mut feed = j.feed().await.unwrap().expect("PostgreSQL has a feed");
    let mut c = row("c1", "lamp", "accepted", 10);
    j.insert(&c, &[ev(10, "accepted")]).await.unwrap();
    j.append("c1", &[ev(11, "signal")]).await.unwrap();
    c.dispatched = true;
    j.update(&c, &[ev(12, "dispatched")]).await.unwrap();
    c.status = "completed".into();
    j.update(&c, &[ev(13, "completed")]).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), feed.next());
        let change = next.await.expect("announced within 10 s").unwrap();
        let crate::Announcement::Changed(change) = change else {
            panic!("a change was expected: {change:?}");
        };
        assert_eq!(
            (change.command_id.as_str(), change.device.as_str()),
            ("c1", "lamp")
        );
        seen.push((change.status, change.dispatched));
    }
    let expected = [("accepted", false), ("accepted", true), ("completed", true)];
    let expected: Vec<(String, bool)> = expected.iter().map(|(s, d)| (s.to_string(), *d)).collect();
    assert_eq!(seen, expected);
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(300), feed.next());
    assert!(quiet.await.is_err(), "the timeline append was announced");
    j.announce_cancel("c1").await.unwrap();
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), feed.next());
    let cancel = next.await.expect("announced within 10 s").unwrap();
    assert_eq!(cancel, crate::Announcement::Cancel("c1".into()));
    let sqlite = Journal::open("sqlite::memory:").await.unwrap();
    assert!(sqlite.feed().await.unwrap().is_none());
    drop(feed);
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_feed_whose_connection_drops_says_so_instead_of_reconnecting_silently() {
    let Some(db) = Database::create("feed_lost").await else {
        return;
    };
    let j = db.journal().await;
    let mut feed = j.feed().await.unwrap().expect("PostgreSQL has a feed");
    // The listening session ended by the server, as a network cut or a restart would.
    db.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .await;
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), feed.next());
    let lost = next.await.expect("told within 10 s");
    assert!(
        matches!(lost, Err(crate::JournalError::FeedLost)),
        "{lost:?}"
    );
    drop(feed);
    j.close().await;
    db.drop().await;
}

/// A password is never shown, however it is written: in the user part (with an unencoded `@`
/// in it too) or in the query, as libpq takes it.
#[test]
fn a_password_is_never_shown_in_any_url_form() {
    let cases = [
        (
            "postgres://cl:s3cret@db:5432/j",
            "postgres://cl:***@db:5432/j",
        ),
        ("postgres://cl:p@ss@db/j", "postgres://cl:***@db/j"),
        (
            "postgres://cl@db/j?password=s3cret&sslmode=require",
            "postgres://cl@db/j?password=***&sslmode=require",
        ),
        (
            "postgresql://db/j?sslmode=verify-full&sslpassword=k3y",
            "postgresql://db/j?sslmode=verify-full&sslpassword=***",
        ),
        ("postgres://db/j", "postgres://db/j"),
        (
            "postgres://host:5432/db?password=p@ss",
            "postgres://host:5432/db?password=***",
        ),
        ("postgres://cl:p@ss?w@host/db", "postgres://cl:***@host/db"),
        ("sqlite://journal.db", "sqlite://journal.db"),
        ("sqlite:journal.db", "sqlite:journal.db"),
    ];
    for (url, shown) in cases {
        assert_eq!(super::redacted(url), shown, "{url}");
        assert!(!super::redacted(url).contains("s3cret") && !super::redacted(url).contains("k3y"));
    }
}

#[tokio::test]
async fn two_keyed_writers_extend_one_keyed_chain_and_an_unkeyed_one_breaks_it() {
    let Some(db) = Database::create("keyed_writers").await else {
        return;
    };
    let key = crate::JournalKey::new("pg-plant-key-from-the-environment").unwrap();
    let open = || crate::Journal::open_keyed(&db.url, Some(key.clone()));
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..40 {
        let j = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let id = format!("c{i}");
            let events = [ev(i, "received"), ev(i, "accepted")];
            j.insert(&row(&id, "relay", "accepted", i), &events).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let r = a.verify_keyed(&[], &key).await.unwrap();
    assert!(r.intact(), "{r:?}");
    assert_eq!((r.checked, r.keyed_from), (80, Some(1)));
    assert_eq!(
        a.verify().await.unwrap().broken.map(|b| (b.kind, b.seq)),
        Some((Break::ContentChanged, 1))
    );
    // A gateway without the key (or an intruder through the journal's own writer).
    let plain = db.journal().await;
    plain
        .insert(&row("late", "relay", "accepted", 99), &[ev(99, "received")])
        .await
        .unwrap();
    let r = a.verify_keyed(&[], &key).await.unwrap();
    assert_eq!(
        r.broken.map(|b| (b.kind, b.seq)),
        Some((Break::Unkeyed, 81))
    );
    for j in [a, b, plain] {
        j.close().await;
    }
    db.drop().await;
}
