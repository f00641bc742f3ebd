//! What a Tasks client is told about how long a task lives and how its answers are taken, found
//! running the conformance suite's Tasks scenarios against closedloop (tests/conformance):
//!
//! - `tasks/update` with answers to keys the task never asked is acknowledged and ignored (the
//!   question stays open), as is one after the task stopped asking; only an unknown task id is
//!   an error (SEP-2663: a client may answer in parts; only outstanding keys count);
//! - `tasks/cancel` of a confirmation still waiting is a "no": acknowledged, journaled as rejected,
//!   nothing moves (it used to be `-32602` "no task" for a task `tasks/get` had just shown);
//! - `ttlMs` says how long `tasks/get` answers: `[server] confirm_ttl_s` for a confirmation
//!   waiting, `[server] retain` for a command (it used to be null, "unlimited", for both).

mod common;

use closedloop_engine::Engine;
use closedloop_sim::SimDevice;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    TaskPayload, TaskStatus, UpdateTaskParams,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A door a person confirms every move of.
const DOOR: &str = r#"
[[device]]
id = "door"
description = "Roller door; a person confirms every move"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "open"
description = "Open the door."
params = {}
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.02
confirm = true
"#;

/// The lamp and the door, under a `[server]` table with `extra` lines.
fn plant(extra: &str) -> String {
    let server = format!("[server]\nname = \"t\"\njournal = \"sqlite://journal.db\"\n{extra}");
    format!("{server}\n{}{DOOR}", common::plants::LAMP)
}

type Client = common::TaskSession;

/// A 2026-07-28 Tasks client of closedloop over `plant`.
async fn start(
    plant: &str,
    dir: &std::path::Path,
) -> (Client, Arc<Engine>, BTreeMap<String, SimDevice>) {
    let (engine, sims) = common::engine(plant, dir).await;
    let b = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tasks"));
    let client = common::task_session(b, true, true).await;
    (client, engine, sims)
}

async fn call_task(c: &Client, tool: &str, args: Value) -> CreateTaskResult {
    let params = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    match c.call_tool_once(params).await.unwrap() {
        CallToolResponse::Task(t) => t,
        other => panic!("{tool}: a Tasks client gets a task, got {other:?}"),
    }
}

fn answers(key: &str, answer: Value) -> BTreeMap<String, Value> {
    BTreeMap::from([(key.to_string(), answer)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_update_without_the_confirm_answer_is_acked_and_the_task_keeps_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let (c, engine, _) = start(&plant(""), dir.path()).await;
    let id = call_task(&c, "door_open", json!({})).await.task.task_id;

    let unasked = answers("unknown-key", json!({"ignored": true}));
    c.update_task(UpdateTaskParams::new(&id, unasked))
        .await
        .expect("answers to keys never asked are acknowledged");
    let t = c.get_task(GetTaskParams::new(&id)).await.unwrap().task;
    let TaskPayload::InputRequired { input_requests } = t.payload else {
        panic!("the question stays open: {:?}", t.task.status)
    };
    assert!(input_requests.contains_key("confirm"));
    assert!(
        engine.status(&id, Duration::ZERO).await.is_err(),
        "nothing ran"
    );

    let yes = answers(
        "confirm",
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    c.update_task(UpdateTaskParams::new(&id, yes.clone()))
        .await
        .unwrap();
    let r = common::task_result(&c, &id).await;
    assert_eq!(r["structuredContent"]["status"], "completed", "{r:?}");

    // Asked again after it stopped asking: acknowledged, and nothing runs a second time.
    c.update_task(UpdateTaskParams::new(&id, yes))
        .await
        .expect("a task no longer asking ignores answers");
    let listed = engine.list(Some("door"), None, 10).await.unwrap();
    assert_eq!(listed.len(), 1, "one command, run once: {listed:?}");
    let e = c
        .update_task(UpdateTaskParams::new("no-such-task", BTreeMap::new()))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, rmcp::ServiceError::McpError(d) if d.code == rmcp::model::ErrorCode::INVALID_PARAMS),
        "{e:?}"
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_of_a_waiting_confirmation_is_a_no_and_moves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _engine, sims) = start(&plant(""), dir.path()).await;
    let id = call_task(&c, "door_open", json!({})).await.task.task_id;
    c.cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("a waiting confirmation can be cancelled");
    let r = common::task_result(&c, &id).await;
    assert_eq!(
        (
            r["isError"].as_bool(),
            r["structuredContent"]["status"].as_str(),
            r["structuredContent"]["error_code"].as_str()
        ),
        (Some(true), Some("rejected"), Some("INTERLOCK")),
        "{r:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_ne!(
        sims["door"].peek().contact,
        Some(true),
        "the door never moved"
    );
    // The answer is final: cancelling again acknowledges the ended task.
    c.cancel_task(CancelTaskParams::new(&id)).await.unwrap();
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_s_ttl_is_how_long_closedloop_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _engine, _) = start(&plant("retain = \"1h\"\nconfirm_ttl_s = 30"), dir.path()).await;
    let created = call_task(&c, "lamp_switch", json!({"on": true})).await.task;
    assert_eq!(created.ttl_ms, Some(3_600_000), "the journal keeps it 1 h");
    let got = c
        .get_task(GetTaskParams::new(&created.task_id))
        .await
        .unwrap();
    assert_eq!(got.task.task.ttl_ms, Some(3_600_000));
    let waiting = call_task(&c, "door_open", json!({})).await.task;
    assert_eq!(
        (waiting.status, waiting.ttl_ms),
        (TaskStatus::InputRequired, Some(30_000)),
        "a confirmation waits confirm_ttl_s"
    );
    let got = c
        .get_task(GetTaskParams::new(&waiting.task_id))
        .await
        .unwrap();
    assert_eq!(got.task.task.ttl_ms, Some(30_000));
    c.cancel().await.unwrap();

    // Without `retain` the journal keeps every command: unlimited (null).
    let dir = tempfile::tempdir().unwrap();
    let (c, _engine, _) = start(&plant(""), dir.path()).await;
    let created = call_task(&c, "lamp_switch", json!({"on": true})).await.task;
    assert_eq!(created.ttl_ms, None);
    c.cancel().await.unwrap();
}
