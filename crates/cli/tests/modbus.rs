//! The fault matrix across real sockets: `closedloop sim` serves the Modbus example plant as its
//! own process, `closedloop serve` drives it through the `modbus-tcp` driver, an MCP client acts,
//! faults are injected at run time through `closedloop sim fault` — and closedloop never reports
//! `completed` under a fault. Then `kill -9` of the gateway mid-move: the axis keeps moving in the
//! simulator process, and after the restart the command ends `completed` with evidence.

mod common;

use common::*;
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts `closedloop sim` on free ports and writes the plant `serve` should use (the same file,
/// with the announced port as every device's address). Returns the sim and its control address.
fn start_sim(dir: &Path) -> (Running, String) {
    let example = include_str!("../../../examples/modbus-workshop.toml");
    let sim_plant = example.replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"");
    std::fs::write(dir.join("sim.toml"), &sim_plant).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(dir.join("sim.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut port = None;
    let control = loop {
        let line = lines.next().expect("sim announces").unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["closedloop", "sim:", "control", "on", addr] => break addr.to_string(),
            ["closedloop", "sim:", _, "unit", _, "on", addr] => port = Some(addr.to_string()),
            _ => {}
        }
    };
    let addr = port.take().unwrap_or_default();
    std::fs::write(
        dir.join("plant.toml"),
        example.replace(
            "address = \"127.0.0.1:1502\"",
            &format!("address = \"{addr}\""),
        ),
    )
    .unwrap();
    (Running(child), control)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_over_modbus_tcp_never_completes_under_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_sim(dir.path());
    let c = connect(dir.path()).await;

    let r = settle(
        &c,
        call(&c, "lamp_switch", json!({"on": true, "wait_s": 3})).await,
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

    let state = call(&c, "get_device_state", json!({"device": "oven"})).await;
    assert_eq!(sc(&state)["signals"]["temperature_c"]["value"], json!(25.0));
    assert_eq!(sc(&state)["signals"]["temperature_c"]["unit"], json!("°C"));
    assert_eq!(
        sc(&state)["signals"]["temperature_c"]["source"],
        json!("input:0")
    );

    sim_ctl(&control, &["fault", "lamp", "brownout"]);
    let r = settle(
        &c,
        call(&c, "lamp_switch", json!({"on": false, "wait_s": 3})).await,
    )
    .await;
    // Switching off under a brownout does complete (the contact opens): the fault only keeps it
    // from closing. Switching on must then fail.
    assert_eq!(sc(&r)["status"], "completed");
    let r = settle(
        &c,
        call(&c, "lamp_switch", json!({"on": true, "wait_s": 3})).await,
    )
    .await;
    assert_eq!(outcome(&r), ("failed".into(), "FEEDBACK_MISMATCH".into()));
    sim_ctl(&control, &["clear", "lamp"]);

    sim_ctl(&control, &["fault", "gripper", "nak"]);
    // Once a poll was refused, the state names the unreadable contact...
    let mut state = Value::Null;
    for _ in 0..200 {
        state = sc(&call(&c, "get_device_state", json!({"device": "gripper"})).await).clone();
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
    let r = settle(&c, call(&c, "gripper_close", json!({"wait_s": 3})).await).await;
    assert_eq!(outcome(&r), ("rejected".into(), "BUS_NAK".into()));
    assert!(
        sc(&r)["detail"]
            .as_str()
            .unwrap()
            .contains("Server Device Failure")
    );
    sim_ctl(&control, &["clear", "gripper"]);

    sim_ctl(&control, &["fault", "slide", "stall", "at_mm=40"]);
    let r = settle(
        &c,
        call(
            &c,
            "slide_move_to",
            json!({"target_mm": 120.0, "wait_s": 5}),
        )
        .await,
    )
    .await;
    assert_eq!(outcome(&r), ("failed".into(), "MOTOR_STALL".into()));
    let pos = sc(&r)["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 40.0).abs() <= 0.5, "{pos}");
    let g = call(&c, "gripper_close", json!({})).await;
    assert_eq!(outcome(&g), ("rejected".into(), "INTERLOCK".into()));
    sim_ctl(&control, &["clear", "slide"]);

    // (The slide's FAULT input stays latched after the obstruction is cleared, as a real driver's
    // would until a fault reset: use the oven for the power cut.)
    let r = call(
        &c,
        "oven_set_temperature",
        json!({"setpoint_c": 90.0, "wait_s": 0}),
    )
    .await;
    assert!(matches!(
        sc(&r)["status"].as_str(),
        Some("accepted" | "running")
    ));
    sim_ctl(&control, &["fault", "oven", "power_off"]);
    let r = settle(&c, r).await;
    assert_ne!(sc(&r)["status"], "completed");
    assert_eq!(
        outcome(&r).1,
        "DEVICE_OFFLINE",
        "{:?}",
        r.structured_content
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_gateway_mid_move_then_restart_completes_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _control) = start_sim(dir.path());
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
