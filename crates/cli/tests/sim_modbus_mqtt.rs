//! `closedloop sim` as its own process: the example Modbus plant served on free ports announced
//! on stdout, a fault injected and cleared through `closedloop sim fault` / `clear`, observed by
//! a Modbus client no one here wrote (tokio-modbus), and a clean exit on SIGTERM; an `mqtt-relay`
//! run as a client of a real Mosquitto, its faults injected, cleared and refused the same way.

mod common;

use closedloop_mqtt::{BrokerConfig, Connection, Message, MqttBroker, Subscription};
use common::{Announced, Running, announced, closedloop, sim_request};
use std::process::Stdio;
use std::time::Duration;
use tokio_modbus::ExceptionCode;
use tokio_modbus::client::{Reader, tcp};

#[path = "../../../tests/plants/mod.rs"]
mod plants;

#[tokio::test]
async fn sim_serves_the_example_plant_and_takes_faults_at_run_time() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/modbus-workshop.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let text = text.replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"");
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("modbus-workshop.toml");
    std::fs::write(&plant, text).unwrap();

    let child = closedloop()
        .arg("sim")
        .arg(&plant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sim = Running(child);
    let Announced {
        units,
        relays,
        control,
        ..
    } = announced(&mut sim.0);
    assert!(relays.is_empty());
    let names: Vec<&str> = units.keys().map(String::as_str).collect();
    assert_eq!(names, ["gripper", "lamp", "oven", "slide"]);
    let (unit, addr) = units["slide"];
    assert_ne!(addr.port(), 0, "the real port is announced");
    let mut slide = tcp::connect_slave(addr, unit.into()).await.unwrap();
    assert_eq!(
        slide.read_holding_registers(2, 2).await.unwrap(),
        Ok(vec![0, 0])
    );

    let out = sim_request(control, &["fault", "slide", "nak"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = slide.read_holding_registers(2, 2).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::ServerDeviceFailure));

    let out = sim_request(control, &["fault", "conveyor", "nak"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("conveyor") && stderr.contains("slide"),
        "{stderr}"
    );

    let out = sim_request(control, &["clear", "slide", "nak"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        slide.read_holding_registers(2, 2).await.unwrap(),
        Ok(vec![0, 0])
    );

    sim.terminate_cleanly();
}

/// A plant with one `mqtt-relay` named `lamp` on `broker`; `sim` adds lines to its [device.sim].
fn relay_plant(dir: &std::path::Path, broker: &str, sim: &str) -> std::path::PathBuf {
    let text = plants::replace_lines(
        plants::MQTT_SIM,
        &[
            (
                plants::MQTT_SIM_DRIVER,
                &plants::MQTT_SIM_DRIVER.replace("mqtt://127.0.0.1:1883", broker),
            ),
            (
                r#"prefix = "lab/lamp""#,
                &format!("prefix = \"lab/lamp\"\nbroker = \"{broker}\"\n{sim}"),
            ),
        ],
    );
    let path = dir.join("mqtt-sim.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The next status or state message as (topic tail, payload), the observer's own sets skipped.
async fn next(sub: &mut Subscription) -> (String, String) {
    let m: Message = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = sub.recv().await.expect("subscription open");
            if m.topic != "lab/lamp/set" {
                return m;
            }
        }
    })
    .await
    .expect("a message within 5 s");
    let tail = m.topic.trim_start_matches("lab/lamp/").to_string();
    (tail, String::from_utf8_lossy(&m.payload).into_owned())
}

/// The next state message as (on, seq).
async fn next_state(sub: &mut Subscription) -> (bool, u64) {
    loop {
        let (topic, payload) = next(sub).await;
        if topic == "state" {
            let v: serde_json::Value = serde_json::from_str(&payload).unwrap();
            return (v["on"].as_bool().unwrap(), v["seq"].as_u64().unwrap());
        }
    }
}

/// The next status message.
async fn next_status(sub: &mut Subscription) -> String {
    loop {
        let (topic, payload) = next(sub).await;
        if topic == "status" {
            return payload;
        }
    }
}

#[tokio::test]
async fn sim_runs_an_mqtt_relay_and_takes_its_faults_at_run_time() {
    let broker = closedloop_mqtt::testing::Mosquitto::start().await;
    let dir = tempfile::tempdir().unwrap();
    let plant = relay_plant(
        dir.path(),
        &broker.url,
        "pull_in_ms = 20\nheartbeat_s = 5.0",
    );
    let child = closedloop()
        .arg("sim")
        .arg(&plant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sim = Running(child);
    let Announced {
        units,
        relays,
        control,
        ..
    } = announced(&mut sim.0);
    assert!(units.is_empty());
    assert_eq!(relays["lamp"], ("lab/lamp".to_string(), broker.url.clone()));

    // Announced only once connected: the retained `online` is there for a late subscriber.
    let observer = MqttBroker::connect(BrokerConfig::new(&broker.url, "observer")).unwrap();
    let mut connection = observer.connection();
    tokio::time::timeout(
        Duration::from_secs(5),
        connection.wait_for(|l| *l == Connection::Connected),
    )
    .await
    .expect("observer connected")
    .unwrap();
    let mut sub = observer.subscribe("lab/lamp/+");
    assert_eq!(next(&mut sub).await, ("status".into(), "online".into()));
    observer
        .publish("lab/lamp/set", r#"{"on": true}"#, 1, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(next_state(&mut sub).await.0, "the state follows the set");

    let out = sim_request(control, &["fault", "lamp", "power_off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(next_status(&mut sub).await, "offline", "the will");
    let out = sim_request(control, &["clear", "lamp", "power_off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(next_status(&mut sub).await, "online");
    assert_eq!(
        next_state(&mut sub).await,
        (false, 1),
        "back off, freshly booted"
    );

    let out = sim_request(control, &["fault", "lamp", "nak"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lamp") && stderr.contains("nak") && stderr.contains("mqtt-relay"),
        "{stderr}"
    );

    sim.terminate_cleanly();
    assert_eq!(
        next_status(&mut sub).await,
        "offline",
        "gone without DISCONNECT"
    );
}

#[test]
fn sim_refuses_a_relay_fault_without_mqtt_meaning_naming_file_device_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let plant = relay_plant(
        dir.path(),
        "mqtt://127.0.0.1:1",
        "faults = [{ kind = \"nak\" }]",
    );
    let out = closedloop().arg("sim").arg(&plant).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mqtt-sim.toml")
            && stderr.contains("\"lamp\"")
            && stderr.contains("faults[0].kind")
            && stderr.contains("nak"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing announced");
}
