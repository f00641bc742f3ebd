//! The fault matrix through a real broker: `closedloop sim` runs the `mqtt-relay` boards of
//! examples/mqtt-workshop.toml as MQTT clients, `closedloop serve` drives them through the `mqtt`
//! driver, an MCP client acts, and faults are injected at run time through `closedloop sim fault`
//! — closedloop never reports `completed` under a fault, and names the right code.
//!
//! The broker is `$CLOSEDLOOP_MQTT_URL` when set (`.ci/run` points it at the machine's
//! Mosquitto), else a Mosquitto this test starts on a free port. Topics and client ids are made
//! unique per test, so a shared broker is safe.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The broker to use: the one named by `$CLOSEDLOOP_MQTT_URL`, or our own.
enum Broker {
    Shared(String),
    Own(Box<closedloop_mqtt::testing::Mosquitto>),
}

impl Broker {
    async fn get() -> Broker {
        match std::env::var("CLOSEDLOOP_MQTT_URL") {
            Ok(url) => {
                let (host, port) = closedloop_mqtt::parse_broker_url(&url).expect("a broker URL");
                tokio::net::TcpStream::connect((host.as_str(), port))
                    .await
                    .unwrap_or_else(|e| panic!("CLOSEDLOOP_MQTT_URL={url} is not reachable: {e}"));
                Broker::Shared(url)
            }
            Err(_) => Broker::Own(Box::new(closedloop_mqtt::testing::Mosquitto::start().await)),
        }
    }

    fn url(&self) -> &str {
        match self {
            Broker::Shared(url) => url,
            Broker::Own(m) => &m.url,
        }
    }
}

/// Writes the example plant with our broker and unique topics and client ids, starts
/// `closedloop sim` on it and waits until both boards are connected. Returns the sim and its
/// control address.
fn start_sim(dir: &Path, broker: &str, tag: &str) -> (Running, String) {
    let example = include_str!("../../../examples/mqtt-workshop.toml");
    let plant = example
        .replace("mqtt://127.0.0.1:1883", broker)
        .replace("workshop/", &format!("closedloop-test/{tag}/"))
        .replace("closedloop-mqtt-workshop", &format!("closedloop-{tag}"));
    std::fs::write(dir.join("plant.toml"), &plant).unwrap();
    let (sim, control, announced) = start_sim_plant(&dir.join("plant.toml"));
    let mut relays: Vec<&str> = announced
        .iter()
        .filter(|w| w.get(1).map(String::as_str) == Some("mqtt-relay"))
        .map(|w| w[0].as_str())
        .collect();
    relays.sort();
    assert_eq!(relays, ["fan", "lamp"]);
    (sim, control)
}

fn tag() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{}-{nanos}", std::process::id())
}

