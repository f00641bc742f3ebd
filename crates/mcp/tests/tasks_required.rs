//! `task = "required"`: an action only a client that follows MCP tasks may call. Three rmcp
//! clients on one plant — a 2026 client declaring the Tasks extension, a 2026 client without it,
//! and a 2025 session that lists it (2025 sessions never get tasks) — checked against the
//! journal and the simulated relay's coil.

mod common;

use closedloop_engine::Engine;
use closedloop_sim::SimDevice;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorCode, TASKS_EXTENSION_ID};
use rmcp::service::ServiceError;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A kiln door whose action runs as a task only.
const PLANT: &str = r#"
[server]
name = "tasks-required-test"
journal = "sqlite://journal.db"

[[device]]
id = "kiln"
description = "Kiln door interlock relay"
driver = { kind = "sim", model = "relay" }
poll_ms = 20
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "close"
description = "Close the kiln door."
params = {}
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.02
task = "required"
"#;

type Running = common::TaskSession;

async fn connect(engine: &Arc<Engine>, tasks: bool, modern: bool) -> Running {
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(engine), "t"));
    common::task_session(io, tasks, modern).await
}

fn close() -> CallToolRequestParams {
    CallToolRequestParams::new("kiln_close").with_arguments(json!({}).as_object().cloned().unwrap())
}

async fn start(dir: &std::path::Path) -> (Arc<Engine>, BTreeMap<String, SimDevice>) {
    common::engine(PLANT, dir).await
}

/// The refusal a client without tasks gets: -32021 with the extension it must declare, and
/// nothing journaled or written.
async fn assert_refused(c: &Running, engine: &Engine, kiln: &SimDevice) {
    let err = c.call_tool_once(close()).await.unwrap_err();
    let ServiceError::McpError(e) = err else {
        panic!("a JSON-RPC error, not {err:?}");
    };
    assert_eq!(
        e.code,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "{e:?}"
    );
    assert_eq!(e.code.0, -32021);
    assert!(
        e.message.contains("kiln_close runs as an MCP task"),
        "{e:?}"
    );
    assert!(e.message.contains("nothing was sent"), "{e:?}");
    let data = e.data.expect("data names the capability");
    assert_eq!(
        data["requiredCapabilities"]["extensions"][TASKS_EXTENSION_ID],
        json!({})
    );
    assert!(engine.list(None, None, 10).await.unwrap().is_empty());
    assert_eq!(kiln.peek().coils, [false], "nothing reached the relay");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_required_action_refuses_clients_without_tasks_and_runs_as_a_task_for_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, sims) = start(dir.path()).await;
    let kiln = &sims["kiln"];

    let plain = connect(&engine, false, true).await;
    let tools = plain.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "kiln_close").unwrap();
    let description = tool.description.as_deref().unwrap();
    assert!(
        description.contains("It runs as an MCP task: only a client that follows tasks"),
        "{description}"
    );
    assert_refused(&plain, &engine, kiln).await;
    plain.cancel().await.unwrap();

    // A 2025 session cannot follow a task even when it lists the extension.
    let old = connect(&engine, true, false).await;
    assert_refused(&old, &engine, kiln).await;
    old.cancel().await.unwrap();

    let tasks = connect(&engine, true, true).await;
    let CallToolResponse::Task(created) = tasks.call_tool_once(close()).await.unwrap() else {
        panic!("a Tasks client gets a task");
    };
    let id = created.task.task_id.clone();
    let done = common::task_result(&tasks, &id).await;
    assert_eq!(done["structuredContent"]["status"], "completed", "{done:?}");
    let r = engine.status(&id, Duration::ZERO).await.unwrap();
    assert_eq!(serde_json::to_value(r.status).unwrap(), "completed");
    assert_eq!(kiln.peek().contact, Some(true), "the door really closed");
    tasks.cancel().await.unwrap();
}
