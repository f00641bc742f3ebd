//! Confirmation of dangerous actions (`confirm = true`) and the generic tool mode, through a real
//! MCP session over an in-process pipe.

mod common;

use common::slide::{call, sc, start};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_moves_until_confirmed_and_a_token_runs_once_with_the_same_arguments() {
    let (c, sims, _engine) = start("").await;
    let slide = &sims["slide"];
    let token = a_move_needs_confirmation_and_moves_nothing(&c, slide).await;

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

    the_token_confirms_once(&c, slide, &token).await;

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

/// A move to 100 mm asks for confirmation, and nothing is written: its confirmation token.
async fn a_move_needs_confirmation_and_moves_nothing(
    c: &common::slide::Client,
    slide: &closedloop_sim::SimDevice,
) -> String {
    let r = call(c, "slide_move_to", json!({"target_mm": 100.0, "wait_s": 1})).await;
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
    token
}

/// `confirm_command` with `token` runs the move to 100 mm; used again it is refused, and a
/// forged token is refused too.
async fn the_token_confirms_once(
    c: &common::slide::Client,
    slide: &closedloop_sim::SimDevice,
    token: &str,
) {
    let ok = call(
        c,
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

    let again = call(c, "confirm_command", json!({"confirmation_token": token})).await;
    assert_eq!(again.is_error, Some(true));
    assert!(
        sc(&again)["detail"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    let unknown = call(
        c,
        "confirm_command",
        json!({"confirmation_token": "cfm_forged"}),
    )
    .await;
    assert_eq!(unknown.is_error, Some(true));
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
    // The description says what the call just did: it waited for the device.
    let tools = c.list_all_tools().await.unwrap();
    let lamp = tools.iter().find(|t| t.name == "lamp_switch").unwrap();
    let said = lamp.description.as_deref().unwrap_or_default();
    assert!(
        said.contains("It waits up to 2 s (wait_s, 0 to 10)"),
        "{said}"
    );
    assert!(!said.contains("at once"), "{said}");
    // default_wait_s = 0: the call returns at once, accepted, and the description says so.
    let (c, _sims, _engine) = start("default_wait_s = 0").await;
    let r = call(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(sc(&r)["status"], "accepted", "{:?}", r.structured_content);
    let tools = c.list_all_tools().await.unwrap();
    let lamp = tools.iter().find(|t| t.name == "lamp_switch").unwrap();
    assert_eq!(
        lamp.input_schema["properties"]["wait_s"]["default"].as_f64(),
        Some(0.0)
    );
    let said = lamp.description.as_deref().unwrap_or_default();
    assert!(
        said.contains("\"accepted\" and a command_id at once"),
        "{said}"
    );
}
