//! Helpers shared by the tests that run `closedloop sim` and `closedloop serve` as child processes
//! and drive them with rmcp's client over stdio.

#![allow(dead_code)]

pub mod gateways;
pub mod page;
pub mod pg;
pub mod proxy;
pub mod tasks;
pub mod truth;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub type Client = RunningService<RoleClient, ()>;

/// The `closedloop` binary under test, as a command to add arguments to.
pub fn closedloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_closedloop"))
}

/// What a finished `closedloop` said on stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A finished command's exit code, stdout and stderr, as text.
pub fn said(o: &Output) -> (Option<i32>, String, String) {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o.status.code(), out, stderr(o))
}

/// `closedloop init ARGS…`, finished.
pub fn init(args: &[&str]) -> Output {
    closedloop().arg("init").args(args).output().unwrap()
}

/// `closedloop ARGS… PLANT MORE…`, finished: (exit code, stdout, stderr).
pub fn run(args: &[&str], plant: &Path, more: &[&str]) -> (Option<i32>, String, String) {
    said(
        &closedloop()
            .args(args)
            .arg(plant)
            .args(more)
            .output()
            .unwrap(),
    )
}

/// `closedloop ARGS…` run in `dir`, finished: (exit code, stdout, stderr).
pub fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    said(&closedloop().current_dir(dir).args(args).output().unwrap())
}

/// `path` relative to the repository's root.
pub fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Kills a child process when the test ends, however it ends.
pub struct Running(pub Child);

impl Running {
    /// Sends SIGTERM and asserts the process exits with code 0: a clean shutdown.
    pub fn terminate_cleanly(&mut self) {
        let pid = self.0.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        assert_eq!(
            self.0.wait().unwrap().code(),
            Some(0),
            "SIGTERM is a clean exit"
        );
    }
}

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

/// Starts `closedloop sim PLANT` and reads its announcements up to the control endpoint's line.
/// Returns the sim, the control address, and every other announcement split into words after
/// `closedloop sim:` (`["lamp", "can-node", "bus", "on", "slcan:/tmp/..."]`).
pub fn start_sim_plant(plant: &Path) -> (Running, String, Vec<Vec<String>>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(plant)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut announced = Vec::new();
    loop {
        let line = lines.next().expect("sim announces").unwrap();
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.as_slice() {
            [a, b, control, on, addr]
                if a == "closedloop" && b == "sim:" && control == "control" && on == "on" =>
            {
                let addr = addr.clone();
                return (Running(child), addr, announced);
            }
            [a, b, rest @ ..] if a == "closedloop" && b == "sim:" => announced.push(rest.to_vec()),
            _ => {}
        }
    }
}

/// examples/modbus-workshop.toml, the Modbus workshop `closedloop sim` serves.
pub const MODBUS_WORKSHOP: &str = include_str!("../../../../examples/modbus-workshop.toml");

/// `closedloop sim` of [`MODBUS_WORKSHOP`] on free ports (written to `dir/sim.toml`), with the
/// further arguments `more`: the sim, its control address, and the address its Modbus units
/// announced (if any did).
pub fn sim_modbus_workshop(dir: &Path, more: &[&OsStr]) -> (Running, String, Option<String>) {
    let sim_plant =
        MODBUS_WORKSHOP.replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"");
    std::fs::write(dir.join("sim.toml"), &sim_plant).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(dir.join("sim.toml"))
        .args(more)
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
    (Running(child), control, port)
}

/// Starts `closedloop sim` of the Modbus workshop on free ports ([`sim_modbus_workshop`]) and
/// writes the plant `serve` should use to `dir/plant.toml`: the same file, with the announced
/// port as every device's address. Returns the sim and its control address.
pub fn start_modbus_sim(dir: &Path) -> (Running, String) {
    let (sim, control, port) = sim_modbus_workshop(dir, &[]);
    let addr = port.expect("a Modbus unit announced");
    let plant = MODBUS_WORKSHOP.replace(
        "address = \"127.0.0.1:1502\"",
        &format!("address = \"{addr}\""),
    );
    std::fs::write(dir.join("plant.toml"), plant).unwrap();
    (sim, control)
}

