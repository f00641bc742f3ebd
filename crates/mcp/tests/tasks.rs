//! The Tasks extension with a hand-written Tasks client (rmcp's client declaring
//! `io.modelcontextprotocol/tasks`): an action returns a task whose id is the command_id, and the
//! client polls `tasks/get` to the terminal state — across a gateway restart.

mod common;

use closedloop_engine::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetTaskParams, TaskPayload, TaskStatus,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const SERVER: &str = r#"
[server]
name = "tasks-test"
journal = "sqlite://journal.db"
"#;

/// A door a person confirms every move of, and an unpowered fan.
const DOOR_AND_FAN: &str = r#"
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

[[device]]
id = "fan"
description = "Unpowered fan"
driver = { kind = "sim", model = "relay", faults = [{ kind = "power_off" }] }
poll_ms = 20
liveness = { max_silence_s = 0.3 }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the fan."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02
"#;

/// The shared lamp, whose contact must stay put for 1.5 s, then `DOOR_AND_FAN`.
fn plant() -> String {
    let lamp = common::plants::replace_line(
        common::plants::LAMP,
        "expect_s = 0.02",
        "expect_s = 3.0\nhold_ms = 1500",
    );
    format!("{SERVER}\n{lamp}{DOOR_AND_FAN}")
}

type Client = common::TaskSession;

async fn start(dir: &std::path::Path) -> (Client, Arc<Engine>) {
    let (engine, _) = common::engine(&plant(), dir).await;
    let b = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tasks"));
    let client = common::task_session(b, true, true).await;
    (client, engine)
}