async fn switch(c: &Client, device: &str, on: bool) -> (String, String, serde_json::Value) {
    act(
        c,
        &format!("{device}_switch"),
        json!({"on": on, "wait_s": 3}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_through_mosquitto_never_completes_under_a_fault() {
    let broker = Broker::get().await;
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_sim(dir.path(), broker.url(), &tag());
    let c = connect(dir.path()).await;
    liveness(&c, "lamp", "online").await;

    the_lamp_completes_on_its_reported_state(&c).await;
    each_lamp_fault_never_completes(&c, &control).await;
    a_frozen_or_unpowered_board_is_offline_until_it_returns(&c, &control).await;

    // A reboot that strikes just after the set arrives: the output comes back off.
    sim_ctl(
        &control,
        &["fault", "fan", "reboot", "down_ms=1500", "after_ms=0"],
    );
    let (status, code, r) = switch(&c, "fan", true).await;
    // The board reboots at once (its will says offline) and stays silent 1.5 s: refused if
    // the will arrived first, failed if the set went out first — DEVICE_OFFLINE either way.
    assert_eq!(code, "DEVICE_OFFLINE", "{r}");
    assert!(["rejected", "failed"].contains(&status.as_str()), "{r}");
    sim_ctl(&control, &["clear", "fan"]);

    // Faults with no meaning for an MQTT board are refused by the control endpoint, by name.
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["sim", "fault", "--control", &control, "lamp", "nak"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nak"), "{err}");
    c.cancel().await.unwrap();
}

/// With no fault, the lamp completes on the state its board reports, and reads it.
async fn the_lamp_completes_on_its_reported_state(c: &Client) {
    let (status, code, r) = switch(c, "lamp", true).await;
    assert_eq!((status.as_str(), code.as_str()), ("completed", ""), "{r}");
    assert_eq!(r["verified"], json!(true));
    assert_eq!(r["evidence"]["on"]["value"], json!(true));
    assert!(
        r["evidence"]["on"]["source"]
            .as_str()
            .unwrap()
            .ends_with("/lamp/state /on"),
        "{r}"
    );
    let state = call(c, "get_device_state", json!({"device": "lamp"})).await;
    assert_eq!(sc(&state)["signals"]["on"]["value"], json!(true));
}

/// Each fault, injected at run time; each time the right code, never `completed`.
async fn each_lamp_fault_never_completes(c: &Client, control: &str) {
    let cases: [(&[&str], bool, &[&str]); 4] = [
        (&["brownout"], true, &["FEEDBACK_MISMATCH"]),
        (
            &["swapped_contacts"],
            true,
            &["FEEDBACK_MISMATCH", "TIMEOUT"],
        ),
        (
            &["latency_ms", "ms=1500"],
            false,
            // The set lands 1.5 s late, after the 0.5 s deadline. A heartbeat (every 1 s)
            // that lands inside the window shows the state unmoved: FEEDBACK_MISMATCH; when
            // none does, the board (online: its heartbeats go on) reported nothing: NO_FEEDBACK.
            &["FEEDBACK_MISMATCH", "NO_FEEDBACK"],
        ),
        // Every set is lost; heartbeats go on (every 1 s): one inside the 0.5 s window shows
        // the state unmoved (FEEDBACK_MISMATCH); none means an online board that reported
        // nothing (NO_FEEDBACK).
        (
            &["drop_rate", "p=1.0"],
            true,
            &["FEEDBACK_MISMATCH", "NO_FEEDBACK"],
        ),
    ];
    for (fault, on, codes) in cases {
        switch(c, "lamp", !on).await;
        let mut words = vec!["fault", "lamp"];
        words.extend_from_slice(fault);
        sim_ctl(control, &words);
        let (status, code, r) = switch(c, "lamp", on).await;
        assert_ne!(status, "completed", "{fault:?}: {r}");
        assert!(codes.contains(&code.as_str()), "{fault:?}: {code} {r}");
        sim_ctl(control, &["clear", "lamp"]);
        // Let a late set (latency) land before the next case starts from a known state.
        tokio::time::sleep(Duration::from_millis(1600)).await;
    }
}

/// A frozen board and a power cut: the fan is offline and refused, and back once cleared.
async fn a_frozen_or_unpowered_board_is_offline_until_it_returns(c: &Client, control: &str) {
    // A frozen board: connected, silent. Offline after the silence window; back once cleared.
    sim_ctl(control, &["fault", "fan", "zombie"]);
    liveness(c, "fan", "offline").await;
    let (status, code, r) = switch(c, "fan", true).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "DEVICE_OFFLINE"),
        "{r}"
    );
    sim_ctl(control, &["clear", "fan"]);
    liveness(c, "fan", "online").await;
    let (status, _, r) = switch(c, "fan", true).await;
    assert_eq!(status, "completed", "{r}");

    // A power cut: the will says offline at once; the board comes back when power returns.
    sim_ctl(control, &["fault", "fan", "power_off"]);
    liveness(c, "fan", "offline").await;
    let (status, code, r) = switch(c, "fan", false).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "DEVICE_OFFLINE"),
        "{r}"
    );
    assert!(r["detail"].as_str().unwrap().contains("announced"), "{r}");
    sim_ctl(control, &["clear", "fan", "power_off"]);
    liveness(c, "fan", "online").await;
    let (status, _, r) = switch(c, "fan", false).await;
    assert_eq!(status, "completed", "{r}");
}