/// Calls an action tool and follows the command to its end: `(status, error_code, result)`.
pub async fn act(c: &Client, tool: &str, args: Value) -> (String, String, Value) {
    let r = settle(c, call(c, tool, args).await).await;
    let (status, code) = outcome(&r);
    (status, code, sc(&r).clone())
}

/// Waits (at most 15 s) until `get_device_state` reports `want` for `device`.
pub async fn liveness(c: &Client, device: &str, want: &str) {
    for _ in 0..300 {
        let s = call(c, "get_device_state", json!({"device": device})).await;
        if sc(&s)["liveness"] == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{device} never became {want}");
}

/// What `closedloop sim` announced: each Modbus device's (unit, address), each relay's (prefix,
/// broker), each CAN node's (bus, interface), and the control endpoint.
pub struct Announced {
    pub units: BTreeMap<String, (u8, SocketAddr)>,
    pub relays: BTreeMap<String, (String, String)>,
    pub can_nodes: BTreeMap<String, (String, String)>,
    pub control: SocketAddr,
}

/// Reads the announcement lines up to the control endpoint's; they come only once every port
/// accepts connections, so nothing here sleeps.
pub fn announced(child: &mut Child) -> Announced {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut units = BTreeMap::new();
    let mut relays = BTreeMap::new();
    let mut can_nodes = BTreeMap::new();
    loop {
        let line = lines
            .next()
            .expect("closedloop sim exited before announcing its control endpoint")
            .expect("utf-8 stdout");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["closedloop", "sim:", "control", "on", addr] => {
                return Announced {
                    units,
                    relays,
                    can_nodes,
                    control: addr.parse().expect("an ip:port"),
                };
            }
            [
                "closedloop",
                "sim:",
                device,
                "can-node",
                bus,
                "on",
                interface,
            ] => {
                can_nodes.insert(device.to_string(), (bus.to_string(), interface.to_string()));
            }
            [
                "closedloop",
                "sim:",
                device,
                "mqtt-relay",
                prefix,
                "on",
                broker,
            ] => {
                relays.insert(device.to_string(), (prefix.to_string(), broker.to_string()));
            }
            ["closedloop", "sim:", device, "unit", unit, "on", addr] => {
                let unit = unit.parse().expect("a unit id");
                units.insert(
                    device.to_string(),
                    (unit, addr.parse().expect("an ip:port")),
                );
            }
            _ => panic!("unexpected stdout line {line:?}"),
        }
    }
}

/// `closedloop sim fault|clear --control ADDR ...`, its output whether it succeeded or not.
pub fn sim_request(control: SocketAddr, args: &[&str]) -> Output {
    closedloop()
        .arg("sim")
        .arg(args[0])
        .arg("--control")
        .arg(control.to_string())
        .args(&args[1..])
        .output()
        .unwrap()
}

/// The fault-matrix plant and helpers that hand back a whole `CallToolResult` (its `is_error` and
/// text as well as its structured content), for the `stdio_*` tests.
pub mod stdio {
    use super::{Client, call, sc, settle};
    use rmcp::model::CallToolResult;
    use serde_json::Value;

    const PLANT: &str = include_str!("../../../../tests/plants/faults.toml");

    pub fn plant_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plant.toml"), PLANT).unwrap();
        dir
    }

    pub fn status(r: &CallToolResult) -> String {
        sc(r)["status"].as_str().unwrap_or("").to_string()
    }

    pub fn code(r: &CallToolResult) -> String {
        sc(r)["error_code"].as_str().unwrap_or("").to_string()
    }

    /// Calls an action tool and follows the command to its end.
    pub async fn act(client: &Client, tool: &str, args: Value) -> CallToolResult {
        let r = call(client, tool, args).await;
        settle(client, r).await
    }

    pub fn text(r: &CallToolResult) -> String {
        r.content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default()
    }
}

/// A lamp on the simulator (a relay whose contact confirms the switch), its server named `name`
/// and journaled to `journal`: the plant of the journal tests (verify, PostgreSQL, re-judging).
pub fn lamp_plant(name: &str, journal: &str) -> String {
    format!(
        r#"
[server]
name = "{name}"
journal = "{journal}"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = {{ kind = "sim", model = "relay" }}
poll_ms = 20
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = 0.02
idempotent = true
"#
    )
}
