//! A confirmation with a `checklist`: each item its own question, through real MCP sessions
//! (rmcp's client) over an in-process pipe. A Tasks client may answer the items one at a time
//! (SEP-2663 partial fulfilment); a 2025 client ticks one box per item; a client that can do
//! neither is told the items with its token. The simulated press is the ground truth.

mod common;

use closedloop_sim::SimDevice;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, GetTaskParams, Implementation, TaskPayload, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A press its operator confirms through two checks.
const PLANT: &str = r#"
[server]
name = "checklist-test"
journal = "sqlite::memory:"

[[device]]
id = "press"
description = "Stamping press"
driver = { kind = "sim", model = "relay" }
poll_ms = 10
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "stroke"
description = "Make one press stroke."
params = {}
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.05
confirm = true
checklist = ["the guard is closed", "the die is clamped"]
"#;

async fn tasks_client() -> (common::TaskSession, BTreeMap<String, SimDevice>) {
    let (engine, sims) = common::engine(PLANT, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    (common::task_session(io, true, true).await, sims)
}

fn stroke() -> CallToolRequestParams {
    CallToolRequestParams::new("press_stroke")
}

/// The task's open questions (keys of `inputRequests`), or `None` once it ended.
async fn open_questions(c: &common::TaskSession, id: &str) -> Option<Vec<String>> {
    let got = c.get_task(GetTaskParams::new(id)).await.unwrap().task;
    match got.payload {
        TaskPayload::InputRequired { input_requests } => Some(input_requests.into_keys().collect()),
        _ => None,
    }
}

async fn answer(c: &common::TaskSession, id: &str, key: &str, yes: bool) {
    let a = json!({"action": "accept", "content": {"name": "op", "confirm": yes}});
    let answers = BTreeMap::from([(key.to_string(), a)]);
    c.update_task(UpdateTaskParams::new(id, answers))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_client_answers_the_checklist_one_item_at_a_time() {
    let (c, sims) = tasks_client().await;
    let CallToolResponse::Task(t) = c.call_tool_once(stroke()).await.unwrap() else {
        panic!("a Tasks client gets a task");
    };
    let id = t.task.task_id;
    assert_eq!(
        open_questions(&c, &id).await,
        Some(vec!["check_1".into(), "check_2".into()])
    );
    answer(&c, &id, "check_1", true).await;
    assert_eq!(
        open_questions(&c, &id).await,
        Some(vec!["check_2".into()]),
        "only the other one stays open"
    );
    assert_eq!(
        sims["press"].peek().coils,
        [false],
        "nothing moves on a partial answer"
    );
    answer(&c, &id, "check_1", false).await; // already answered: ignored
    answer(&c, &id, "check_2", true).await;
    let r = common::task_result(&c, &id).await;
    assert_eq!(r["structuredContent"]["status"], "completed", "{r:?}");
    assert_eq!(
        sims["press"].peek().contact,
        Some(true),
        "the press really stroked"
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_no_to_a_checklist_item_rejects_the_command_interlock() {
    let (c, sims) = tasks_client().await;
    let CallToolResponse::Task(t) = c.call_tool_once(stroke()).await.unwrap() else {
        panic!("a Tasks client gets a task");
    };
    let id = t.task.task_id;
    answer(&c, &id, "check_2", true).await;
    answer(&c, &id, "check_1", false).await;
    let r = common::task_result(&c, &id).await;
    let v = &r["structuredContent"];
    assert_eq!(
        (v["status"].as_str(), v["error_code"].as_str()),
        (Some("rejected"), Some("INTERLOCK")),
        "{v}"
    );
    assert_eq!(
        sims["press"].peek().coils,
        [false],
        "nothing reached the press"
    );
    c.cancel().await.unwrap();
}

/// A 2025 client whose person ticks the boxes in `ticks` (by key).
#[derive(Clone)]
struct Ticker {
    ticks: Value,
}

impl rmcp::ClientHandler for Ticker {
    fn get_info(&self) -> ClientConfig {
        let caps = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(caps, Implementation::new("ticker", "0.0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let form = serde_json::to_value(&request).unwrap();
        let fields = &form["requestedSchema"]["properties"];
        assert_eq!(fields["check_1"]["title"], "the guard is closed", "{form}");
        assert_eq!(fields["check_2"]["title"], "the die is clamped", "{form}");
        assert_eq!(
            form["requestedSchema"]["required"],
            json!(["check_1", "check_2"])
        );
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(self.ticks.clone()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_ticks_one_box_per_item_and_all_must_be_ticked() {
    for (ticks, status, moved) in [
        (json!({"check_1": true, "check_2": true}), "completed", true),
        (
            json!({"check_1": true, "check_2": false}),
            "rejected",
            false,
        ),
    ] {
        let (engine, sims) = common::engine(PLANT, std::path::Path::new(".")).await;
        let io = common::pipe(closedloop_mcp::Server::new(engine, "tester"));
        let c = Ticker { ticks }.serve(io).await.unwrap();
        let args = json!({"wait_s": 5}).as_object().cloned().unwrap();
        let r = c.call_tool(stroke().with_arguments(args)).await.unwrap();
        let v = r.structured_content.unwrap();
        assert_eq!(v["status"], status, "{v}");
        if !moved {
            assert_eq!(v["error_code"], "INTERLOCK");
            assert!(
                v["detail"]
                    .as_str()
                    .unwrap()
                    .contains("did not tick every check"),
                "{v}"
            );
        }
        assert_eq!(sims["press"].peek().coils, [moved]);
        c.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_token_names_the_checklist_in_its_detail() {
    let (engine, sims) = common::engine(PLANT, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(engine, "tester"));
    let c = ().serve(io).await.unwrap();
    let r = c.call_tool(stroke()).await.unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(v["status"], "needs_confirmation", "{v}");
    let detail = v["detail"].as_str().unwrap();
    assert!(
        detail.contains("the person checks each of: the guard is closed; the die is clamped."),
        "{detail}"
    );
    assert_eq!(sims["press"].peek().coils, [false]);
    c.cancel().await.unwrap();
}
