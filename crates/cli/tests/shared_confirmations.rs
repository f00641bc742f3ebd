//! One endpoint, any gateway, for actions a person confirms (`CLOSEDLOOP_PG_URL`): two
//! `closedloop serve --http` processes on one PostgreSQL journal over the Modbus workshop
//! `closedloop sim` serves, its lamp switch made `confirm = true`. A token one gateway issues is
//! redeemed at the other, once in both; a token bound to other arguments is refused wherever it
//! is tried, and kept; a Tasks client's confirmation task, created at one gateway, is found
//! waiting and answered at the other. Ground truth is the lamp's contact, read from the
//! simulator's registers.

mod common;

use common::gateways::{Two, add_after, call, entry};
use common::tasks::{params, task_end, tasks_client};
use common::truth::modbus_read;
use rmcp::model::{
    CallToolResponse, GetTaskParams, InputRequest, TaskPayload, TaskStatus, UpdateTaskParams,
};
use serde_json::{Value, json};

/// The lamp's contact (discrete input 0 of unit 1) as the simulator holds it.
async fn lamp_on(modbus: &str) -> bool {
    modbus_read(modbus, 1, 2, 0, 1).await[0] & 1 == 1
}

/// A `needs_confirmation` answer's token.
fn token_of(asked: &Value) -> String {
    assert_eq!(asked["status"], "needs_confirmation", "{asked}");
    asked["confirmation_token"].as_str().unwrap().to_string()
}

fn assert_refused(answer: &Value, words: &str) {
    assert_eq!(
        (answer["status"].as_str(), answer["error_code"].as_str()),
        (Some("rejected"), Some("INVALID_PARAMS")),
        "{answer}"
    );
    let detail = answer["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(words), "{answer}");
}

/// Two gateways over the workshop, its lamp switch an action a person confirms.
async fn two(test: &str) -> Option<Two> {
    Two::start(test, |plant| {
        add_after(
            &plant,
            "done_when = \"contact == params.on\"\n",
            "confirm = true\n",
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_issued_by_one_gateway_is_redeemed_at_another_and_only_once() {
    let Some(p) = two("shared_confirm").await else {
        return;
    };

    let token = token_of(&call(&p.a_at, "lamp_switch", r#"{"on":true}"#).await);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!lamp_on(&p.modbus).await, "nothing moves before the answer");
    let confirm = format!(r#"{{"confirmation_token":"{token}","wait_s":5}}"#);
    let done = call(&p.b_at, "confirm_command", &confirm).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        entry(&done, "accepted")["confirmed_by"].is_string(),
        "{done}"
    );
    assert!(lamp_on(&p.modbus).await, "the lamp did not switch on");
    // Once in both gateways: not again where it was issued, nor where it was redeemed.
    assert_refused(
        &call(&p.a_at, "confirm_command", &confirm).await,
        "already used",
    );
    assert_refused(
        &call(&p.b_at, "confirm_command", &confirm).await,
        "already used",
    );

    // Bound to its arguments everywhere: the same tool with other ones is refused and the
    // token kept; with its own, it runs.
    let token = token_of(&call(&p.b_at, "lamp_switch", r#"{"on":false}"#).await);
    let wrong = format!(r#"{{"on":true,"confirmation_token":"{token}","wait_s":5}}"#);
    assert_refused(&call(&p.a_at, "lamp_switch", &wrong).await, "arguments");
    assert!(
        lamp_on(&p.modbus).await,
        "a refused token switched the lamp"
    );
    let right = format!(r#"{{"on":false,"confirmation_token":"{token}","wait_s":5}}"#);
    let done = call(&p.a_at, "lamp_switch", &right).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(!lamp_on(&p.modbus).await, "the lamp did not switch off");
    p.wind_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_task_created_at_one_gateway_is_answered_at_another() {
    let Some(p) = two("shared_confirm_task").await else {
        return;
    };
    let (at_a, at_b) = (tasks_client(&p.a_at).await, tasks_client(&p.b_at).await);

    let asked = params("lamp_switch", json!({"on": true}));
    let CallToolResponse::Task(created) = at_a.call_tool_once(asked).await.unwrap() else {
        panic!("a Tasks client gets a task for an action");
    };
    assert_eq!(
        created.task.status,
        TaskStatus::InputRequired,
        "{created:?}"
    );
    let id = created.task.task_id;
    // The other gateway finds the question waiting under the task id.
    let seen = at_b.get_task(GetTaskParams::new(&id)).await.unwrap().task;
    let TaskPayload::InputRequired { input_requests } = seen.payload else {
        panic!("input_required at the other gateway: {seen:?}");
    };
    assert!(matches!(
        input_requests.get("confirm"),
        Some(InputRequest::Elicitation(_))
    ));
    assert!(!lamp_on(&p.modbus).await, "nothing moves before the answer");
    let mut yes = std::collections::BTreeMap::new();
    yes.insert(
        "confirm".to_string(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    at_b.update_task(UpdateTaskParams::new(&id, yes))
        .await
        .unwrap();
    let (status, result) = task_end(&at_a, &id).await;
    assert_eq!(status, TaskStatus::Completed);
    let result = result.expect("a completed task carries the tool result");
    assert_eq!(
        result["structuredContent"]["status"], "completed",
        "{result:?}"
    );
    assert!(lamp_on(&p.modbus).await, "the lamp did not switch on");
    for c in [at_a, at_b] {
        c.cancel().await.unwrap();
    }
    p.wind_up().await;
}
