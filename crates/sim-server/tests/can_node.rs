//! Simulated CAN nodes on a simulated slcan adapter, through a real pty (socat) and
//! closedloop-can's slcan `CanBus`, as the `can` driver will meet them: status frames every
//! period that decode to the model's values, commands that act through the model's physics,
//! several nodes sharing one bus, and start-up errors that name file, message and signal.
//! The faults are in `can_node_faults.rs`.

mod can_host;

use std::time::Duration;

use can_host::{Host, fault, lamp, slide, spec, values};
use closedloop_sim::SimConfig;
use closedloop_sim_server::{CanSimError, start_buses};
use tokio::time::Instant;

#[tokio::test]
async fn status_frames_come_every_period_and_decode_to_the_model() {
    let mut slow = slide(vec![]);
    slow.can.period_ms = 50;
    let mut host = Host::start(&[lamp(10, vec![]), slow]).await;
    assert_eq!(
        host.next("LampStatus").await,
        values(&[("Commanded", 0.0), ("Contact", 0.0)])
    );
    assert_eq!(
        host.next("SlideStatus").await,
        values(&[("PositionMm", 0.0), ("Moving", 0.0), ("Fault", 0.0)])
    );
    // Both nodes share the pty: count each one's frames over the same stretch.
    host.sync().await;
    let start = Instant::now();
    let (mut lamps, mut slides) = (0, 0);
    while lamps < 21 {
        let f = tokio::time::timeout(Duration::from_secs(2), host.frames.next())
            .await
            .expect("frames keep coming")
            .unwrap();
        match f.id {
            0x101 => lamps += 1,
            0x201 => slides += 1,
            other => panic!("unexpected frame id {other:#x}"),
        }
    }
    let elapsed = start.elapsed();
    // 21 frames of a 20 ms period span 400 ms (more when the machine is busy, never much less).
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed <= Duration::from_millis(1500),
        "{elapsed:?}"
    );
    // The 50 ms node sent about 2 in 5 as many.
    let expected = elapsed.as_millis() as f64 / 50.0;
    assert!(
        (slides as f64) >= expected * 0.5 && (slides as f64) <= expected * 1.5 + 1.0,
        "{slides} SlideStatus frames in {elapsed:?}"
    );
}

#[tokio::test]
async fn a_lamp_command_closes_the_contact_after_pull_in() {
    let mut host = Host::start(&[lamp(200, vec![])]).await;
    host.next("LampStatus").await;
    let sent = Instant::now();
    host.send("LampCmd", &[("On", 1.0)]).await;
    let (_, v) = host
        .until("LampStatus", Duration::from_secs(1), |v| {
            v["Commanded"] == 1.0
        })
        .await;
    assert_eq!(v["Contact"], 0.0, "commanded at once, the contact follows");
    let (closed, _) = host
        .until("LampStatus", Duration::from_secs(2), |v| {
            v["Contact"] == 1.0
        })
        .await;
    assert!(
        closed - sent >= Duration::from_millis(200),
        "the contact closed {:?} after the command: before pull_in_ms",
        closed - sent
    );
    assert_eq!(host.node("lamp").peek().contact, Some(true));
    host.send("LampCmd", &[("On", 0.0)]).await;
    host.until("LampStatus", Duration::from_secs(2), |v| {
        v["Commanded"] == 0.0 && v["Contact"] == 0.0
    })
    .await;
}

