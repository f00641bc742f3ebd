//! Confirmation of dangerous actions (`confirm = true`) and the generic tool mode, through a real
//! MCP session over an in-process pipe.

mod common;

use closedloop_engine::Engine;
use closedloop_sim::SimDevice;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

type Client = RunningService<RoleClient, ()>;

/// A slide a person confirms every move of (no fault signal, no cancel).
const SLIDE: &str = r#"
[server]
name = "confirm-test"
journal = "sqlite::memory:"
SERVER_EXTRA

[[device]]
id = "slide"
description = "Linear slide"
driver = { kind = "sim", model = "stepper", speed_mm_s = 200.0, travel_mm = [0.0, 300.0] }
poll_ms = 20
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving      = { discrete_input = 0 }
[[device.action]]
name = "move_to"
description = "Move the slide; a person confirms every move."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving"
expect_s = "abs(params.target_mm - position_mm) / 200.0 + 0.05"
confirm = true
"#;

/// `SLIDE` with the `[server]` lines `extra`, and the shared lamp.
fn plant(extra: &str) -> String {
    format!(
        "{}\n{}",
        SLIDE.replace("SERVER_EXTRA", extra),
        common::plants::LAMP
    )
}

async fn start(extra: &str) -> (Client, BTreeMap<String, SimDevice>, Arc<Engine>) {
    let src = plant(extra);
    let (engine, sims) = common::engine(&src, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    (().serve(io).await.unwrap(), sims, engine)
}

async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    c.call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_moves_until_confirmed_and_a_token_runs_once_with_the_same_arguments() {
    let (c, sims, _engine) = start("").await;
    let slide = &sims["slide"];
    let r = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 100.0, "wait_s": 1}),
    )
    .await;
    assert_eq!(
        sc(&r)["status"],
        "needs_confirmation",
        "{:?}",
        r.structured_content
    );
    assert_eq!(r.is_error, Some(false));
    let token = sc(&r)["confirmation_token"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(slide.peek().target_mm, Some(0.0), "nothing was written");

    // The same tool with the token but other arguments: refused, nothing runs, token kept.
    let wrong = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 120.0, "confirmation_token": token}),
    )
    .await;
    assert_eq!(
        (wrong.is_error, sc(&wrong)["error_code"].as_str()),
        (Some(true), Some("INVALID_PARAMS"))
    );
    assert!(sc(&wrong)["detail"].as_str().unwrap().contains("arguments"));
    assert_eq!(slide.peek().target_mm, Some(0.0));

    let ok = call(
        &c,
        "confirm_command",
        json!({"confirmation_token": token, "wait_s": 5}),
    )
    .await;
    assert_eq!(
        sc(&ok)["status"],
        "completed",
        "{:?}",
        ok.structured_content
    );
    assert!((slide.peek().position_mm.unwrap() - 100.0).abs() < 0.5);

    let again = call(&c, "confirm_command", json!({"confirmation_token": token})).await;
    assert_eq!(again.is_error, Some(true));
    assert!(
        sc(&again)["detail"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    let unknown = call(
        &c,
        "confirm_command",
        json!({"confirmation_token": "cfm_forged"}),
    )
    .await;
    assert_eq!(unknown.is_error, Some(true));

    // The tool itself, with the same arguments and a fresh token, also runs it.
    let r = call(&c, "slide_move_to", json!({"target_mm": 50.0})).await;
    let token = sc(&r)["confirmation_token"].as_str().unwrap().to_string();
    let ok = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 50, "confirmation_token": token, "wait_s": 5}),
    )
    .await;
    assert_eq!(
        sc(&ok)["status"],
        "completed",
        "{:?}",
        ok.structured_content
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_confirmation_is_refused() {
    let (c, sims, _engine) = start("confirm_ttl_s = 1.0").await;
    let r = call(&c, "slide_move_to", json!({"target_mm": 100.0})).await;
    let token = sc(&r)["confirmation_token"].as_str().unwrap().to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let late = call(&c, "confirm_command", json!({"confirmation_token": token})).await;
    assert_eq!(late.is_error, Some(true));
    assert!(sc(&late)["detail"].as_str().unwrap().contains("expired"));
    assert_eq!(sims["slide"].peek().target_mm, Some(0.0));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_mode_offers_run_action_and_describe_device_in_a_stable_order() {
    let (c, _sims, _engine) = start("tools = \"generic\"").await;
    let names: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "run_action",
            "describe_device",
            "get_command_status",
            "cancel_command",
            "list_commands",
            "list_devices",
            "get_device_state",
            "confirm_command"
        ]
    );
    let again: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, again, "deterministic order");
    let d = call(&c, "describe_device", json!({"device": "lamp"})).await;
    assert_eq!(sc(&d)["actions"][0]["name"], "switch");
    assert_eq!(
        sc(&d)["actions"][0]["input_schema"]["properties"]["on"]["type"],
        "boolean"
    );
    let r = call(
        &c,
        "run_action",
        json!({"device": "lamp", "action": "switch", "params": {"on": true}, "wait_s": 3}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    let r = call(
        &c,
        "run_action",
        json!({"device": "slide", "action": "move_to", "params": {"target_mm": 10.0}}),
    )
    .await;
    assert_eq!(
        sc(&r)["status"],
        "needs_confirmation",
        "confirmation applies in generic mode too"
    );
    let e = c
        .call_tool(
            CallToolRequestParams::new("lamp_switch")
                .with_arguments(json!({"on": true}).as_object().cloned().unwrap()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e, rmcp::ServiceError::McpError(_)),
        "per-action tools do not exist in generic mode"
    );
    let e = c
        .call_tool(
            CallToolRequestParams::new("run_action").with_arguments(
                json!({"device": "lamp", "action": "dance"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, rmcp::ServiceError::McpError(_)));
    c.cancel().await.unwrap();
}

/// A client whose user answers the in-protocol confirmation form.
#[derive(Clone)]
struct Asker {
    answer: rmcp::model::ElicitationAction,
    confirm: bool,
}

impl rmcp::ClientHandler for Asker {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_elicitation()
                .build(),
            rmcp::model::Implementation::new("asker", "0.0.1"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _cx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request
        else {
            return Ok(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Decline,
            ));
        };
        assert!(
            message.contains("slide move_to") && message.contains("target_mm"),
            "{message}"
        );
        Ok(rmcp::model::ElicitResult::new(self.answer.clone())
            .with_content(json!({"confirm": self.confirm})))
    }
}

async fn start_asker(
    asker: Asker,
) -> (
    RunningService<RoleClient, Asker>,
    BTreeMap<String, SimDevice>,
) {
    let src = plant("");
    let (engine, sims) = common::engine(&src, std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(engine, "tester"));
    (asker.serve(io).await.unwrap(), sims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_elicitation_are_asked_in_protocol() {
    use rmcp::model::ElicitationAction;
    let (c, sims) = start_asker(Asker {
        answer: ElicitationAction::Accept,
        confirm: true,
    })
    .await;
    let p = CallToolRequestParams::new("slide_move_to").with_arguments(
        json!({"target_mm": 40.0, "wait_s": 5})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let r = c.call_tool(p).await.unwrap();
    assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    assert!((sims["slide"].peek().position_mm.unwrap() - 40.0).abs() < 0.5);
    c.cancel().await.unwrap();

    for (answer, confirm) in [
        (ElicitationAction::Decline, false),
        (ElicitationAction::Accept, false),
        (ElicitationAction::Cancel, false),
    ] {
        let (c, sims) = start_asker(Asker { answer, confirm }).await;
        let p = CallToolRequestParams::new("slide_move_to")
            .with_arguments(json!({"target_mm": 40.0}).as_object().cloned().unwrap());
        let r = c.call_tool(p).await.unwrap();
        assert_eq!(
            (r.is_error, sc(&r)["error_code"].as_str()),
            (Some(true), Some("INTERLOCK")),
            "{:?}",
            r.structured_content
        );
        assert_eq!(sims["slide"].peek().target_mm, Some(0.0), "nothing moved");
        c.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_call_keeps_its_key_through_the_confirmation_and_a_retry_finds_its_command() {
    let (c, sims, _engine) = start("").await;
    let asked = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 50.0, "idempotency_key": "move-50"}),
    )
    .await;
    assert_eq!(sc(&asked)["status"], "needs_confirmation");
    let token = sc(&asked)["confirmation_token"]
        .as_str()
        .unwrap()
        .to_string();
    let ok = call(
        &c,
        "confirm_command",
        json!({"confirmation_token": token, "wait_s": 5}),
    )
    .await;
    assert_eq!(
        sc(&ok)["status"],
        "completed",
        "{:?}",
        ok.structured_content
    );
    // The agent retries its keyed call (say, after a lost answer): the same command comes back,
    // nobody is asked again, and nothing moves a second time.
    let retry = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 50.0, "idempotency_key": "move-50"}),
    )
    .await;
    assert_eq!(
        sc(&retry)["command_id"],
        sc(&ok)["command_id"],
        "{:?}",
        retry.structured_content
    );
    assert_eq!(sc(&retry)["status"], "completed");
    // Other arguments under the same key: an INVALID_PARAMS result, not a protocol error.
    let other = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 70.0, "idempotency_key": "move-50"}),
    )
    .await;
    assert_eq!(
        (other.is_error, sc(&other)["error_code"].as_str()),
        (Some(true), Some("INVALID_PARAMS"))
    );
    assert!((sims["slide"].peek().position_mm.unwrap() - 50.0).abs() < 0.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_action_completes_in_one_call_without_wait_s() {
    let (c, _sims, _engine) = start("").await;
    let r = call(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    // default_wait_s = 0: the call returns at once, accepted.
    let (c, _sims, _engine) = start("default_wait_s = 0").await;
    let r = call(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(sc(&r)["status"], "accepted", "{:?}", r.structured_content);
    let tools = c.list_all_tools().await.unwrap();
    let lamp = tools.iter().find(|t| t.name == "lamp_switch").unwrap();
    assert_eq!(
        lamp.input_schema["properties"]["wait_s"]["default"],
        json!(0.0)
    );
}
