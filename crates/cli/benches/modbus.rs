//! End-to-end figures through Modbus TCP to `closedloop sim` (a separate process): raw polls per
//! second through closedloop's Modbus driver, and act-and-confirm commands per second through
//! `closedloop serve` over stdio. Prints one JSON line per measurement.
//!
//! Run: `cargo bench -p closedloop --bench modbus`.

use closedloop_contract::{Area, Driver};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RELAYS: u8 = 4;

fn plant(addr: &str) -> String {
    let mut s = String::from("[server]\nname = \"bench\"\njournal = \"sqlite://bench.db\"\n");
    for unit in 1..=RELAYS {
        s.push_str(&format!(
            r#"
[[device]]
id = "relay{unit}"
description = "bench relay"
driver = {{ kind = "modbus-tcp", address = "{addr}", unit = {unit} }}
poll_ms = 5
[device.sim]
model = "relay"
pull_in_ms = 1
listen = "LISTEN"
unit = {unit}
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

fn report(name: &str, mut lat: Vec<Duration>, wall: Duration) {
    lat.sort();
    let pct =
        |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1000.0;
    println!(
        "{}",
        json!({"bench": name, "n": lat.len(), "p50_ms": (pct(0.5) * 1000.0).round() / 1000.0,
               "p99_ms": (pct(0.99) * 1000.0).round() / 1000.0,
               "per_second": ((lat.len() as f64 / wall.as_secs_f64()) * 10.0).round() / 10.0})
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut sim, addr) = start_the_simulator(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        raw_polls_through_the_driver(&addr).await;
        act_and_confirm_through_serve(dir.path()).await;
    });
    let _ = sim.kill();
    let _ = sim.wait();
}

/// `closedloop sim` of the bench relays on a free port (`dir/sim.toml`), and the plant `serve`
/// uses written to `dir/plant.toml`: the sim and its Modbus address.
fn start_the_simulator(dir: &std::path::Path) -> (std::process::Child, String) {
    let sim_plant = plant("127.0.0.1:1").replace("LISTEN", "127.0.0.1:0");
    std::fs::write(dir.join("sim.toml"), &sim_plant).expect("plant");
    let mut sim = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(dir.join("sim.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("closedloop sim");
    let mut addr = String::new();
    for line in BufReader::new(sim.stdout.take().expect("stdout")).lines() {
        let line = line.expect("utf-8");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["closedloop", "sim:", "control", ..] => break,
            ["closedloop", "sim:", _, "unit", _, "on", a] => addr = a.to_string(),
            _ => {}
        }
    }
    std::fs::write(
        dir.join("plant.toml"),
        plant(&addr).replace("LISTEN", "127.0.0.1:0"),
    )
    .expect("plant");
    (sim, addr)
}

/// Raw polls through the driver: one connection, one request in flight, for 2 s.
async fn raw_polls_through_the_driver(addr: &str) {
    let reg = closedloop_modbus::Connections::new();
    let dev = closedloop_modbus::modbus_tcp(&reg, addr, 1, 500).expect("driver");
    let mut lat = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let t = Instant::now();
        let r = dev.read(Area::DiscreteInput, 0, 1).await;
        assert!(matches!(r, Ok(Ok(_))), "{r:?}");
        lat.push(t.elapsed());
    }
    report("modbus_tcp_polls_one_connection", lat, start.elapsed());
}

/// 400 switches of the relays in turn through `closedloop serve` on `dir/plant.toml` over
/// stdio, one at a time, each waited on until confirmed.
async fn act_and_confirm_through_serve(dir: &std::path::Path) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .stderr(Stdio::null());
    let client = ().serve(TokioChildProcess::new(cmd).expect("serve")).await.expect("connect");
    let call = |n: usize| {
        let unit = 1 + (n % usize::from(RELAYS));
        CallToolRequestParams::new(format!("relay{unit}_switch")).with_arguments(
            json!({"on": (n / usize::from(RELAYS)).is_multiple_of(2), "wait_s": 5})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        )
    };
    for n in 0..usize::from(RELAYS) {
        let _ = client
            .call_tool(call(n + usize::from(RELAYS)))
            .await
            .expect("warm up");
    }
    let mut lat = Vec::new();
    let start = Instant::now();
    for n in 0..400 {
        let t = Instant::now();
        let r = client.call_tool(call(n)).await.expect("call");
        assert_eq!(r.structured_content.expect("sc")["status"], "completed");
        lat.push(t.elapsed());
    }
    report(
        "modbus_tcp_act_and_confirm_sequential",
        lat,
        start.elapsed(),
    );
    let _ = client.cancel().await;
}
