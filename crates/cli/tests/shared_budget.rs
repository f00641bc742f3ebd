//! One operation-rate budget across gateways (`CLOSEDLOOP_PG_URL`): the workshop's lamp switch
//! limited to `max_rate = "3/h"` (a burst of three), six calls sent at once, three to each of two
//! gateways on one PostgreSQL journal. Every gateway takes the call (the owner's run the handed
//! ones), three are accepted and three refused `RATE_LIMITED` wherever they arrived, and the
//! simulator's write log shows exactly three writes to the lamp: the budget is counted once, under
//! one lock in the database, however the calls are spread.

mod common;

use common::gateways::{Two, add_after, call, settled_owner, writes};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_spread_over_two_gateways_spend_one_rate_budget() {
    let limit = |plant: String| {
        add_after(
            &plant,
            "done_when = \"contact == params.on\"\n",
            "max_rate = \"3/h\"\n",
        )
    };
    let Some(p) = Two::start("shared_budget", limit).await else {
        return;
    };
    let (a_at, b_at) = (p.a_at.clone(), p.b_at.clone());
    let owner = settled_owner(&a_at, &b_at, "lamp").await;

    let calls: Vec<_> = (0..6)
        .map(|n| {
            let at = if n % 2 == 0 {
                a_at.clone()
            } else {
                b_at.clone()
            };
            let args = format!(r#"{{"on":{},"wait_s":0}}"#, n % 4 < 2);
            tokio::spawn(async move { call(&at, "lamp_switch", &args).await })
        })
        .collect();
    let mut answers: Vec<Value> = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap());
    }
    let status = |s: &str| answers.iter().filter(|r| r["status"] == s).count();
    assert_eq!(
        (status("accepted"), status("rejected")),
        (3, 3),
        "{answers:#?}"
    );
    for refused in answers.iter().filter(|r| r["status"] == "rejected") {
        assert_eq!(refused["error_code"], "RATE_LIMITED", "{refused}");
    }
    // Each accepted one is run by the owner (its own, or handed to it) and reaches the lamp once.
    for accepted in answers.iter().filter(|r| r["status"] == "accepted") {
        let id = accepted["command_id"].as_str().unwrap();
        let done = call(&a_at, "get_command_status", &common::gateways::wait_for(id)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert!(
            common::gateways::entry(&done, "dispatched").is_object(),
            "{owner} did not run it: {done}"
        );
    }
    let lamp_writes = writes(p.dir.path())
        .into_iter()
        .filter(|w| w["device"] == "lamp")
        .count();
    assert_eq!(lamp_writes, 3, "the lamp was written {lamp_writes} times");
    p.wind_up().await;
}
