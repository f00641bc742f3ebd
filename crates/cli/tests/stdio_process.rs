//! `closedloop serve` as a child process driven by rmcp's MCP client over stdio, handled as an
//! operator handles the process: a `kill -9` of the server mid-move and a restart, SIGTERM
//! stopping running motion, and `closedloop trace` / `commands` and `--log-file` afterwards.

mod common;

use common::stdio::{act, code, plant_dir, status};
use common::{Client, call, connect, sc, settle};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

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
