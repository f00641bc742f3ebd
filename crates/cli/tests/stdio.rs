//! The engine's scenario list again, end to end: `closedloop serve` as a child process driven by
//! rmcp's MCP client over stdio — including a `kill -9` of the server mid-move and a restart.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

type Client = RunningService<RoleClient, ()>;

const PLANT: &str = include_str!("../../../tests/plants/faults.toml");

fn plant_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plant.toml"), PLANT).unwrap();
    dir
}

async fn connect(dir: &Path) -> Client {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .stderr(Stdio::null());
    let transport = TokioChildProcess::new(cmd).unwrap();
    ().serve(transport).await.unwrap()
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    client
        .call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structuredContent")
}

fn status(r: &CallToolResult) -> String {
    sc(r)["status"].as_str().unwrap_or("").to_string()
}

fn code(r: &CallToolResult) -> String {
    sc(r)["error_code"].as_str().unwrap_or("").to_string()
}

/// Follows a command with get_command_status until its status is terminal.
async fn settle(client: &Client, r: CallToolResult) -> CallToolResult {
    let mut r = r;
    for _ in 0..20 {
        if !matches!(status(&r).as_str(), "accepted" | "running") {
            return r;
        }
        let id = sc(&r)["command_id"].as_str().unwrap().to_string();
        r = call(
            client,
            "get_command_status",
            json!({"command_id": id, "wait_s": 5}),
        )
        .await;
    }
    panic!("never settled: {:?}", r.structured_content);
}

async fn act(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let r = call(client, tool, args).await;
    settle(client, r).await
}

/// Spawns `closedloop serve` keeping the child handle, to signal it like an operator would.
async fn spawn_with_pid(dir: &Path) -> (tokio::process::Child, u32, Client) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    let pid = child.id().unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let c = ().serve(io).await.unwrap();
    (child, pid, c)
}

