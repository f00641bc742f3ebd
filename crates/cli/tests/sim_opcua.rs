//! `closedloop sim` serving OPC UA devices as its own process: the endpoint announced on stdout
//! is the one an `opcua` driver names, closedloop-opcua's client reads, writes and calls the
//! devices there, and faults injected through `closedloop sim fault` / `clear` show on the wire
//! (nak refuses a call, power off drops the session) or are refused naming device and kind.

mod common;

use closedloop_contract::Value;
use closedloop_sim_server::opcua::{Class, OpcuaClient, OpcuaConfig, classify};
use common::{sim_ctl, start_sim_plant};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[path = "../../../tests/plants/mod.rs"]
mod plants;

/// Longest any single wait here may take.
const WAIT: Duration = Duration::from_secs(10);

/// A relay `lamp` and a stepper `slide` on one OPC UA server at `127.0.0.1:0`; `lamp` takes the
/// extra `[device.sim]` lines `lamp_sim`.
fn opcua_plant(dir: &Path, lamp_sim: &str) -> PathBuf {
    let text = plants::replace_line(
        plants::OPCUA_SIM,
        r#"model = "relay""#,
        &format!("model = \"relay\"\n{lamp_sim}"),
    );
    let path = dir.join("opcua-sim.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn node(device: &str, name: &str) -> String {
    format!("ns=2;s={device}.{name}")
}

async fn wait_session(client: &OpcuaClient, connected: bool) {
    let mut state = client.session_state();
    let waited = tokio::time::timeout(WAIT, state.wait_for(|s| s.is_connected() == connected));
    assert!(
        matches!(waited.await, Ok(Ok(_))),
        "the session never became {} (now {:?})",
        if connected { "connected" } else { "lost" },
        *client.session_state().borrow()
    );
}

/// Reads `node` until `pred` holds for its value, failing after [`WAIT`].
async fn read_until(client: &OpcuaClient, node: &str, pred: impl Fn(&Option<Value>) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = client.read(&[node.to_string()]).await.expect("a read");
        if pred(&got[0].value) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{node} never got there: last {:?}",
            got[0]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_serves_opcua_devices_on_the_announced_endpoint_and_takes_their_faults() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sim, control, announced) = start_sim_plant(&opcua_plant(dir.path(), ""));
    let endpoint = one_real_endpoint_for_both(&announced);
    let client = connected_client(&endpoint).await;
    client
        .write(&node("lamp", "Commanded"), Value::Bool(true))
        .await
        .expect("the lamp switches");
    read_until(&client, &node("lamp", "Contact"), |v| {
        *v == Some(Value::Bool(true))
    })
    .await;

    nak_refuses_a_call_until_cleared(&client, &control).await;
    power_off_drops_the_session_until_cleared(&client, &control).await;

    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["sim", "fault", "--control", &control, "lamp", "crc_error"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"lamp\"") && stderr.contains("crc_error") && stderr.contains("OPC UA"),
        "{stderr}"
    );

    sim.terminate_cleanly();
    wait_session(&client, false).await;
}

/// The announcements name one server, on a real port, for the lamp and the slide: its
/// endpoint URL.
fn one_real_endpoint_for_both(announced: &[Vec<String>]) -> String {
    let [lamp, slide] = announced else {
        panic!("two announcements: {announced:?}")
    };
    let [name, kind, on, endpoint] = lamp.as_slice() else {
        panic!("{lamp:?}")
    };
    assert_eq!(
        (name.as_str(), kind.as_str(), on.as_str()),
        ("lamp", "opcua", "on")
    );
    let port = endpoint
        .strip_prefix("opc.tcp://127.0.0.1:")
        .and_then(|p| p.strip_suffix('/'))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("not an endpoint URL: {endpoint}"));
    assert_ne!(port, 0, "the real port is announced");
    assert_eq!(
        slide,
        &["slide", "opcua", "on", endpoint.as_str()],
        "one server"
    );
    endpoint.clone()
}

/// closedloop-opcua's client at `endpoint`, quick to notice a lost session, once connected.
async fn connected_client(endpoint: &str) -> OpcuaClient {
    let config = OpcuaConfig {
        keep_alive: Duration::from_millis(200),
        max_failed_keep_alives: 2,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        ..OpcuaConfig::new(endpoint)
    };
    let client = OpcuaClient::connect(config).expect("a valid config");
    wait_session(&client, true).await;
    client
}

/// Under nak the slide's `Start()` is refused (`Bad_InternalError`, a nak); cleared, it runs.
async fn nak_refuses_a_call_until_cleared(client: &OpcuaClient, control: &str) {
    sim_ctl(control, &["fault", "slide", "nak"]);
    let err = client
        .call("ns=2;s=slide", &node("slide", "Start"), vec![])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_InternalError"), "{err}");
    assert_eq!(classify(&err), Class::Nak);
    sim_ctl(control, &["clear", "slide", "nak"]);
    client
        .call("ns=2;s=slide", &node("slide", "Start"), vec![])
        .await
        .expect("Start() once nak is cleared");
}

/// Both devices powered off drop the session; cleared, it comes back with the lamp off.
async fn power_off_drops_the_session_until_cleared(client: &OpcuaClient, control: &str) {
    sim_ctl(control, &["fault", "lamp", "power_off"]);
    sim_ctl(control, &["fault", "slide", "power_off"]);
    wait_session(client, false).await;
    sim_ctl(control, &["clear", "lamp"]);
    sim_ctl(control, &["clear", "slide"]);
    wait_session(client, true).await;
    read_until(client, &node("lamp", "Contact"), |v| {
        *v == Some(Value::Bool(false))
    })
    .await;
}

#[test]
fn sim_refuses_opcua_with_listen_naming_file_device_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let plant = opcua_plant(dir.path(), "listen = \"127.0.0.1:0\"");
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(&plant)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("opcua-sim.toml")
            && stderr.contains("\"lamp\"")
            && stderr.contains("`opcua`")
            && stderr.contains("`listen`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing announced");
}
