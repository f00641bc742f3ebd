//! Shared confirmations on the machine's PostgreSQL: found and redeemed by token or by command
//! id from another journal handle (another gateway), once only, never after expiry, the token
//! never stored as given, and a caller's oldest dropped beyond its share.

use super::confirmations::{ConfirmationRow, Held, Ticket};
use super::test_db::Database;
use serde_json::json;
use sqlx::Connection;
use std::time::Duration;

fn row(command_id: &str, caller: &str) -> ConfirmationRow {
    ConfirmationRow {
        command_id: command_id.into(),
        device: "slide".into(),
        action: "move_to".into(),
        args: json!({"target_mm": 150}).as_object().cloned().unwrap(),
        caller: caller.into(),
        key: Some("k1".into()),
        checked: Vec::new(),
    }
}

const TTL: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_token_issued_at_one_gateway_is_redeemed_at_another_and_only_once() {
    let Some(db) = Database::create("confirm_once").await else {
        return;
    };
    let (a, b) = (db.journal().await, db.journal().await);
    let (at_a, at_b) = (a.confirmations().unwrap(), b.confirmations().unwrap());
    at_a.put("cfm_secret", &row("c1", "agent"), TTL, 32)
        .await
        .unwrap();
    let held = at_b.find(Ticket::Token("cfm_secret")).await.unwrap();
    assert_eq!(held, Some(Held::Pending(row("c1", "agent"))));
    assert_eq!(
        at_b.find(Ticket::Command("c1")).await.unwrap(),
        Some(Held::Pending(row("c1", "agent")))
    );
    // Two gateways redeeming at once: exactly one wins.
    let (x, y) = tokio::join!(
        at_a.take(Ticket::Token("cfm_secret"), "agent"),
        at_b.take(Ticket::Token("cfm_secret"), "agent")
    );
    assert!(x.unwrap() ^ y.unwrap(), "exactly one redemption");
    assert_eq!(
        at_a.find(Ticket::Token("cfm_secret")).await.unwrap(),
        Some(Held::Used("agent".into()))
    );
    assert_eq!(at_a.find(Ticket::Command("c1")).await.unwrap(), None);
    assert_eq!(at_a.find(Ticket::Token("cfm_other")).await.unwrap(), None);
    // The table holds a digest, not the token.
    let mut c = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let stored: Vec<(String,)> = sqlx::query_as("SELECT token_sha256 FROM confirmations")
        .fetch_all(&mut c)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert!(!stored[0].0.contains("secret") && stored[0].0.len() == 64);
    for j in [a, b] {
        j.close().await;
    }
    db.drop().await;
}

#[tokio::test]
async fn an_expired_confirmation_is_neither_found_waiting_nor_taken() {
    let Some(db) = Database::create("confirm_expiry").await else {
        return;
    };
    let j = db.journal().await;
    let c = j.confirmations().unwrap();
    c.put("cfm_t", &row("c1", "agent"), Duration::from_millis(200), 32)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        c.find(Ticket::Token("cfm_t")).await.unwrap(),
        Some(Held::Expired)
    );
    assert_eq!(c.find(Ticket::Command("c1")).await.unwrap(), None);
    assert!(!c.take(Ticket::Command("c1"), "agent").await.unwrap());
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn a_caller_asking_again_and_again_drops_only_its_own_oldest() {
    let Some(db) = Database::create("confirm_share").await else {
        return;
    };
    let j = db.journal().await;
    let c = j.confirmations().unwrap();
    c.put("cfm_theirs", &row("theirs", "operator"), TTL, 2)
        .await
        .unwrap();
    for n in 0..4 {
        let id = format!("mine{n}");
        c.put(&format!("cfm_{id}"), &row(&id, "agent"), TTL, 2)
            .await
            .unwrap();
    }
    let found = |t: &'static str| {
        let c = c.clone();
        async move { c.find(Ticket::Token(t)).await.unwrap().is_some() }
    };
    assert!(found("cfm_theirs").await, "another caller's token stays");
    assert!(!found("cfm_mine0").await && !found("cfm_mine1").await);
    assert!(found("cfm_mine2").await && found("cfm_mine3").await);
    j.close().await;
    db.drop().await;
}

#[tokio::test]
async fn checklist_answers_from_two_gateways_add_up_and_end_with_the_confirmation() {
    let Some(db) = Database::create("confirm_checked").await else {
        return;
    };
    let (a, b) = (db.journal().await, db.journal().await);
    let (at_a, at_b) = (a.confirmations().unwrap(), b.confirmations().unwrap());
    at_a.put("cfm_c", &row("c1", "agent"), TTL, 32)
        .await
        .unwrap();
    let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let (second, both) = (keys(&["check_2"]), keys(&["check_1", "check_2"]));
    let (x, y) = tokio::join!(at_a.check_off("c1", &second), at_b.check_off("c1", &both));
    let (x, y) = (x.unwrap().unwrap(), y.unwrap().unwrap());
    assert!(
        x == keys(&["check_1", "check_2"]) || y == keys(&["check_1", "check_2"]),
        "the later of two answers sees both: {x:?} {y:?}"
    );
    let Some(Held::Pending(p)) = at_b.find(Ticket::Command("c1")).await.unwrap() else {
        panic!("still waiting");
    };
    assert_eq!(p.checked, keys(&["check_1", "check_2"]));
    assert!(at_b.take(Ticket::Command("c1"), "agent").await.unwrap());
    assert_eq!(
        at_a.check_off("c1", &keys(&["check_3"])).await.unwrap(),
        None,
        "used"
    );
    for j in [a, b] {
        j.close().await;
    }
    db.drop().await;
}