async fn task_status(
    c: &Client,
    id: &str,
) -> (
    TaskStatus,
    Option<serde_json::Map<String, serde_json::Value>>,
) {
    let t = c.get_task(GetTaskParams::new(id)).await.unwrap().task;
    let result = match t.payload {
        TaskPayload::Completed { result } => Some(result),
        _ => None,
    };
    (t.task.status, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_the_command_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (c, engine) = start(dir.path()).await;
    let params = CallToolRequestParams::new("lamp_switch")
        .with_arguments(json!({"on": false}).as_object().cloned().unwrap());
    let CallToolResponse::Task(created) = c.call_tool_once(params).await.unwrap() else {
        panic!("a Tasks client gets a task for an action");
    };
    let id = created.task.task_id.clone();
    assert_eq!(created.task.status, TaskStatus::Working);
    assert!(
        created
            .task
            .poll_interval_ms
            .is_some_and(|p| (50..=2000).contains(&p))
    );
    let status = engine.status(&id, Duration::ZERO).await.unwrap();
    assert_eq!(status.command_id, id, "taskId is the command_id");
    assert_eq!(task_status(&c, &id).await.0, TaskStatus::Working);

    // Restart the gateway while the command is still holding (it has no cancel plan, so it stays
    // `running` in the journal).
    engine.shutdown().await;
    c.cancel().await.unwrap();
    drop(engine);
    let (c, _engine) = start(dir.path()).await;
    let mut last = TaskStatus::Working;
    let mut result = None;
    for _ in 0..100 {
        let (s, r) = task_status(&c, &id).await;
        last = s;
        result = r;
        if s.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last, TaskStatus::Completed);
    let result = result.expect("a completed task carries the tool result");
    assert_eq!(
        result["structuredContent"]["status"], "completed",
        "{result:?}"
    );
    assert_eq!(result["isError"], false);
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_commands_are_completed_tasks_with_is_error_and_cancel_maps_to_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (c, _engine) = start(dir.path()).await;
    let params = CallToolRequestParams::new("fan_switch")
        .with_arguments(json!({"on": true}).as_object().cloned().unwrap());
    let CallToolResponse::Task(created) = c.call_tool_once(params).await.unwrap() else {
        panic!("task")
    };
    let (s, r) = task_status(&c, &created.task.task_id).await;
    assert_eq!(s, TaskStatus::Completed);
    let r = r.unwrap();
    assert_eq!(
        (
            r["isError"].as_bool(),
            r["structuredContent"]["error_code"].as_str()
        ),
        (Some(true), Some("DEVICE_OFFLINE"))
    );

    let params = CallToolRequestParams::new("lamp_switch")
        .with_arguments(json!({"on": true}).as_object().cloned().unwrap());
    let CallToolResponse::Task(created) = c.call_tool_once(params).await.unwrap() else {
        panic!("task")
    };
    c.cancel_task(rmcp::model::CancelTaskParams::new(
        created.task.task_id.clone(),
    ))
    .await
    .unwrap();
    let (s, _) = task_status(&c, &created.task.task_id).await;
    assert_eq!(s, TaskStatus::Cancelled);
    let e = c
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .unwrap_err();
    assert!(matches!(e, rmcp::ServiceError::McpError(_)));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_is_a_task_in_input_required_answered_by_tasks_update() {
    use rmcp::model::{InputRequest, UpdateTaskParams};
    let dir = tempfile::tempdir().unwrap();
    let (c, engine) = start(dir.path()).await;
    for (answer, expect_status) in [("accept", "completed"), ("decline", "rejected")] {
        let params = CallToolRequestParams::new("door_open").with_arguments(serde_json::Map::new());
        let CallToolResponse::Task(created) = c.call_tool_once(params).await.unwrap() else {
            panic!("task")
        };
        assert_eq!(created.task.status, TaskStatus::InputRequired);
        let id = created.task.task_id.clone();
        let t = c.get_task(GetTaskParams::new(&id)).await.unwrap().task;
        let TaskPayload::InputRequired { input_requests } = t.payload else {
            panic!("input_required")
        };
        assert!(matches!(
            input_requests.get("confirm"),
            Some(InputRequest::Elicitation(_))
        ));
        assert!(
            engine.status(&id, Duration::ZERO).await.is_err(),
            "nothing runs before the answer"
        );

        let mut responses = std::collections::BTreeMap::new();
        responses.insert(
            "confirm".to_string(),
            json!({"action": answer, "content": {"confirm": answer == "accept"}}),
        );
        c.update_task(UpdateTaskParams::new(&id, responses))
            .await
            .unwrap();
        let mut done = None;
        for _ in 0..50 {
            let (s, r) = task_status(&c, &id).await;
            if s.is_terminal() {
                done = r;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = done.expect("the task ends");
        assert_eq!(r["structuredContent"]["status"], expect_status, "{r:?}");
        assert_eq!(
            r["structuredContent"]["command_id"],
            json!(id),
            "the task id is the command id"
        );
        // An answered confirmation cannot be answered again: a second answer is acknowledged
        // and ignored (SEP-2663), and the command stays the one that ran.
        let mut flipped = std::collections::BTreeMap::new();
        flipped.insert(
            "confirm".to_string(),
            json!({"action": "accept", "content": {"confirm": answer != "accept"}}),
        );
        c.update_task(UpdateTaskParams::new(&id, flipped))
            .await
            .unwrap();
        let (_, again) = task_status(&c, &id).await;
        assert_eq!(
            again.expect("still ended")["structuredContent"]["status"],
            expect_status
        );
    }
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_listing_the_extension_gets_plain_results() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = common::engine(&plant(), dir.path()).await;
    let io = common::pipe(closedloop_mcp::Server::new(engine, "tasks"));
    let c = common::task_session(io, true, false).await;
    let params = CallToolRequestParams::new("fan_switch")
        .with_arguments(json!({"on": true}).as_object().cloned().unwrap());
    let CallToolResponse::Complete(r) = c.call_tool_once(params).await.unwrap() else {
        panic!("a 2025 session gets the tool result itself");
    };
    assert_eq!(
        r.structured_content.unwrap()["error_code"],
        "DEVICE_OFFLINE"
    );
    c.cancel().await.unwrap();
}
