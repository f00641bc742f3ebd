//! `closedloop sim` as its own process: the example Modbus plant served on free ports announced
//! on stdout, a fault injected and cleared through `closedloop sim fault` / `clear`, observed by
//! a Modbus client no one here wrote (tokio-modbus), and a clean exit on SIGTERM; an `mqtt-relay`
//! run as a client of a real Mosquitto, its faults injected, cleared and refused the same way;
//! CAN nodes on a simulated slcan adapter, reached through the announced pty with closedloop-can's
//! `CanBus` as the `can` driver reaches one (socat is a prerequisite: scripts/system-deps).

use closedloop_mqtt::{BrokerConfig, Link, Message, MqttBroker, Subscription};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use tokio_modbus::ExceptionCode;
use tokio_modbus::client::{Reader, tcp};

#[path = "../../../tests/plants/mod.rs"]
mod plants;

fn closedloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_closedloop"))
}

/// Kills the simulator if the test fails before its orderly SIGTERM.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `closedloop sim` announced: each Modbus device's (unit, address), each relay's (prefix,
/// broker), each CAN node's (bus, interface), and the control endpoint.
struct Announced {
    units: BTreeMap<String, (u8, SocketAddr)>,
    relays: BTreeMap<String, (String, String)>,
    can_nodes: BTreeMap<String, (String, String)>,
    control: SocketAddr,
}

