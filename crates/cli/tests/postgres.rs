//! `closedloop serve` on a PostgreSQL journal (`CLOSEDLOOP_PG_URL`, the machine's PostgreSQL;
//! each test creates a database of its own and drops it): commands run over stdio land there,
//! `closedloop audit` and `journal verify` read them, an edited row is named, a restarted serve
//! finds its commands, and a PostgreSQL that does not answer stops `serve` naming the URL.
//! Without the variable these tests say they skipped and pass (`.ci/run` sets it).

mod common;

use common::pg::Database;
use common::{act, call, connect, outcome, run, sc};
use serde_json::json;
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The journal tests' lamp plant (`common::lamp_plant`), journaled to `journal`.
fn plant(journal: &str) -> String {
    common::lamp_plant("pg", journal)
}

#[tokio::test]
async fn serve_journals_to_postgres_and_audit_verify_and_a_restart_read_it_back() {
    let Some(db) = Database::create("serve").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant(&db.url)).unwrap();

    let c = connect(dir.path()).await;
    let (status, code, _) = act(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!((status.as_str(), code.as_str()), ("completed", ""));
    let refused = call(&c, "lamp_switch", json!({"on": "maybe"})).await;
    let (status, code) = outcome(&refused);
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "INVALID_PARAMS")
    );
    c.cancel().await.unwrap();

    let (code, out, err) = run(&["audit"], &file, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    let statuses: Vec<&str> = out.lines().map(|l| l.split("  ").nth(4).unwrap()).collect();
    assert_eq!(statuses, ["completed", "rejected"], "{out}");
    let (code, out, err) = run(&["journal", "verify"], &file, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.ends_with("intact\n"), "{out}");

    // A second serve on the same database sees what the first one journaled.
    let c = connect(dir.path()).await;
    let commands = call(&c, "list_commands", json!({})).await;
    let listed = sc(&commands)["commands"].as_array().unwrap().len();
    assert_eq!(listed, 2, "{:?}", sc(&commands));
    c.cancel().await.unwrap();

    // Someone with database access rewrites what the first command's `accepted` event recorded.
    let mut pg = PgConnection::connect(&db.url).await.unwrap();
    let seq: i64 = sqlx::query_scalar("SELECT MIN(seq) FROM events WHERE event = 'accepted'")
        .fetch_one(&mut pg)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET data = '{\"on\":false}' WHERE seq = $1")
        .bind(seq)
        .execute(&mut pg)
        .await
        .unwrap();
    pg.close().await.unwrap();
    let (code, out, _) = run(&["journal", "verify"], &file, &[]);
    assert_eq!(code, Some(1), "{out}");
    let broken = format!("BROKEN at seq {seq} (command ");
    assert!(
        out.contains(&broken) && out.contains("content changed"),
        "{out}"
    );
    db.drop().await;
}

#[test]
fn serve_on_a_postgres_that_does_not_answer_stops_naming_the_url_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, plant("postgres://gw:s3cret@127.0.0.1:1/plant")).unwrap();
    let (code, out, err) = run(&["serve"], &file, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("postgres://gw:***@127.0.0.1:1/plant") && err.contains("cannot be reached"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}
