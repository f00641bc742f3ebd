//! End-to-end benchmark through MCP over stdio: `closedloop serve` as a child process, driven by
//! rmcp's client. Prints one JSON line per measurement (p50/p99 latency, commands per second).
//!
//! - act-and-confirm: `relayN_switch` with `wait_s` until `completed` (feedback confirmed), 1,000
//!   cycles one after the other, then 1,000 spread over 8 relays in parallel;
//! - read-only: `get_device_state`, 1,000 calls.
//!
//! Run: `cargo bench -p closedloop --bench stdio`. The simulated relays pull in after 1 ms and
//! are polled every 5 ms, so the figures are dominated by closedloop itself and the journal's
//! fsyncs, not by simulated physics.

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

const RELAYS: usize = 8;
const CYCLES: usize = 1000;

fn plant() -> String {
    let mut s = String::from("[server]\nname = \"bench\"\njournal = \"sqlite://bench.db\"\n");
    for i in 0..RELAYS {
        s.push_str(&format!(
            r#"
[[device]]
id = "relay{i}"
description = "bench relay"
driver = {{ kind = "sim", model = "relay", pull_in_ms = 1 }}
poll_ms = 5
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.01
idempotent = true
"#
        ));
    }
    s
}

async fn call(c: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let r = c.call_tool(p).await.expect("call");
    r.structured_content.expect("structured")
}

fn report(name: &str, mut lat: Vec<Duration>, wall: Duration) {
    lat.sort();
    let pct =
        |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0;
    println!(
        "{}",
        json!({"bench": name, "n": lat.len(), "p50_ms": (pct(0.50) * 1000.0).round() / 1000.0,
               "p99_ms": (pct(0.99) * 1000.0).round() / 1000.0,
               "per_second": ((lat.len() as f64 / wall.as_secs_f64()) * 10.0).round() / 10.0})
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bench.toml");
        std::fs::write(&path, plant()).expect("plant");
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
        cmd.arg("serve").arg(&path).stderr(Stdio::null());
        let client = ().serve(TokioChildProcess::new(cmd).expect("spawn")).await.expect("connect");
        // Wait until every relay answered once.
        for i in 0..RELAYS {
            let _ = call(
                &client,
                &format!("relay{i}_switch"),
                json!({"on": false, "wait_s": 5}),
            )
            .await;
        }

        let mut lat = Vec::with_capacity(CYCLES);
        let start = Instant::now();
        for n in 0..CYCLES {
            let t = Instant::now();
            let r = call(
                &client,
                "relay0_switch",
                json!({"on": n % 2 == 0, "wait_s": 5}),
            )
            .await;
            assert_eq!(r["status"], "completed", "{r}");
            lat.push(t.elapsed());
        }
        report("act_and_confirm_sequential", lat, start.elapsed());

        let start = Instant::now();
        let mut tasks = Vec::new();
        for i in 0..RELAYS {
            let peer = client.peer().clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                for n in 0..CYCLES / RELAYS {
                    let t = Instant::now();
                    let p = CallToolRequestParams::new(format!("relay{i}_switch")).with_arguments(
                        json!({"on": n % 2 == 1, "wait_s": 5})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    );
                    let r = peer.call_tool(p).await.expect("call");
                    assert_eq!(r.structured_content.expect("sc")["status"], "completed");
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.expect("task"));
        }
        report("act_and_confirm_8_relays_parallel", lat, start.elapsed());

        let mut lat = Vec::with_capacity(CYCLES);
        let start = Instant::now();
        for _ in 0..CYCLES {
            let t = Instant::now();
            let r = call(&client, "get_device_state", json!({"device": "relay0"})).await;
            assert_eq!(r["liveness"], "online");
            lat.push(t.elapsed());
        }
        report("read_only_get_device_state", lat, start.elapsed());
        let _ = client.cancel().await;
    });
}