fn text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_unconfirmable_and_refused_relays() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(
        (status(&r).as_str(), sc(&r)["verified"].as_bool()),
        ("completed", Some(true)),
        "{:?}",
        r.structured_content
    );
    assert_eq!(r.is_error, Some(false));
    assert_eq!(sc(&r)["evidence"]["contact"]["value"], json!(true));
    assert!(!text(&r).is_empty());

    let r = act(&c, "brown_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "FEEDBACK_MISMATCH")
    );
    assert_eq!(r.is_error, Some(true));
    let r = act(&c, "swapped_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("timeout", "TIMEOUT")
    );
    let r = act(&c, "dead_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "DEVICE_OFFLINE")
    );
    let r = act(&c, "zombie_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "DEVICE_OFFLINE");
    // Its reads are refused as well: the contact cannot be read, so nothing is written.
    let r = act(&c, "nak_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "BUS_NAK")
    );
    let r = act(&c, "noisy_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "CRC_MISMATCH");
    let r = act(&c, "lossy_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "DEVICE_OFFLINE");
    let r = act(&c, "slow_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(
        status(&r),
        "completed",
        "a device not yet polled is waited for: {:?}",
        r.structured_content
    );
    let r = act(&c, "buzzer_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), sc(&r)["verified"].as_bool()),
        ("sent", Some(false))
    );
    assert!(
        sc(&r)["hint"]
            .as_str()
            .unwrap()
            .contains("could not be confirmed")
    );
    assert_eq!(r.is_error, Some(false));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn motion_stall_interlock_offline_reboot_and_cancel() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(
        &c,
        "slide_move_to",
        json!({"target_mm": 150.0, "wait_s": 5}),
    )
    .await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "MOTOR_STALL")
    );
    let pos = sc(&r)["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 70.0).abs() <= 0.5, "{pos}");
    let events: Vec<&str> = sc(&r)["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"cancel_sent"), "{events:?}");
    let g = act(&c, "gripper_close", json!({})).await;
    assert_eq!(
        (status(&g).as_str(), code(&g).as_str()),
        ("rejected", "INTERLOCK")
    );

    let r = act(&c, "unplugged_move_to", json!({"target_mm": 250.0})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "DEVICE_OFFLINE")
    );
    let r = act(&c, "rebooting_move_to", json!({"target_mm": 250.0})).await;
    assert_ne!(status(&r), "completed");

    let r = call(&c, "axis_move_to", json!({"target_mm": 250.0})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let x = call(&c, "cancel_command", json!({"command_id": id})).await;
    assert_eq!(
        (status(&x).as_str(), code(&x).as_str()),
        ("cancelled", "CANCELLED")
    );
    assert_eq!(x.is_error, Some(false));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heater_readback_params_queue_and_errors() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "oven_set_temperature", json!({"setpoint_c": 40.0})).await;
    assert_eq!(status(&r), "completed", "{:?}", r.structured_content);
    let r = act(
        &c,
        "oven_store_setpoint",
        json!({"setpoint_c": 60.0, "wait_s": 3}),
    )
    .await;
    assert_eq!(
        (
            status(&r).as_str(),
            sc(&r)["verified"].as_bool(),
            sc(&r)["readback_matched"].as_bool()
        ),
        ("completed", Some(false), Some(true))
    );

    let r = call(&c, "axis_move_to", json!({"target_mm": 999.0})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "INVALID_PARAMS")
    );
    assert_eq!(r.is_error, Some(true));

    // One after the other; the second's queue wait (0.3 s) runs out while the first moves.
    let a = call(&c, "axis_move_to", json!({"target_mm": 100.0, "wait_s": 0})).await;
    let b = act(&c, "axis_move_to", json!({"target_mm": 5.0})).await;
    assert_eq!(
        (status(&b).as_str(), code(&b).as_str()),
        ("timeout", "TIMEOUT")
    );
    assert_eq!(status(&settle(&c, a).await), "completed");

    let u = call(
        &c,
        "get_command_status",
        json!({"command_id": "0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77"}),
    )
    .await;
    assert_eq!(
        (u.is_error, code(&u).as_str()),
        (Some(true), "UNKNOWN_COMMAND")
    );
    let e = c
        .call_tool(CallToolRequestParams::new("no_such_tool").with_arguments(Default::default()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, rmcp::ServiceError::McpError(_)),
        "an unknown tool is a JSON-RPC error: {e:?}"
    );
    let e = c
        .call_tool(
            CallToolRequestParams::new("lamp_switch").with_arguments(
                json!({"on": true, "wait_s": 99})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, rmcp::ServiceError::McpError(_)), "{e:?}");
    let key = json!({"on": false, "idempotency_key": "same", "wait_s": 2});
    let x = call(&c, "lamp_switch", key.clone()).await;
    let y = call(&c, "lamp_switch", key).await;
    assert_eq!(sc(&x)["command_id"], sc(&y)["command_id"]);
    let list = call(&c, "list_commands", json!({"device": "lamp"})).await;
    assert_eq!(sc(&list)["commands"].as_array().unwrap().len(), 1);
    let state = call(&c, "get_device_state", json!({"device": "oven"})).await;
    assert_eq!(sc(&state)["signals"]["temperature_c"]["unit"], json!("°C"));
    assert_eq!(sc(&state)["liveness"], json!("online"));
    let devices = call(&c, "list_devices", json!({})).await;
    assert!(sc(&devices)["devices"].as_array().unwrap().len() >= 10);
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_move_then_restart_ends_the_command_honestly() {
    let dir = plant_dir();
    let (mut child, pid, c) = spawn_with_pid(dir.path()).await;
    let r = call(
        &c,
        "axis_move_to",
        json!({"target_mm": 200.0, "wait_s": 0.3}),
    )
    .await;
    assert_eq!(status(&r), "running");
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    // SIGKILL: no shutdown path, no cancel plan — exactly a crash.
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = child.wait().await;
    drop(c);

    let c = connect(dir.path()).await;
    let r = call(
        &c,
        "get_command_status",
        json!({"command_id": id, "wait_s": 0}),
    )
    .await;
    let r = settle(&c, r).await;
    // The new simulator starts at 0 mm, so the move cannot be confirmed: failed INTERRUPTED,
    // never completed, never lost.
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "INTERRUPTED"),
        "{:?}",
        r.structured_content
    );
    let events: Vec<&str> = sc(&r)["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"recovered"), "{events:?}");
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_writes_the_stop_of_running_motion_and_exits_cleanly() {
    let dir = plant_dir();
    let (mut child, pid, c) = spawn_with_pid(dir.path()).await;
    let r = call(
        &c,
        "axis_move_to",
        json!({"target_mm": 250.0, "wait_s": 0.3}),
    )
    .await;
    assert_eq!(status(&r), "running");
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    drop(c);

    let c = connect(dir.path()).await;
    let r = call(
        &c,
        "get_command_status",
        json!({"command_id": id, "wait_s": 0}),
    )
    .await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("cancelled", "CANCELLED"),
        "{:?}",
        r.structured_content
    );
    assert!(sc(&r)["detail"].as_str().unwrap().contains("shut down"));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_invalid_and_device_busy_through_mcp() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "wide_move_to", json!({"target_mm": 350.0, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "REGISTER_INVALID"),
        "{:?}",
        r.structured_content
    );
    assert!(
        sc(&r)["detail"]
            .as_str()
            .unwrap()
            .contains("Illegal Data Value")
    );
    let a = call(&c, "wide_move_to", json!({"target_mm": 250.0})).await;
    let b = call(&c, "wide_move_to", json!({"target_mm": 10.0})).await;
    assert_eq!(
        (status(&b).as_str(), code(&b).as_str()),
        ("rejected", "DEVICE_BUSY"),
        "{:?}",
        b.structured_content
    );
    let _ = call(
        &c,
        "cancel_command",
        json!({"command_id": sc(&a)["command_id"]}),
    )
    .await;
    c.cancel().await.unwrap();
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
async fn trace_prints_the_timeline_and_serve_logs_to_a_file() {
    let dir = plant_dir();
    let log = dir.path().join("serve.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.path().join("plant.toml"))
        .arg("--log-file")
        .arg(&log)
        .env("CLOSEDLOOP_LOG", "info")
        .stderr(Stdio::null());
    let c = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let r = act(&c, "lamp_switch", json!({"on": true, "wait_s": 3})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("trace")
        .arg(dir.path().join("plant.toml"))
        .arg(&id)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "received",
        "dispatched",
        "device_ack",
        "completed",
        "Δ",
        "status completed (verified)",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("commands")
        .arg(dir.path().join("plant.toml"))
        .args(["--device", "lamp"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    c.cancel().await.unwrap();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("serving MCP over stdio"), "{logged}");
    assert!(
        logged.contains("req_"),
        "log lines carry the request id: {logged}"
    );
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

    // The oven's temperature register, raw and decoded through its declared signal.
    let r = call(
        &c,
        "modbus_read",
        json!({"device": "oven", "area": "input", "address": 0}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{:?}", r.structured_content);
    assert_eq!(sc(&r)["values"], json!([250]));
    assert_eq!(sc(&r)["signals"]["temperature_c"]["value"], json!(25.0));
    assert_eq!(sc(&r)["signals"]["temperature_c"]["unit"], json!("°C"));

    let w = call(
        &c,
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
        &c,
        "modbus_read",
        json!({"device": "lamp", "area": "discrete_input", "address": 0}),
    )
    .await;
    assert_eq!(sc(&r)["values"], json!([true]));

    // Exceptions keep their contract codes; devices without raw_access are refused.
    let bad = call(
        &c,
        "modbus_read",
        json!({"device": "lamp", "area": "holding", "address": 9}),
    )
    .await;
    assert_eq!(
        (bad.is_error, code(&bad).as_str()),
        (Some(true), "REGISTER_INVALID")
    );
    let no = call(
        &c,
        "modbus_read",
        json!({"device": "brown", "area": "coil", "address": 0}),
    )
    .await;
    assert_eq!(
        (no.is_error, code(&no).as_str()),
        (Some(true), "UNAUTHORIZED")
    );

    // A raw write never cuts into a running command.
    let run = call(&c, "oven_set_temperature", json!({"setpoint_c": 80.0})).await;
    let busy = call(
        &c,
        "modbus_write",
        json!({"device": "oven", "area": "holding", "address": 0, "values": [0]}),
    )
    .await;
    assert_eq!(
        (busy.is_error, code(&busy).as_str()),
        (Some(true), "DEVICE_BUSY")
    );
    let _ = call(
        &c,
        "cancel_command",
        json!({"command_id": sc(&run)["command_id"]}),
    )
    .await;
    c.cancel().await.unwrap();
}
