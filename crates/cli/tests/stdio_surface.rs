//! `closedloop serve` as a child process driven by rmcp's MCP client over stdio, as a client
//! sees it: tools with schemas, annotations and the contract wording; clients of the 2025-06-18,
//! 2025-11-25 and 2026-07-28 protocol versions acting and confirming; the raw Modbus tools.

mod common;

use common::stdio::{code, plant_dir, text};
use common::{call, connect, sc};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_have_schemas_annotations_and_the_contract_wording() {
    let dir = plant_dir();
    let client = connect(dir.path()).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for t in [
        "lamp_switch",
        "slide_move_to",
        "gripper_close",
        "get_command_status",
        "cancel_command",
        "list_commands",
        "list_devices",
        "get_device_state",
    ] {
        assert!(names.contains(&t), "{t} missing from {names:?}");
    }
    let slide = tools.iter().find(|t| t.name == "slide_move_to").unwrap();
    let a = slide.annotations.as_ref().unwrap();
    assert_eq!(
        (a.read_only_hint, a.destructive_hint, a.idempotent_hint),
        (Some(false), Some(true), Some(false))
    );
    assert!(slide.output_schema.is_some());
    let desc = slide.description.as_deref().unwrap();
    assert!(
        desc.contains("accepted") && desc.contains("get_command_status"),
        "{desc}"
    );
    let props = &slide.input_schema["properties"];
    assert!(props.get("wait_s").is_some() && props.get("idempotency_key").is_some());
    client.cancel().await.unwrap();
}

/// A client that asks for a given protocol version in `initialize`.
#[derive(Clone)]
struct Pinned(rmcp::model::ProtocolVersion);

impl rmcp::ClientHandler for Pinned {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("pinned-test-client", "0.0.1"),
        )
        .with_protocol_version(self.0.clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_2025_06_18_2025_11_25_and_2026_07_28_all_act_and_confirm() {
    use rmcp::model::ProtocolVersion;
    let dir = plant_dir();
    for v in [ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
        cmd.arg("serve")
            .arg(dir.path().join("plant.toml"))
            .stderr(Stdio::null());
        let c = Pinned(v.clone())
            .serve(TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap();
        assert_eq!(c.peer_info().unwrap().protocol_version, v);
        let p = CallToolRequestParams::new("lamp_switch").with_arguments(
            json!({"on": true, "wait_s": 3})
                .as_object()
                .cloned()
                .unwrap(),
        );
        let r = c.call_tool(p).await.unwrap();
        assert_eq!(
            r.structured_content.unwrap()["status"],
            "completed",
            "{v:?}"
        );
        c.cancel().await.unwrap();
    }
    // 2026-07-28: no initialize; server/discover, then self-contained requests.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.path().join("plant.toml"))
        .stderr(Stdio::null());
    let lifecycle = rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let c = rmcp::ClientServiceExt::serve_with_lifecycle(
        (),
        TokioChildProcess::new(cmd).unwrap(),
        lifecycle,
    )
    .await
    .unwrap();
    let p = CallToolRequestParams::new("lamp_switch").with_arguments(
        json!({"on": false, "wait_s": 3})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let r = c.call_tool(p).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["status"], "completed");
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_modbus_tools_read_in_engineering_units_and_never_claim_an_effect() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let tools: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        tools.contains(&"modbus_read".to_string()) && tools.contains(&"modbus_write".to_string())
    );
    a_raw_read_decodes_through_the_declared_signal(&c).await;
    a_raw_write_is_never_claimed_verified(&c).await;
    raw_errors_keep_their_contract_codes(&c).await;
    c.cancel().await.unwrap();
}

/// The oven's temperature register, raw and decoded through its declared signal.
async fn a_raw_read_decodes_through_the_declared_signal(c: &common::Client) {
    let r = call(
        c,
        "modbus_read",
        json!({"device": "oven", "area": "input", "address": 0}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{:?}", r.structured_content);
    assert_eq!(sc(&r)["values"], json!([250]));
    assert_eq!(sc(&r)["signals"]["temperature_c"]["value"], json!(25.0));
    assert_eq!(sc(&r)["signals"]["temperature_c"]["unit"], json!("°C"));
}

/// A raw write of the lamp's coil says it is not verified; the contact then reads it.
async fn a_raw_write_is_never_claimed_verified(c: &common::Client) {
    let w = call(
        c,
        "modbus_write",
        json!({"device": "lamp", "area": "coil", "address": 0, "values": [true]}),
    )
    .await;
    assert_eq!(
        (w.is_error, sc(&w)["verified"].as_bool()),
        (Some(false), Some(false)),
        "{:?}",
        w.structured_content
    );
    assert!(text(&w).contains("not verified"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = call(
        c,
        "modbus_read",
        json!({"device": "lamp", "area": "discrete_input", "address": 0}),
    )
    .await;
    assert_eq!(sc(&r)["values"], json!([true]));
}

/// Exceptions keep their contract codes; devices without raw_access are refused; a raw write
/// never cuts into a running command.
async fn raw_errors_keep_their_contract_codes(c: &common::Client) {
    let bad = call(
        c,
        "modbus_read",
        json!({"device": "lamp", "area": "holding", "address": 9}),
    )
    .await;
    assert_eq!(
        (bad.is_error, code(&bad).as_str()),
        (Some(true), "REGISTER_INVALID")
    );
    let no = call(
        c,
        "modbus_read",
        json!({"device": "brown", "area": "coil", "address": 0}),
    )
    .await;
    assert_eq!(
        (no.is_error, code(&no).as_str()),
        (Some(true), "UNAUTHORIZED")
    );

    // A raw write never cuts into a running command.
    let run = call(c, "oven_set_temperature", json!({"setpoint_c": 80.0})).await;
    let busy = call(
        c,
        "modbus_write",
        json!({"device": "oven", "area": "holding", "address": 0, "values": [0]}),
    )
    .await;
    assert_eq!(
        (busy.is_error, code(&busy).as_str()),
        (Some(true), "DEVICE_BUSY")
    );
    let _ = call(
        c,
        "cancel_command",
        json!({"command_id": sc(&run)["command_id"]}),
    )
    .await;
}
