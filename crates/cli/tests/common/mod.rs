//! Helpers shared by the tests that run `closedloop sim` and `closedloop serve` as child processes
//! and drive them with rmcp's client over stdio.

#![allow(dead_code)]

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub type Client = RunningService<RoleClient, ()>;

/// Kills a child process when the test ends, however it ends.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `closedloop sim fault|clear --control ADDR ...`, which must succeed.
pub fn sim_ctl(control: &str, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(args[0])
        .arg("--control")
        .arg(control)
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sim {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `closedloop serve DIR/plant.toml` with an rmcp client on its stdio.
pub async fn connect(dir: &Path) -> Client {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .stderr(Stdio::null());
    ().serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap()
}

/// One tool call; panics on a protocol error.
pub async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    c.call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured content of a result.
pub fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().unwrap()
}

/// Follows a command with `get_command_status` until it is final (bounded).
pub async fn settle(c: &Client, mut r: CallToolResult) -> CallToolResult {
    for _ in 0..20 {
        if !matches!(sc(&r)["status"].as_str(), Some("accepted" | "running")) {
            return r;
        }
        let id = sc(&r)["command_id"].as_str().unwrap().to_string();
        r = call(
            c,
            "get_command_status",
            json!({"command_id": id, "wait_s": 5}),
        )
        .await;
    }
    panic!("never settled: {:?}", r.structured_content);
}

/// `(status, error_code)` of a result.
pub fn outcome(r: &CallToolResult) -> (String, String) {
    let v = sc(r);
    (
        v["status"].as_str().unwrap_or("").into(),
        v["error_code"].as_str().unwrap_or("").into(),
    )
}
