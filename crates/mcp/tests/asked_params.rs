//! Parameters a person answers (`ask` in the plant file), through real MCP sessions (rmcp's
//! client) over an in-process pipe: asked in an SEP-2322 round before anything exists
//! (2026-07-28), asked with `elicitation/create` (2025), refused when passed by the caller,
//! refused with -32021 when the client cannot ask anyone; the simulated relay is the ground truth.

mod common;

use closedloop_sim::SimDevice;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, InputRequest,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A release relay: `batch` comes from the call, `signer` from the person.
const PLANT: &str = r#"
[server]
name = "ask-test"
journal = "sqlite::memory:"

[[device]]
id = "batch"
description = "Batch release relay"
driver = { kind = "sim", model = "relay" }
poll_ms = 10
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "release"
description = "Release a batch under the name of the person who signs it."
params = { number = { type = "integer", min = 1.0, description = "the batch number" }, signer = { type = "string", description = "who signs the release", ask = "Who signs this release?" } }
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.05
"#;

/// A client whose person answers forms with `answer` (`None`: it declares no elicitation).
#[derive(Clone)]
struct Person {
    answer: Option<(ElicitationAction, Value)>,
    tasks: bool,
}

impl rmcp::ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        let caps = match (self.answer.is_some(), self.tasks) {
            (true, true) => ClientCapabilities::builder()
                .enable_elicitation()
                .enable_tasks()
                .build(),
            (true, false) => ClientCapabilities::builder().enable_elicitation().build(),
            (false, true) => ClientCapabilities::builder().enable_tasks().build(),
            (false, false) => ClientCapabilities::default(),
        };
        ClientConfig::new(caps, Implementation::new("person", "0.0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        assert!(message.starts_with("Who signs this release?"), "{message}");
        let (action, content) = self.answer.clone().expect("asked only with elicitation");
        Ok(ElicitResult::new(action).with_content(content))
    }
}

type Session = RunningService<RoleClient, Person>;

async fn start(person: Person, modern: bool) -> (Session, BTreeMap<String, SimDevice>) {
    start_on(PLANT, person, modern).await
}

async fn start_on(
    plant: &str,
    person: Person,
    modern: bool,
) -> (Session, BTreeMap<String, SimDevice>) {
    let (engine, sims) = common::engine(plant, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    let session = match modern {
        false => person.serve(io).await.unwrap(),
        true => {
            let lifecycle = rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            };
            rmcp::ClientServiceExt::serve_with_lifecycle(person, io, lifecycle)
                .await
                .unwrap()
        }
    };
    (session, sims)
}

fn release(args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("batch_release").with_arguments(args.as_object().cloned().unwrap())
}

async fn once(c: &Session, p: CallToolRequestParams) -> CallToolResponse {
    c.call_tool_once(p).await.expect("a tools/call answer")
}

