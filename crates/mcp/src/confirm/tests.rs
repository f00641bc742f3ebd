//! The in-memory confirmations of one gateway (the shared ones are tested on PostgreSQL in
//! closedloop-journal, and across two gateways in the cli's `shared_confirmations` tests).

use super::*;
use closedloop_journal::Ticket;
use serde_json::json;

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

async fn issue(c: &Confirmations, args: &Map<String, Value>, caller: &str) -> (String, String) {
    let key = Some("k1");
    let (token, _, id) = c
        .issue("slide", "move_to", args, caller, key)
        .await
        .unwrap();
    (token, id)
}

async fn redeem(c: &Confirmations, token: &str, by: Redeemer<'_>) -> Result<Pending, Refusal> {
    c.redeem(Ticket::Token(token), by, None).await
}

#[tokio::test]
async fn one_caller_asking_again_and_again_never_evicts_another_caller_s_token() {
    let c = Confirmations::new(Duration::from_secs(60), None);
    let (theirs, _) = issue(&c, &Map::new(), "operator").await;
    let mut mine = Vec::new();
    for _ in 0..(PER_CALLER * 3) {
        mine.push(issue(&c, &Map::new(), "agent").await.0);
    }
    let theirs = redeem(&c, &theirs, Redeemer::Asker("operator")).await;
    assert!(theirs.is_ok(), "the operator's token survived");
    // The agent keeps its newest PER_CALLER tokens; its oldest went.
    let oldest = redeem(&c, &mine[0], Redeemer::Asker("agent")).await;
    assert_eq!(oldest, Err(Refusal::Unknown));
    let newest = redeem(&c, mine.last().unwrap(), Redeemer::Asker("agent")).await;
    assert!(newest.is_ok());
    // Tokens are long and random, not a clock reading.
    assert_eq!(mine[1].len(), 4 + 64);
    assert_ne!(mine[1][4..20], mine[2][4..20]);
}

#[tokio::test]
async fn a_token_runs_once_for_the_same_arguments_and_caller() {
    let c = Confirmations::new(Duration::from_secs(60), None);
    let a = args(json!({"target_mm": 150}));
    let (t, id) = issue(&c, &a, "ops").await;
    let waiting = c.by_command(&id).await.unwrap().unwrap();
    assert_eq!(
        (waiting.command_id.as_str(), waiting.key),
        (&*id, Some("k1".into()))
    );
    let other = args(json!({"target_mm": 151}));
    let expect = Some(("slide", "move_to", &other));
    let refused = c
        .redeem(Ticket::Token(&t), Redeemer::Asker("ops"), expect)
        .await;
    assert!(matches!(refused, Err(Refusal::Mismatch(_))), "{refused:?}");
    let refused = redeem(&c, &t, Redeemer::Asker("intruder")).await;
    assert!(matches!(refused, Err(Refusal::Mismatch(_))), "{refused:?}");
    let same = args(json!({"target_mm": 150.0}));
    let expect = Some(("slide", "move_to", &same));
    let taken = c
        .redeem(Ticket::Token(&t), Redeemer::Asker("ops"), expect)
        .await;
    assert_eq!(taken.unwrap().args, a);
    assert_eq!(
        redeem(&c, &t, Redeemer::Asker("ops")).await,
        Err(Refusal::Used)
    );
    let nope = redeem(&c, "cfm_nope", Redeemer::Asker("ops")).await;
    assert_eq!(nope, Err(Refusal::Unknown));
    assert_eq!(c.by_command(&id).await.unwrap(), None, "answered");
}

#[tokio::test]
async fn a_confirmation_is_redeemed_by_its_command_id_once() {
    let c = Confirmations::new(Duration::from_secs(60), None);
    let (_, id) = issue(&c, &Map::new(), "agent").await;
    let by = Redeemer::Asker("agent");
    let taken = c.redeem(Ticket::Command(&id), by, None).await.unwrap();
    assert_eq!(taken.command_id, id);
    let again = c.redeem(Ticket::Command(&id), by, None).await;
    assert_eq!(
        again,
        Err(Refusal::Unknown),
        "no confirmation waits under it now"
    );
}

#[tokio::test]
async fn a_confirmer_redeems_another_caller_s_token_and_only_once() {
    let c = Confirmations::new(Duration::from_secs(60), None);
    let (t, _) = issue(&c, &Map::new(), "agent").await;
    let p = redeem(&c, &t, Redeemer::Confirmer("operator"))
        .await
        .unwrap();
    assert_eq!(p.caller, "agent", "the command stays the asker's");
    let again = redeem(&c, &t, Redeemer::Confirmer("operator")).await;
    assert_eq!(again, Err(Refusal::Used));
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let c = Confirmations::new(Duration::from_millis(1), None);
    let (t, _) = issue(&c, &Map::new(), "ops").await;
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(
        redeem(&c, &t, Redeemer::Asker("ops")).await,
        Err(Refusal::Expired)
    );
}
