//! A task-required, `confirm = true` action under `[server] confirm_by`, over Streamable HTTP:
//! the agent's Tasks client gets a `working` task carrying the token to pass on (its own answer
//! could not count, so it is not asked), the operator's yes — by `confirm_command` or by
//! `tasks/update` — runs the command as the agent's under the task's id, and a caller without
//! the device's actuate scope is journaled `rejected UNAUTHORIZED` rather than told to follow
//! tasks. Checked against the simulated slide and the journal.

mod common;

use closedloop_engine::Engine;
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use closedloop_sim::SimDevice;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, TaskPayload,
    TaskStatus, UpdateTaskParams,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const AGENT: &str = "agent-secret-71fa";
const OPERATOR: &str = "operator-secret-0c2e";
const VIEWER: &str = "viewer-secret-9d40";

/// The agent may move the slide; the operator and the viewer may only read; the operator
/// confirms. The move needs a person's yes and runs as a task only.
fn plant(journal: &str) -> String {
    let slide = common::plants::replace_line(
        &common::plants::slide_at(400.0),
        r#"description = "Move the slide.""#,
        "description = \"Move the slide.\"\nconfirm = true\ntask = \"required\"",
    );
    let token = |name: &str, secret: &str, scopes: &str| {
        format!(
            "[[server.token]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = {scopes}\n",
            common::sha256_hex(secret)
        )
    };
    format!(
        "[server]\nname = \"tasks-confirm-by\"\njournal = \"{journal}\"\nconfirm_by = [\"operator\"]\n{}{}{}{slide}",
        token("agent", AGENT, r#"["read", "actuate:slide"]"#),
        token("operator", OPERATOR, r#"["read"]"#),
        token("viewer", VIEWER, r#"["read"]"#),
    )
}

async fn serve(engine: &Arc<Engine>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let server = Server::new(Arc::clone(engine), "http");
    let options = HttpOptions::default();
    tokio::spawn(http::serve(
        listener,
        server,
        options,
        std::future::pending(),
    ));
    url
}

fn move_to(target_mm: f64) -> CallToolRequestParams {
    let args = json!({ "target_mm": target_mm });
    CallToolRequestParams::new("slide_move_to").with_arguments(args.as_object().cloned().unwrap())
}

fn yes() -> BTreeMap<String, serde_json::Value> {
    let answer = json!({"action": "accept", "content": {"confirm": true}});
    BTreeMap::from([("confirm".to_string(), answer)])
}

/// The agent asks for a move: a `working` task whose message carries the token; nothing moves.
async fn ask(agent: &common::TaskSession, target_mm: f64) -> (String, String) {
    let CallToolResponse::Task(created) = agent.call_tool_once(move_to(target_mm)).await.unwrap()
    else {
        panic!("a Tasks client gets a task");
    };
    let task = created.task;
    assert_eq!(task.status, TaskStatus::Working, "{task:?}");
    let message = task.status_message.unwrap_or_default();
    assert!(message.contains("holding the operator token"), "{message}");
    let token = message
        .split("confirmation_token ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the message carries the token: {message}"));
    (task.task_id, token.to_string())
}

/// Polls the task until it is no longer `working` (bounded).
async fn settled(c: &common::TaskSession, id: &str) -> rmcp::model::DetailedTask {
    for _ in 0..200 {
        let t = c.get_task(GetTaskParams::new(id)).await.unwrap().task;
        if t.task.status != TaskStatus::Working {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {id} still working");
}

async fn assert_moved(engine: &Engine, id: &str, slide: &SimDevice, target_mm: f64) {
    let r = engine.status(id, Duration::ZERO).await.unwrap();
    assert_eq!(serde_json::to_value(r.status).unwrap(), "completed");
    let position = slide.peek().position_mm.unwrap();
    assert!((position - target_mm).abs() < 0.5, "slide at {position}");
}

/// The journal names the agent as the commands' caller and the operator as who confirmed.
async fn assert_ran_as_agent(journal: &str, ids: &[String]) {
    let journal = closedloop_journal::Journal::open(journal).await.unwrap();
    for id in ids {
        let row = journal.get(id).await.unwrap().expect("journaled");
        assert_eq!(row.caller.as_deref(), Some("agent"));
        let events = journal.events(id).await.unwrap();
        let accepted = events.iter().find(|e| e.event == "accepted").unwrap();
        assert_eq!(accepted.data, json!({"confirmed_by": "operator"}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_confirm_by_a_tasks_client_follows_the_operators_confirmation_as_its_task() {
    let dir = tempfile::tempdir().unwrap();
    let journal = format!("sqlite://{}", dir.path().join("journal.db").display());
    let (engine, sims) = common::engine(&plant(&journal), dir.path()).await;
    let slide = &sims["slide"];
    let url = serve(&engine).await;
    let agent = common::http_task_session(&url, AGENT, true, true).await;

    let (id, token) = ask(&agent, 120.0).await;
    let waiting = agent.get_task(GetTaskParams::new(&id)).await.unwrap().task;
    assert_eq!(waiting.task.status, TaskStatus::Working);
    assert!(
        matches!(waiting.payload, TaskPayload::Working),
        "no question for the agent"
    );
    // The agent answering its own task: refused; nothing moves.
    let own = agent.update_task(UpdateTaskParams::new(&id, yes())).await;
    assert!(format!("{own:?}").contains("confirm_by"), "{own:?}");
    assert_eq!(slide.peek().target_mm, Some(0.0), "nothing was written");

    // The operator confirms with confirm_command: the agent's task follows the command.
    let operator = common::http_client(&url, OPERATOR).await;
    let args = json!({"confirmation_token": token, "wait_s": 5});
    let done = common::call(&operator, "confirm_command", args).await;
    assert_eq!(common::sc(&done)["command_id"], json!(id));
    assert_eq!(
        settled(&agent, &id).await.task.status,
        TaskStatus::Completed
    );
    assert_moved(&engine, &id, slide, 120.0).await;

    // The operator confirms with tasks/update: the command still runs as the agent's, with
    // the agent's scopes (the operator has none to move the slide).
    let (second, _) = ask(&agent, 60.0).await;
    let operator_tasks = common::http_task_session(&url, OPERATOR, true, true).await;
    let update = UpdateTaskParams::new(&second, yes());
    operator_tasks.update_task(update).await.unwrap();
    let ended = settled(&agent, &second).await.task.status;
    assert_eq!(ended, TaskStatus::Completed);
    assert_moved(&engine, &second, slide, 60.0).await;

    // The agent withdraws a request before anyone confirms it: rejected INTERLOCK, and the
    // operator's token is spent.
    let (third, token) = ask(&agent, 10.0).await;
    agent
        .cancel_task(CancelTaskParams::new(&third))
        .await
        .unwrap();
    assert_eq!(
        settled(&agent, &third).await.task.status,
        TaskStatus::Completed
    );
    let r = engine.status(&third, Duration::ZERO).await.unwrap();
    assert_eq!(serde_json::to_value(r.status).unwrap(), "rejected");
    assert_eq!(r.error_code.as_ref().map(|c| c.as_str()), Some("INTERLOCK"));
    let late = json!({"confirmation_token": token, "wait_s": 1});
    let late = common::call(&operator, "confirm_command", late).await;
    assert_eq!(common::sc(&late)["status"], "rejected", "{late:?}");
    assert_moved(&engine, &second, slide, 60.0).await;
    engine.shutdown().await;
    assert_ran_as_agent(&journal, &[id, second]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_the_scope_is_journaled_unauthorized_before_any_task_requirement() {
    let dir = tempfile::tempdir().unwrap();
    let journal = format!("sqlite://{}", dir.path().join("journal.db").display());
    let (engine, sims) = common::engine(&plant(&journal), dir.path()).await;
    let url = serve(&engine).await;
    // A 2025 client without tasks, and without actuate:slide.
    let viewer = common::http_client(&url, VIEWER).await;
    let r = common::call(&viewer, "slide_move_to", json!({"target_mm": 90.0})).await;
    let v = common::sc(&r);
    assert_eq!(v["status"], "rejected", "{v}");
    assert_eq!(v["error_code"], "UNAUTHORIZED", "{v}");
    let listed = engine.list(None, None, 10).await.unwrap();
    assert_eq!(listed.len(), 1, "the attempt is journaled");
    assert_eq!(listed[0].command_id, v["command_id"].as_str().unwrap());
    assert_eq!(
        sims["slide"].peek().target_mm,
        Some(0.0),
        "nothing was written"
    );
    engine.shutdown().await;
}