/// Reads the announcement lines up to the control endpoint's; they come only once every port
/// accepts connections, so nothing here sleeps.
fn announced(child: &mut Child) -> Announced {
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

fn sim_request(control: SocketAddr, args: &[&str]) -> Output {
    closedloop()
        .arg("sim")
        .arg(args[0])
        .arg("--control")
        .arg(control.to_string())
        .args(&args[1..])
        .output()
        .unwrap()
}

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

    let pid = sim.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = sim.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean exit");
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
    let mut link = observer.link();
    tokio::time::timeout(
        Duration::from_secs(5),
        link.wait_for(|l| *l == Link::Connected),
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

    let pid = sim.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        sim.0.wait().unwrap().code(),
        Some(0),
        "SIGTERM is a clean exit"
    );
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

/// A plant with a relay node `lamp` and a stepper node `slide` on the CAN bus `workshop`, both
/// described by the example DBC; `lamp_sim` adds lines to the lamp's [device.sim].
/// This process's bus name: a bus name is also the path of its pty link, and other test
/// processes may run a bus at the same time.
fn can_bus() -> String {
    format!("workshop-{}", std::process::id())
}

fn can_plant(dir: &std::path::Path, lamp_sim: &str) -> std::path::PathBuf {
    let dbc = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/can-workshop.dbc")
        .canonicalize()
        .unwrap();
    let dbc = dbc.display();
    let bus = can_bus();
    let text = format!(
        r#"
[server]
name = "can-sim"
journal = "sqlite://unused.db"

[[device]]
id = "lamp"
description = "Desk lamp on a CAN relay node"
driver = {{ kind = "can", interface = "slcan:/dev/ttyACM0", dbc = "{dbc}" }}
[device.sim]
model = "relay"
pull_in_ms = 20
can = {{ bus = "{bus}", dbc = "{dbc}", status = "LampStatus", command = "LampCmd", period_ms = 20 }}
{lamp_sim}
[device.signals]
contact = {{ message = "LampStatus", signal = "Contact", type = "bool" }}
[[device.action]]
name = "switch"
description = "Switch the lamp"
params = {{ on = {{ type = "bool" }} }}
write = [{{ message = "LampCmd", signals = {{ On = "params.on" }} }}]
done_when = "contact == params.on"
expect_s = 0.1

[[device]]
id = "slide"
description = "Linear slide on a CAN stepper node"
driver = {{ kind = "can", interface = "slcan:/dev/ttyACM0", dbc = "{dbc}" }}
[device.sim]
model = "stepper"
can = {{ bus = "{bus}", dbc = "{dbc}", status = "SlideStatus", command = "SlideCmd" }}
[device.signals]
position_mm = {{ message = "SlideStatus", signal = "PositionMm" }}
"#
    );
    let path = dir.join("can-sim.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The next frame of `message` within 2 s (or `None`), decoded.
async fn next_can(
    frames: &mut closedloop_sim_server::can::Frames,
    dbc: &closedloop_sim_server::can::Dbc,
    message: &str,
    within: Duration,
) -> Option<BTreeMap<String, f64>> {
    let m = dbc.message(message).unwrap();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let f = tokio::time::timeout_at(deadline, frames.next())
            .await
            .ok()?;
        let f = f.expect("the bus stays up");
        if f.id == m.id() {
            let values = closedloop_sim_server::can::decode(m, &f.data);
            return Some(
                values
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            );
        }
    }
}

#[tokio::test]
async fn sim_runs_can_nodes_on_an_slcan_pty_and_takes_their_faults_at_run_time() {
    use closedloop_sim_server::can::{CanBus, Dbc, Frame, Interface, encode};
    let dir = tempfile::tempdir().unwrap();
    let plant = can_plant(dir.path(), "");
    let child = closedloop()
        .arg("sim")
        .arg(&plant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sim = Running(child);
    let Announced {
        units,
        can_nodes,
        control,
        ..
    } = announced(&mut sim.0);
    assert!(units.is_empty());
    let names: Vec<&str> = can_nodes.keys().map(String::as_str).collect();
    assert_eq!(names, ["lamp", "slide"]);
    let (bus_name, interface) = can_nodes["lamp"].clone();
    let bus = can_bus();
    assert_eq!(bus_name, bus);
    assert_eq!(
        can_nodes["slide"],
        (bus_name, interface.clone()),
        "one bus, one pty"
    );
    assert_eq!(
        interface,
        format!(
            "slcan:{}",
            std::env::temp_dir()
                .join(format!("closedloop-can-{bus}"))
                .display()
        ),
        "the bus's stable link to its pty"
    );

    let bus = tokio::time::timeout(
        Duration::from_secs(5),
        CanBus::open(&Interface::parse(&interface).unwrap(), 500_000),
    )
    .await
    .expect("the simulated adapter answers within 5 s")
    .expect("it takes S6 and O");
    let dbc = Dbc::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/can-workshop.dbc"),
    )
    .unwrap();
    let mut frames = bus.frames();
    let wait = Duration::from_secs(2);
    let lamp = next_can(&mut frames, &dbc, "LampStatus", wait)
        .await
        .unwrap();
    assert_eq!((lamp["Commanded"], lamp["Contact"]), (0.0, 0.0));
    let cmd = dbc.message("LampCmd").unwrap();
    let on = |v: f64| {
        let data = encode(cmd, &BTreeMap::from([("On".to_string(), v)])).unwrap();
        Frame::data(cmd.id(), false, data)
    };
    bus.send(on(1.0)).await.unwrap();
    loop {
        let v = next_can(&mut frames, &dbc, "LampStatus", wait)
            .await
            .unwrap();
        if v["Contact"] == 1.0 {
            break;
        }
    }

    let out = sim_request(control, &["fault", "lamp", "power_off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Once the adapter acked a frame sent now, every status sent before the fault is read.
    bus.send(Frame::data(0x7FF, false, [])).await.unwrap();
    let mut frames = bus.frames();
    let silent = next_can(&mut frames, &dbc, "LampStatus", Duration::from_millis(300)).await;
    assert_eq!(silent, None, "a powered-off node sends nothing");
    assert!(
        next_can(&mut frames, &dbc, "SlideStatus", wait)
            .await
            .is_some(),
        "the slide on the same bus goes on"
    );
    let out = sim_request(control, &["clear", "lamp"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = next_can(&mut frames, &dbc, "LampStatus", wait)
        .await
        .unwrap();
    assert_eq!(
        (back["Commanded"], back["Contact"]),
        (0.0, 0.0),
        "back with outputs off"
    );

    let out = sim_request(control, &["fault", "lamp", "nak"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lamp") && stderr.contains("nak") && stderr.contains("CAN"),
        "{stderr}"
    );

    let pid = sim.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(
        sim.0.wait().unwrap().code(),
        Some(0),
        "SIGTERM is a clean exit"
    );
    // socat went with it: the pty is gone.
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if frames.next().await.is_err() {
                return;
            }
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the bus is still up after the simulator exited"
    );
}

#[test]
fn sim_refuses_a_can_fault_without_can_meaning_naming_file_device_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let plant = can_plant(dir.path(), "faults = [{ kind = \"crc_error\" }]");
    let out = closedloop().arg("sim").arg(&plant).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("can-sim.toml")
            && stderr.contains("\"lamp\"")
            && stderr.contains("faults[0].kind")
            && stderr.contains("crc_error"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing announced");

    let plant = can_plant(dir.path(), "listen = \"127.0.0.1:0\"");
    let out = closedloop().arg("sim").arg(&plant).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"lamp\"") && stderr.contains("`can`") && stderr.contains("`listen`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing announced");
}
