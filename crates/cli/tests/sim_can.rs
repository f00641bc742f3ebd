//! `closedloop sim` as its own process: CAN nodes on a simulated slcan adapter, reached through
//! the announced pty with closedloop-can's `CanBus` as the `can` driver reaches one, faults
//! injected and cleared through `closedloop sim fault` / `clear` or refused, and a clean exit on
//! SIGTERM that takes the pty with it (socat is a prerequisite: scripts/system-deps).

mod common;

use closedloop_sim_server::can::{CanBus, Dbc, Frame, Frames, Interface, encode};
use common::{Announced, Running, announced, closedloop, sim_request};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

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
    let dir = tempfile::tempdir().unwrap();
    let plant = can_plant(dir.path(), "");
    let child = closedloop()
        .arg("sim")
        .arg(&plant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sim = Running(child);
    let (control, interface) = both_nodes_on_one_pty(&mut sim);
    let (bus, dbc) = open_the_bus(&interface).await;
    the_lamp_switches_on(&bus, &dbc).await;
    let frames = a_powered_off_lamp_is_silent_until_cleared(&bus, &dbc, control).await;

    let out = sim_request(control, &["fault", "lamp", "nak"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lamp") && stderr.contains("nak") && stderr.contains("CAN"),
        "{stderr}"
    );

    sim.terminate_cleanly();
    the_pty_went_with_the_sim(frames).await;
}

/// What the sim announced: both nodes on this process's bus, on one pty with a stable link.
/// The control address and the bus's interface.
fn both_nodes_on_one_pty(sim: &mut Running) -> (std::net::SocketAddr, String) {
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
    (control, interface)
}

/// The simulated adapter at `interface`, opened as the `can` driver opens one, and the DBC.
async fn open_the_bus(interface: &str) -> (CanBus, Dbc) {
    let bus = tokio::time::timeout(
        Duration::from_secs(5),
        CanBus::open(&Interface::parse(interface).unwrap(), 500_000),
    )
    .await
    .expect("the simulated adapter answers within 5 s")
    .expect("it takes S6 and O");
    let dbc = Dbc::load(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/can-workshop.dbc"),
    )
    .unwrap();
    (bus, dbc)
}

/// The lamp reports itself off; a `LampCmd` frame switches it on, and its status shows it.
async fn the_lamp_switches_on(bus: &CanBus, dbc: &Dbc) {
    let mut frames = bus.frames();
    let wait = Duration::from_secs(2);
    let lamp = next_can(&mut frames, dbc, "LampStatus", wait)
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
        let v = next_can(&mut frames, dbc, "LampStatus", wait)
            .await
            .unwrap();
        if v["Contact"] == 1.0 {
            break;
        }
    }
}

/// A powered-off lamp sends nothing while the slide goes on; cleared, it comes back with its
/// outputs off. The frames received from the fault on.
async fn a_powered_off_lamp_is_silent_until_cleared(
    bus: &CanBus,
    dbc: &Dbc,
    control: std::net::SocketAddr,
) -> Frames {
    let wait = Duration::from_secs(2);
    let out = sim_request(control, &["fault", "lamp", "power_off"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Once the adapter acked a frame sent now, every status sent before the fault is read.
    bus.send(Frame::data(0x7FF, false, [])).await.unwrap();
    let mut frames = bus.frames();
    let silent = next_can(&mut frames, dbc, "LampStatus", Duration::from_millis(300)).await;
    assert_eq!(silent, None, "a powered-off node sends nothing");
    assert!(
        next_can(&mut frames, dbc, "SlideStatus", wait)
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
    let back = next_can(&mut frames, dbc, "LampStatus", wait)
        .await
        .unwrap();
    assert_eq!(
        (back["Commanded"], back["Contact"]),
        (0.0, 0.0),
        "back with outputs off"
    );
    frames
}

/// socat went with the simulator: the pty is gone, and the bus with it (within 5 s).
async fn the_pty_went_with_the_sim(mut frames: Frames) {
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