/// The journal's commands, through `list_commands`.
async fn journaled(c: &Session) -> Vec<Value> {
    let p = CallToolRequestParams::new("list_commands");
    let r = c.call_tool(p).await.unwrap();
    let v = r.structured_content.expect("structured content");
    v["commands"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_is_asked_before_the_task_and_its_answer_is_journaled() {
    let person = Person {
        answer: Some((ElicitationAction::Accept, json!({}))),
        tasks: true,
    };
    let (c, sims) = start(person, true).await;
    let tool = c
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "batch_release")
        .unwrap();
    assert!(
        tool.input_schema["properties"].get("signer").is_none(),
        "{tool:?}"
    );

    let CallToolResponse::InputRequired(asked) = once(&c, release(json!({"number": 7}))).await
    else {
        panic!("round 1 must ask the person");
    };
    let requests = asked.input_requests.expect("inputRequests");
    let Some(InputRequest::Elicitation(form)) = requests.get("ask") else {
        panic!("one form under \"ask\": {requests:?}");
    };
    let form = serde_json::to_value(&form.params).unwrap();
    assert_eq!(
        form["requestedSchema"]["required"],
        json!(["signer"]),
        "{form}"
    );
    assert_eq!(
        form["requestedSchema"]["properties"]["signer"]["title"],
        "Who signs this release?"
    );
    assert!(
        journaled(&c).await.is_empty(),
        "nothing exists before the answer"
    );
    assert_eq!(sims["batch"].peek().coils, [false]);

    let answers = BTreeMap::from([(
        "ask".to_string(),
        json!({"action": "accept", "content": {"signer": "Alice"}}),
    )]);
    let retry = release(json!({"number": 7})).with_input_responses(answers);
    let CallToolResponse::Task(task) = once(&c, retry).await else {
        panic!("the answered retry must be the task");
    };
    let id = task.task.task_id.clone();
    let done = Value::Object(common::task_result(&c, &id).await);
    assert_eq!(done["structuredContent"]["status"], "completed", "{done}");
    assert_eq!(
        done["structuredContent"]["params"],
        json!({"number": 7.0, "signer": "Alice"})
    );
    let text = done["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("signer = \"Alice\""), "{text}");
    assert_eq!(
        sims["batch"].peek().contact,
        Some(true),
        "the relay really closed"
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declined_form_is_rejected_interlock_and_nothing_is_sent() {
    let person = Person {
        answer: Some((ElicitationAction::Accept, json!({}))),
        tasks: false,
    };
    let (c, sims) = start(person, true).await;
    let answers = BTreeMap::from([("ask".to_string(), json!({"action": "decline"}))]);
    let p = release(json!({"number": 3})).with_input_responses(answers);
    let CallToolResponse::Complete(r) = once(&c, p).await else {
        panic!("a no is answered at once");
    };
    let v = r.structured_content.unwrap();
    assert_eq!(
        (r.is_error, v["status"].as_str(), v["error_code"].as_str()),
        (Some(true), Some("rejected"), Some("INTERLOCK")),
        "{v}"
    );
    assert!(journaled(&c).await.is_empty());
    assert_eq!(
        sims["batch"].peek().coils,
        [false],
        "nothing reached the relay"
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_passed_by_the_caller_is_refused_invalid_params() {
    let person = Person {
        answer: Some((ElicitationAction::Accept, json!({"signer": "Mallory"}))),
        tasks: false,
    };
    let (c, sims) = start(person, false).await;
    let p = release(json!({"number": 3, "signer": "Alice"}));
    let r = c.call_tool(p).await.unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(
        (r.is_error, v["error_code"].as_str()),
        (Some(true), Some("INVALID_PARAMS")),
        "{v}"
    );
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("signer is answered by the person"),
        "{v}"
    );
    assert!(journaled(&c).await.is_empty());
    assert_eq!(sims["batch"].peek().coils, [false]);
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_is_asked_with_elicitation() {
    let person = Person {
        answer: Some((ElicitationAction::Accept, json!({"signer": "Bob"}))),
        tasks: false,
    };
    let (c, sims) = start(person, false).await;
    let r = c
        .call_tool(release(json!({"number": 12, "wait_s": 5})))
        .await
        .unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["params"], json!({"number": 12.0, "signer": "Bob"}));
    assert_eq!(sims["batch"].peek().contact, Some(true));
    c.cancel().await.unwrap();

    let person = Person {
        answer: Some((ElicitationAction::Cancel, Value::Null)),
        tasks: false,
    };
    let (c, sims) = start(person, false).await;
    let r = c.call_tool(release(json!({"number": 12}))).await.unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(
        (v["status"].as_str(), v["error_code"].as_str()),
        (Some("rejected"), Some("INTERLOCK")),
        "{v}"
    );
    assert_eq!(sims["batch"].peek().coils, [false]);
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_elicitation_gets_missing_capability() {
    for modern in [false, true] {
        let person = Person {
            answer: None,
            tasks: modern,
        };
        let (c, sims) = start(person, modern).await;
        let e = c
            .call_tool_once(release(json!({"number": 1})))
            .await
            .unwrap_err();
        let rmcp::ServiceError::McpError(e) = e else {
            panic!("a JSON-RPC error: {e}");
        };
        assert_eq!(
            e.code,
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        );
        assert_eq!(
            e.data,
            Some(json!({"requiredCapabilities": {"elicitation": {}}}))
        );
        assert!(
            e.message.contains("asks the person for signer"),
            "{}",
            e.message
        );
        assert_eq!(sims["batch"].peek().coils, [false]);
        c.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_generic_mode_only_run_action_asks_the_person() {
    let generic = PLANT.replace(
        "name = \"ask-test\"",
        "name = \"ask-test\"\ntools = \"generic\"",
    );
    let person = Person {
        answer: Some((ElicitationAction::Accept, json!({}))),
        tasks: false,
    };
    let (c, sims) = start_on(&generic, person, true).await;
    // The per-action tool does not exist in generic mode: refused as unknown, nobody asked.
    let e = c
        .call_tool_once(release(json!({"number": 7})))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(e) = e else {
        panic!("a JSON-RPC error: {e}");
    };
    assert!(
        e.message.contains("unknown tool \"batch_release\""),
        "{}",
        e.message
    );
    let p = CallToolRequestParams::new("run_action").with_arguments(
        json!({"device": "batch", "action": "release", "params": {"number": 7}})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let CallToolResponse::InputRequired(asked) = once(&c, p.clone()).await else {
        panic!("run_action asks the person");
    };
    assert!(asked.input_requests.unwrap().contains_key("ask"));
    let answers = BTreeMap::from([(
        "ask".to_string(),
        json!({"action": "accept", "content": {"signer": "Carol"}}),
    )]);
    let mut p = p.with_input_responses(answers);
    p.arguments
        .as_mut()
        .unwrap()
        .insert("wait_s".into(), json!(5));
    let CallToolResponse::Complete(r) = once(&c, p).await else {
        panic!("the answered run_action runs");
    };
    let v = r.structured_content.unwrap();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["params"]["signer"], "Carol");
    assert_eq!(sims["batch"].peek().contact, Some(true));
    c.cancel().await.unwrap();
}
