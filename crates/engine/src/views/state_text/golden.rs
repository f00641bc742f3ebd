//! The words of a device's state per protocol, golden-tested: for a device on each driver kind,
//! what `get_device_state`'s detail and a `DEVICE_OFFLINE` result say when it was never heard,
//! fell silent (with and without a last error), announced it was down, or reads offline at a
//! gateway that does not drive it — checked against `tests/golden/device_texts.txt`. Run with
//! `UPDATE_GOLDEN=1` to rewrite the file after a deliberate wording change, then read the diff.

use super::*;
use crate::device::offline_detail_of;
use closedloop_plant::Device;
use std::sync::Arc;

const DBC: &str = "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: GW NODE\n\n\
                   BO_ 257 LampStatus: 1 NODE\n SG_ Contact : 0|1@1+ (1,0) [0|1] \"\" GW\n";

/// One device per driver kind, each with a signal of its protocol.
fn devices(dir: &std::path::Path) -> Vec<(&'static str, Arc<Device>)> {
    std::fs::write(dir.join("lamp.dbc"), DBC).unwrap();
    let kinds = [
        (
            "sim",
            r#"{ kind = "sim", model = "relay" }"#,
            "{ discrete_input = 0 }",
        ),
        (
            "modbus-tcp",
            r#"{ kind = "modbus-tcp", address = "10.0.0.5:502", unit = 1 }"#,
            "{ discrete_input = 0 }",
        ),
        (
            "modbus-rtu",
            r#"{ kind = "modbus-rtu", port = "/dev/ttyUSB0", baud = 19200, parity = "E", unit = 1 }"#,
            "{ discrete_input = 0 }",
        ),
        (
            "mqtt",
            r#"{ kind = "mqtt", broker = "mqtt://10.0.0.9:1883", client_id = "t" }"#,
            r#"{ topic = "lamp/state", type = "bool" }"#,
        ),
        (
            "opcua",
            r#"{ kind = "opcua", endpoint = "opc.tcp://10.0.0.7:4840" }"#,
            r#"{ node = "ns=2;s=Lamp.Contact", type = "bool" }"#,
        ),
        (
            "can",
            r#"{ kind = "can", interface = "slcan:/dev/ttyACM0", bitrate = 500000, dbc = "lamp.dbc" }"#,
            r#"{ message = "LampStatus", signal = "Contact", type = "bool" }"#,
        ),
    ];
    (kinds.into_iter())
        .map(|(kind, table, signal)| {
            let src = format!(
                "[[device]]\nid = \"lamp\"\ndescription = \"d\"\ndriver = {table}\n\
                 liveness = {{ max_silence_s = 2.5 }}\n[device.signals]\ncontact = {signal}\n"
            );
            let plant = closedloop_plant::parse(&src, "p.toml", dir);
            let plant = plant.unwrap_or_else(|e| panic!("{kind}: {e}"));
            (kind, Arc::clone(&plant.devices[0]))
        })
        .collect()
}

/// The situations a device on `kind` is read in, as snapshots: a board on a broker may also
/// be down (its last will, or the broker unreachable).
fn situations(kind: &str) -> Vec<(&'static str, Snapshot)> {
    let with = |liveness, error: Option<&str>, down| {
        let mut s = Snapshot::with_liveness(liveness);
        s.last_error = error.map(str::to_string);
        s.down = down;
        s
    };
    let mut all = vec![
        ("never heard", with(Liveness::Unknown, None, false)),
        ("silent", with(Liveness::Offline, None, false)),
        (
            "silent, last error",
            with(Liveness::Offline, Some("connection reset by peer"), false),
        ),
    ];
    if kind == "mqtt" {
        let will = "its status topic lamp/status says offline (its last will)";
        all.push(("down", with(Liveness::Offline, Some(will), true)));
    }
    all
}

/// Every protocol's texts, one block per driver kind.
fn texts() -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut out = String::new();
    for (kind, dev) in devices(dir.path()) {
        out += &format!("## {kind}\n");
        for (situation, snap) in situations(kind) {
            let offline = offline_detail_of(&dev, &snap);
            let why = (snap.liveness == Liveness::Offline).then(|| offline.clone());
            let here = Where {
                here: "a",
                owner: None,
            };
            let state = detail_of(&dev.id, &dev.driver, &snap, here, why.clone());
            let elsewhere = Where {
                here: "b",
                owner: Some("a"),
            };
            let other = detail_of(&dev.id, &dev.driver, &snap, elsewhere, why);
            out += &format!("{situation}:\n  result: {offline}\n");
            out += &format!("  state: {}\n", state.unwrap_or_default());
            out += &format!(
                "  state at a gateway that does not drive it: {}\n",
                other.unwrap_or_default()
            );
        }
        out += "\n";
    }
    out
}

#[test]
fn every_protocol_s_device_texts_match_the_golden_file() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/device_texts.txt");
    let now = texts();
    if std::env::var("UPDATE_GOLDEN").is_ok() {
        std::fs::write(&path, &now).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        now, golden,
        "device texts changed: rerun with UPDATE_GOLDEN=1 and read the diff"
    );
    // A board that publishes is never said to fail to answer; a polled device never to send.
    let mqtt = now
        .split("## mqtt")
        .nth(1)
        .unwrap()
        .split("## ")
        .next()
        .unwrap();
    assert!(!mqtt.contains("answer"), "{mqtt}");
    let modbus = now
        .split("## modbus-tcp")
        .nth(1)
        .unwrap()
        .split("## ")
        .next()
        .unwrap();
    assert!(
        !modbus.contains("message") && !modbus.contains("frame"),
        "{modbus}"
    );
}
