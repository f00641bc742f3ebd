//! Resources (listed, read and templated) and prompts over a real MCP session: closedloop's
//! server and rmcp's client over an in-process pipe (`tokio::io::duplex`), a simulated lamp and
//! slide.

mod common;

use common::resources::{Watcher, call, mcp_error, read, start};
use rmcp::model::{ErrorCode, GetPromptRequestParams, GetPromptResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceError};
use serde_json::{Value, json};

async fn prompt(
    client: &RunningService<RoleClient, Watcher>,
    name: &str,
    args: Value,
) -> Result<GetPromptResult, ServiceError> {
    let p = GetPromptRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap());
    client.get_prompt(p).await
}

fn prompt_text(r: &GetPromptResult) -> String {
    r.messages
        .iter()
        .filter_map(|m| m.content.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_listed_read_and_templated() {
    let rig = start().await;
    let c = &rig.client;

    let list = c.list_all_resources().await.unwrap();
    let uris: Vec<&str> = list.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "device://lamp/state",
            "device://lamp/config",
            "device://slide/state",
            "device://slide/config"
        ]
    );
    assert!(
        list.iter()
            .all(|r| r.mime_type.as_deref() == Some("application/json"))
    );
    let templates = c.list_all_resource_templates().await.unwrap();
    let t: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        t,
        [
            "device://{id}/state",
            "device://{id}/config",
            "command://{id}/timeline{?page}",
            "command://{id}"
        ]
    );

    // State: the same object as get_device_state.
    let done = call(c, "lamp_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(done["status"], "completed");
    let state = read(c, "device://lamp/state").await.unwrap();
    assert_eq!(state["device"], "lamp");
    assert_eq!(state["liveness"], "online");
    assert_eq!(state["signals"]["contact"]["value"], true);
    assert_eq!(state["signals"]["contact"]["source"], "discrete_input:0");
    let tool = call(c, "get_device_state", json!({"device": "lamp"})).await;
    assert_eq!(
        tool.as_object().unwrap().keys().collect::<Vec<_>>(),
        state.as_object().unwrap().keys().collect::<Vec<_>>()
    );

    // Config: the declaration, actions with their criteria.
    let config = read(c, "device://slide/config").await.unwrap();
    assert_eq!(config["driver"]["kind"], "sim");
    assert_eq!(config["poll_ms"], 20);
    assert_eq!(config["signals"]["position_mm"]["unit"], "mm");
    assert_eq!(config["signals"]["position_mm"]["source"], "holding:2");
    let action = &config["actions"][0];
    assert_eq!(action["name"], "move_to");
    assert_eq!(action["tool"], "slide_move_to");
    assert_eq!(action["fail_when"]["MOTOR_STALL"], "fault");
    assert_eq!(action["params"]["target_mm"]["max"], 300.0);
    assert_eq!(action["verification"], "feedback");
    assert_eq!(action["cancel"], json!(["coil:1"]));

    // Command: the result object.
    let id = done["command_id"].as_str().unwrap();
    let cmd = read(c, &format!("command://{id}")).await.unwrap();
    assert_eq!(cmd["command_id"], id);
    assert_eq!(cmd["status"], "completed");
    assert_eq!(cmd["verified"], true);
    assert!(cmd["timeline"].as_array().is_some_and(|t| !t.is_empty()));

    // Unknown URIs name themselves.
    for uri in [
        "device://nope/state",
        "device://lamp/other",
        "command://0193f0c2-0000-7000-8000-000000000000",
        "file:///etc/passwd",
    ] {
        let e = mcp_error(read(c, uri).await.unwrap_err());
        assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{uri}");
        assert!(e.message.contains(uri), "{}", e.message);
    }
    let _ = rig.client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_embed_the_device_and_validate_their_arguments() {
    let rig = start().await;
    let c = &rig.client;
    let prompts = c.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["diagnose_device", "act_and_confirm"]);
    for p in &prompts {
        assert!(
            p.arguments
                .as_ref()
                .unwrap()
                .iter()
                .all(|a| a.required == Some(true))
        );
    }
    a_diagnosis_quotes_the_values_and_the_failure(c).await;
    act_and_confirm_says_how_to_confirm(c).await;
    unknown_or_missing_arguments_name_the_valid_ones(c).await;
    let _ = rig.client.cancel().await;
}

/// A stalled move, then a diagnosis that quotes the values and the failure.
async fn a_diagnosis_quotes_the_values_and_the_failure(c: &RunningService<RoleClient, Watcher>) {
    let r = call(c, "slide_move_to", json!({"target_mm": 150.0, "wait_s": 5})).await;
    assert_eq!(r["error_code"], "MOTOR_STALL");
    let state = call(c, "get_device_state", json!({"device": "slide"})).await;
    let position = &state["signals"]["position_mm"]["value"];
    let d = prompt(c, "diagnose_device", json!({"device": "slide"}))
        .await
        .unwrap();
    let text = prompt_text(&d);
    for needle in [
        format!("position_mm = {position} mm"),
        "fault = true".into(),
        "MOTOR_STALL".into(),
        r["command_id"].as_str().unwrap().into(),
        "closedloop trace".into(),
        "get_device_state".into(),
        "wiring and supply".into(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from:\n{text}");
    }
}

/// `act_and_confirm` on the lamp's switch: the tool, how to follow it, what confirms it.
async fn act_and_confirm_says_how_to_confirm(c: &RunningService<RoleClient, Watcher>) {
    let a = prompt(
        c,
        "act_and_confirm",
        json!({"device": "lamp", "action": "switch"}),
    )
    .await
    .unwrap();
    let text = prompt_text(&a);
    for needle in [
        "lamp_switch",
        "get_command_status",
        "\"completed\"",
        "verified",
        "evidence",
        "contact equals the requested on",
        "FEEDBACK_MISMATCH",
        "DEVICE_OFFLINE",
        "about 0.02 s",
        "contact = ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

/// Unknown or missing arguments name the valid ones.
async fn unknown_or_missing_arguments_name_the_valid_ones(c: &RunningService<RoleClient, Watcher>) {
    let e = mcp_error(
        prompt(c, "diagnose_device", json!({"device": "nope"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(
        e.message.contains("lamp") && e.message.contains("slide"),
        "{}",
        e.message
    );
    let e = mcp_error(
        prompt(
            c,
            "act_and_confirm",
            json!({"device": "lamp", "action": "fly"}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("switch"), "{}", e.message);
    let e = mcp_error(
        prompt(c, "act_and_confirm", json!({"device": "lamp"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("action"), "{}", e.message);
}