#[tokio::test]
async fn a_slide_command_moves_the_position_reported_big_endian() {
    let mut host = Host::start(&[lamp(10, vec![]), slide(vec![])]).await;
    host.next("SlideStatus").await;
    host.send("SlideCmd", &[("TargetMm", 120.0), ("Start", 1.0)])
        .await;
    let (_, moving) = host
        .until("SlideStatus", Duration::from_secs(1), |v| {
            v["Moving"] == 1.0
        })
        .await;
    assert!(moving["PositionMm"] < 120.0, "{moving:?}");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut prev = moving["PositionMm"];
    loop {
        assert!(
            Instant::now() < deadline,
            "still moving after 3 s at {prev} mm"
        );
        let v = host.next("SlideStatus").await;
        assert!(
            v["PositionMm"] >= prev,
            "the slide went back: {prev}, then {v:?}"
        );
        prev = v["PositionMm"];
        if v["Moving"] == 0.0 {
            assert_eq!(
                v,
                values(&[("PositionMm", 120.0), ("Moving", 0.0), ("Fault", 0.0)])
            );
            break;
        }
    }
    // The position's bytes are Motorola (big-endian), 12000 = 0x00002EE0; Moving is bit 32.
    let (_, raw) = host
        .next_raw("SlideStatus", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(raw, [0x00, 0x00, 0x2E, 0xE0, 0x00]);
    // The lamp on the same bus never moved.
    assert_eq!(host.next("LampStatus").await["Commanded"], 0.0);
}

#[tokio::test]
async fn brownout_keeps_the_contact_open_and_swapped_contacts_invert_it() {
    let mut host = Host::start(&[lamp(10, vec![fault("brownout")])]).await;
    host.send("LampCmd", &[("On", 1.0)]).await;
    host.until("LampStatus", Duration::from_secs(1), |v| {
        v["Commanded"] == 1.0
    })
    .await;
    host.sync().await;
    let seen = host.during("LampStatus", Duration::from_millis(200)).await;
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(seen.iter().all(|v| v["Contact"] == 0.0), "{seen:?}");
    host.control("clear lamp brownout").unwrap();
    host.until("LampStatus", Duration::from_secs(1), |v| {
        v["Contact"] == 1.0
    })
    .await;
    host.control("fault lamp swapped_contacts").unwrap();
    host.until("LampStatus", Duration::from_secs(1), |v| {
        v["Commanded"] == 1.0 && v["Contact"] == 0.0
    })
    .await;
    assert_eq!(
        host.node("lamp").peek().contact,
        Some(true),
        "closed in truth"
    );
}

/// A DBC for the heater and the sensor, with signals the models lack and an offset.
const HEATER_DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: Gateway Oven Probe

BO_ 768 OvenCmd: 3 Gateway
 SG_ SetpointC : 0|16@1- (0.1,0) [-100|500] "degC" Oven
 SG_ Enable : 16|1@1+ (1,0) [0|1] "" Oven
 SG_ Fan : 17|1@1+ (1,0) [0|1] "" Oven

BO_ 769 OvenStatus: 6 Oven
 SG_ TemperatureC : 7|16@0- (0.1,0) [-100|500] "degC" Gateway
 SG_ SetpointC : 16|16@1- (0.1,0) [-100|500] "degC" Gateway
 SG_ Enable : 32|1@1+ (1,0) [0|1] "" Gateway
 SG_ Door : 40|8@1+ (1,5) [5|260] "" Gateway

BO_ 1024 ProbeStatus: 2 Probe
 SG_ Value : 0|16@1- (0.1,0) [-100|500] "" Gateway

BO_ 1025 ProbeCmd: 1 Gateway
 SG_ Unused : 0|8@1+ (1,0) [0|255] "" Probe
"#;

#[tokio::test]
async fn a_heater_and_a_sensor_map_their_own_signals() {
    let dir = tempfile::tempdir().unwrap();
    let dbc = dir.path().join("oven.dbc");
    std::fs::write(&dbc, HEATER_DBC).unwrap();
    let oven = SimConfig {
        model: "heater".into(),
        rate_c_per_s: Some(50.0),
        ..SimConfig::default()
    };
    let probe = SimConfig {
        model: "sensor".into(),
        value: Some(42.5),
        ..SimConfig::default()
    };
    let mut host = Host::start(&[
        spec("oven", &dbc, "OvenStatus", "OvenCmd", 20, oven),
        spec("probe", &dbc, "ProbeStatus", "ProbeCmd", 20, probe),
    ])
    .await;
    assert_eq!(host.next("ProbeStatus").await, values(&[("Value", 42.5)]));
    let setpoint = host.node("oven").peek().setpoint_c.unwrap();
    assert_eq!(
        host.next("OvenStatus").await,
        values(&[
            ("TemperatureC", 25.0),
            ("SetpointC", setpoint),
            ("Enable", 0.0),
            ("Door", 5.0) // not the model's: raw 0, its offset
        ])
    );
    host.send(
        "OvenCmd",
        &[("SetpointC", 60.0), ("Enable", 1.0), ("Fan", 1.0)],
    )
    .await;
    let (_, v) = host
        .until("OvenStatus", Duration::from_secs(3), |v| {
            v["TemperatureC"] >= 30.0
        })
        .await;
    assert_eq!((v["SetpointC"], v["Enable"]), (60.0, 1.0), "{v:?}");
    host.send("ProbeCmd", &[("Unused", 7.0)]).await;
    assert_eq!(host.next("ProbeStatus").await, values(&[("Value", 42.5)]));
}

#[tokio::test]
async fn what_a_node_needs_is_named_when_missing() {
    let dir = tempfile::tempdir().unwrap();
    let dbc = dir.path().join("short.dbc");
    let text = std::fs::read_to_string(can_host::workshop_dbc()).unwrap();
    let text = text.replace(" SG_ Contact : 1|1@1+ (1,0) [0|1] \"\" Gateway\n", "");
    std::fs::write(&dbc, text).unwrap();
    let relay = SimConfig {
        model: "relay".into(),
        ..SimConfig::default()
    };
    a_missing_status_signal_is_named(&dbc, &relay).await;
    // Without feedback the relay has no contact to report: the same message will do.
    let no_feedback = SimConfig {
        feedback: Some(false),
        ..relay.clone()
    };
    let buses = start_buses(&[spec(
        "lamp",
        &dbc,
        "LampStatus",
        "LampCmd",
        20,
        no_feedback.clone(),
    )])
    .await
    .unwrap();
    drop(buses);

    a_wrong_message_or_period_is_named(&dbc, &relay, no_feedback).await;
    let mqtt = SimConfig {
        model: "mqtt-relay".into(),
        prefix: Some("lab/lamp".into()),
        ..SimConfig::default()
    };
    let e = start_lamp(&dbc, ("LampStatus", "LampCmd"), 20, mqtt)
        .await
        .to_string();
    assert!(
        e.contains("mqtt-relay") && e.contains("cannot be a CAN node"),
        "{e}"
    );
    let missing = spec(
        "lamp",
        &dir.path().join("none.dbc"),
        "LampStatus",
        "LampCmd",
        20,
        relay,
    );
    let e = start_buses(&[missing])
        .await
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(e.contains("sim.can.dbc") && e.contains("none.dbc"), "{e}");
}

/// What starting the node `lamp` alone fails with: on `dbc`, its (status, command) messages,
/// every `period_ms`, simulating `config`.
async fn start_lamp(
    dbc: &std::path::Path,
    (status, command): (&str, &str),
    period_ms: u64,
    config: SimConfig,
) -> CanSimError {
    let s = spec("lamp", dbc, status, command, period_ms, config);
    start_buses(&[s]).await.map(|_| ()).unwrap_err()
}

/// A relay whose status message lacks `Contact` is refused naming the device, the key, the
/// file, the message, the signal and the model.
async fn a_missing_status_signal_is_named(dbc: &std::path::Path, relay: &SimConfig) {
    let e = start_lamp(dbc, ("LampStatus", "LampCmd"), 20, relay.clone()).await;
    assert!(matches!(e, CanSimError::MissingSignal { .. }), "{e:?}");
    let msg = e.to_string();
    for part in [
        "\"lamp\"",
        "sim.can.status",
        "short.dbc",
        "LampStatus",
        "Contact",
        "relay",
    ] {
        assert!(msg.contains(part), "{part} missing from: {msg}");
    }
}

/// A status message not in the file, a command message without `On`, and no period are each
/// refused, named.
async fn a_wrong_message_or_period_is_named(
    dbc: &std::path::Path,
    relay: &SimConfig,
    no_feedback: SimConfig,
) {
    let e = start_lamp(dbc, ("LampState", "LampCmd"), 20, relay.clone())
        .await
        .to_string();
    assert!(e.contains("short.dbc") && e.contains("LampState"), "{e}");
    let e = start_lamp(dbc, ("LampStatus", "SlideCmd"), 20, no_feedback)
        .await
        .to_string();
    assert!(
        e.contains("sim.can.command") && e.contains("SlideCmd") && e.contains("On"),
        "{e}"
    );
    let e = start_lamp(dbc, ("LampStatus", "LampCmd"), 0, relay.clone())
        .await
        .to_string();
    assert!(e.contains("period_ms"), "{e}");
}
