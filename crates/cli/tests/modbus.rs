//! The fault matrix across real sockets: `closedloop sim` serves the Modbus example plant as its
//! own process, `closedloop serve` drives it through the `modbus-tcp` driver, an MCP client acts,
//! faults are injected at run time through `closedloop sim fault` — and closedloop never reports
//! `completed` under a fault. Then `kill -9` of the gateway mid-move: the axis keeps moving in the
//! simulator process, and after the restart the command ends `completed` with evidence.

mod common;

use common::*;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_over_modbus_tcp_never_completes_under_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_modbus_sim(dir.path());
    let c = connect(dir.path()).await;
    healthy_devices_complete_and_read_in_units(&c).await;
    a_brownout_keeps_the_lamp_from_closing(&c, &control).await;
    a_nak_refuses_the_gripper_before_writing(&c, &control).await;
    a_stall_fails_the_move_and_interlocks_the_gripper(&c, &control).await;
    a_power_cut_ends_the_oven_offline(&c, &control).await;
    c.cancel().await.unwrap();
}

/// With no fault, the lamp completes on its contact and the oven reads in °C.
async fn healthy_devices_complete_and_read_in_units(c: &Client) {
    let r = settle(
        c,
        call(c, "lamp_switch", json!({"on": true, "wait_s": 3})).await,
    )
    .await;
    assert_eq!(
        outcome(&r),
        ("completed".into(), "".into()),
        "{:?}",
        r.structured_content
    );
    assert_eq!(sc(&r)["evidence"]["contact"]["value"], json!(true));
    assert_eq!(sc(&r)["verified"], json!(true));

    let state = call(c, "get_device_state", json!({"device": "oven"})).await;
    assert_eq!(sc(&state)["signals"]["temperature_c"]["value"], json!(25.0));
    assert_eq!(sc(&state)["signals"]["temperature_c"]["unit"], json!("°C"));
    assert_eq!(
        sc(&state)["signals"]["temperature_c"]["source"],
        json!("input:0")
    );
}

/// Under a brownout the lamp switches off but never on.
async fn a_brownout_keeps_the_lamp_from_closing(c: &Client, control: &str) {
    sim_ctl(control, &["fault", "lamp", "brownout"]);
    let r = settle(
        c,
        call(c, "lamp_switch", json!({"on": false, "wait_s": 3})).await,
    )
    .await;
    // Switching off under a brownout does complete (the contact opens): the fault only keeps it
    // from closing. Switching on must then fail.
    assert_eq!(sc(&r)["status"], "completed");
    let r = settle(
        c,
        call(c, "lamp_switch", json!({"on": true, "wait_s": 3})).await,
    )
    .await;
    assert_eq!(outcome(&r), ("failed".into(), "FEEDBACK_MISMATCH".into()));
    sim_ctl(control, &["clear", "lamp"]);
}

/// A gripper that answers every read with an exception: its contact is unreadable, and its
/// close is refused.
async fn a_nak_refuses_the_gripper_before_writing(c: &Client, control: &str) {
    sim_ctl(control, &["fault", "gripper", "nak"]);
    // Once a poll was refused, the state names the unreadable contact...
    let mut state = Value::Null;
    for _ in 0..200 {
        state = sc(&call(c, "get_device_state", json!({"device": "gripper"})).await).clone();
        if state["unreadable"]["contact"]["error_code"] == "BUS_NAK" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        state["unreadable"]["contact"]["error_code"], "BUS_NAK",
        "{state}"
    );
    // ...and the close is refused before anything is written: it could never be confirmed.
    let r = settle(c, call(c, "gripper_close", json!({"wait_s": 3})).await).await;
    assert_eq!(outcome(&r), ("rejected".into(), "BUS_NAK".into()));
    assert!(
        sc(&r)["detail"]
            .as_str()
            .unwrap()
            .contains("Server Device Failure")
    );
    sim_ctl(control, &["clear", "gripper"]);
}

/// A slide stalled at 40 mm fails its move there, and the gripper's interlock holds.
async fn a_stall_fails_the_move_and_interlocks_the_gripper(c: &Client, control: &str) {
    sim_ctl(control, &["fault", "slide", "stall", "at_mm=40"]);
    let r = settle(
        c,
        call(c, "slide_move_to", json!({"target_mm": 120.0, "wait_s": 5})).await,
    )
    .await;
    assert_eq!(outcome(&r), ("failed".into(), "MOTOR_STALL".into()));
    let pos = sc(&r)["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 40.0).abs() <= 0.5, "{pos}");
    let g = call(c, "gripper_close", json!({})).await;
    assert_eq!(outcome(&g), ("rejected".into(), "INTERLOCK".into()));
    sim_ctl(control, &["clear", "slide"]);
}

/// (The slide's FAULT input stays latched after the obstruction is cleared, as a real driver's
/// would until a fault reset: use the oven for the power cut.)
async fn a_power_cut_ends_the_oven_offline(c: &Client, control: &str) {
    let r = call(
        c,
        "oven_set_temperature",
        json!({"setpoint_c": 90.0, "wait_s": 0}),
    )
    .await;
    assert!(matches!(
        sc(&r)["status"].as_str(),
        Some("accepted" | "running")
    ));
    sim_ctl(control, &["fault", "oven", "power_off"]);
    let r = settle(c, r).await;
    assert_ne!(sc(&r)["status"], "completed");
    assert_eq!(
        outcome(&r).1,
        "DEVICE_OFFLINE",
        "{:?}",
        r.structured_content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_gateway_mid_move_then_restart_completes_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _control) = start_modbus_sim(dir.path());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.path().join("plant.toml"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = tokio::process::Command::from(cmd).spawn().unwrap();
    let pid = child.id().unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let c = ().serve(io).await.unwrap();
    let r = call(
        &c,
        "slide_move_to",
        json!({"target_mm": 150.0, "wait_s": 0.4}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "running", "{:?}", r.structured_content);
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    assert!(
        Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let _ = child.wait().await;
    drop(c);

    let c = connect(dir.path()).await;
    let r = settle(
        &c,
        call(
            &c,
            "get_command_status",
            json!({"command_id": id, "wait_s": 0}),
        )
        .await,
    )
    .await;
    assert_eq!(
        outcome(&r),
        ("completed".into(), "".into()),
        "{:?}",
        r.structured_content
    );
    let pos = sc(&r)["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 150.0).abs() <= 0.2, "{pos}");
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
async fn a_listener_that_accepts_and_never_answers_is_device_offline() {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accept every connection and hold it open, reading nothing back: a zombie TCP stack.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let plant = format!(
        r#"
[server]
journal = "sqlite://journal.db"

[[device]]
id = "lamp"
description = "Relay behind a frozen gateway"
driver = {{ kind = "modbus-tcp", address = "{addr}", unit = 1, timeout_ms = 200 }}
poll_ms = 50
liveness = {{ max_silence_s = 1.0 }}
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the relay."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.05
idempotent = true
"#
    );
    std::fs::write(dir.path().join("plant.toml"), plant).unwrap();
    let c = connect(dir.path()).await;
    let r = call(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(
        outcome(&r),
        ("rejected".into(), "DEVICE_OFFLINE".into()),
        "{:?}",
        r.structured_content
    );
    let state = call(&c, "get_device_state", json!({"device": "lamp"})).await;
    assert_eq!(sc(&state)["liveness"], "offline");
    c.cancel().await.unwrap();
}
