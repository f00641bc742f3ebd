//! The fault matrix for an MQTT device: the engine's `mqtt` driver against a real Mosquitto (each
//! test starts its own on a free port) and the `mqtt-relay` simulated device as a separate MQTT
//! client. Never `completed` under a fault; the right code each time.

mod common;

use closedloop_engine::{Liveness, Status};
use closedloop_mqtt::testing::Mosquitto;
use closedloop_sim::{Fault, FaultSpec, MqttRelayOptions};
use closedloop_sim_server::MqttRelay;
use common::*;
use serde_json::json;
use std::time::Duration;

const LAMP: &str = r#"
[[device]]
id = "lamp"
description = "ESP32 lamp over MQTT"
driver = { kind = "mqtt", broker = "URL", client_id = "closedloop-engine-test" }
poll_ms = 50
liveness = { status_topic = "lab/lamp/status", max_silence_s = 1.5 }
[device.signals]
on = { topic = "lab/lamp/state", json = "/on", type = "bool" }
[[device.action]]
name = "switch"
description = "Turn the lamp on or off."
params = { on = { type = "bool" } }
write = [{ topic = "lab/lamp/set", payload = '{"on": ${params.on}, "id": "${command_id}"}' }]
done_when = "on == params.on"
expect_s = EXPECT
idempotent = true
"#;

struct Bench {
    broker: Mosquitto,
    rig: Rig,
    relay: Option<MqttRelay>,
}

fn options(heartbeat_s: f64) -> MqttRelayOptions {
    MqttRelayOptions {
        prefix: "lab/lamp".into(),
        heartbeat_s,
        pull_in_ms: 10,
    }
}

/// A broker, the relay with `faults` (none when `relay` is false), and the engine.
async fn bench(faults: &[Fault], relay: bool, expect_s: f64) -> Bench {
    bench_with(faults, relay.then(|| options(0.3)), expect_s).await
}

/// [`bench`] with the relay's own options (heartbeat period, pull-in).
async fn bench_with(faults: &[Fault], relay: Option<MqttRelayOptions>, expect_s: f64) -> Bench {
    let broker = Mosquitto::start().await;
    let relay = relay.map(|options| {
        let faults: Vec<FaultSpec> = faults.iter().copied().map(FaultSpec::now).collect();
        MqttRelay::start(&broker.url, "lamp-device", &options, &faults, 7).expect("relay starts")
    });
    let src = LAMP
        .replace("URL", &broker.url)
        .replace("EXPECT", &format!("{expect_s:?}"));
    let rig = rig(&src).await;
    Bench { broker, rig, relay }
}

async fn wait_liveness(rig: &Rig, want: Liveness) {
    for _ in 0..400 {
        if rig
            .engine
            .device_state("lamp")
            .is_some_and(|s| s.liveness == want)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "lamp never became {want:?}: {:#?}",
        rig.engine.device_state("lamp")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_completes_on_a_state_message_that_arrived_after_the_puback() {
    let b = bench(&[], true, 0.05).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    assert!(r.verified);
    assert_eq!(ev_value(&r, "on"), json!(true));
    assert_eq!(r.evidence["on"]["source"], json!("lab/lamp/state /on"));
    let evidence_at = r.evidence["on"]["at"].as_str().unwrap();
    assert!(evidence_at >= at_of(&r, "device_ack"), "{r:#?}");
    let off = b.rig.act("lamp", "switch", json!({"on": false}), 5.0).await;
    assert_eq!(off.status, Status::Completed, "{off:#?}");
    let state = b.rig.engine.device_state("lamp").expect("lamp");
    let on = &state.signals["on"];
    assert_eq!(on.value, json!(false));
    assert_eq!(on.source, "lab/lamp/state /on");
    drop(b.relay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_carries_the_command_id_expires_at_the_deadline_and_is_never_retained() {
    let b = bench(&[], true, 0.05).await;
    b.rig.online("lamp").await;
    let spy = b.broker.client("spy").await;
    let mut sets = spy.subscribe("lab/lamp/set");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    let m = tokio::time::timeout(Duration::from_secs(5), sets.recv())
        .await
        .expect("the set within 5 s")
        .expect("open");
    let body: serde_json::Value = serde_json::from_slice(&m.payload).expect("JSON payload");
    assert_eq!(body, json!({"on": true, "id": r.command_id}));
    assert!(!m.retained);
    // Deadline 0.05 × 3 + 0.1 + 0.05 = 0.3 s: rounded up to one whole second, never more.
    assert_eq!(m.expiry_s, Some(1), "{m:?}");
    // A late subscriber gets nothing: the command was not retained.
    let late = b.broker.client("late").await;
    let mut again = late.subscribe("lab/lamp/set");
    assert!(
        tokio::time::timeout(Duration::from_millis(500), again.recv())
            .await
            .is_err(),
        "a set was retained"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_state_shows_in_the_cache_but_never_confirms() {
    // No device at all; someone left `on: true` and the status `online` retained.
    let broker = Mosquitto::start().await;
    let other = broker.client("leftover").await;
    for (topic, payload) in [
        ("lab/lamp/state", r#"{"on": true, "seq": 9}"#),
        ("lab/lamp/status", "online"),
    ] {
        closedloop_mqtt::testing::publish_retained(&other, topic, payload)
            .await
            .expect("retained publish acked");
    }
    let rig = rig(&LAMP.replace("URL", &broker.url).replace("EXPECT", "0.05")).await;
    // The retained value arrives and is shown ...
    for _ in 0..300 {
        if rig
            .engine
            .device_state("lamp")
            .is_some_and(|s| s.signals.contains_key("on"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let state = rig.engine.device_state("lamp").expect("lamp");
    assert_eq!(state.signals["on"].value, json!(true), "{state:#?}");
    // ... but is no sign of life and no evidence: the command is never completed.
    assert_ne!(state.liveness, Liveness::Online, "{state:#?}");
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let r = rig.settle(&r).await;
    assert_ne!(r.status, Status::Completed, "{r:#?}");
    assert_eq!(code(&r), "DEVICE_OFFLINE", "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brownout_acks_at_the_broker_but_fails_feedback_mismatch() {
    let b = bench(&[Fault::Brownout], true, 0.05).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let r = b.rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "FEEDBACK_MISMATCH"),
        "{r:#?}"
    );
    // The PUBACK moved it to running, never further.
    assert!(events(&r).contains(&"device_ack".to_string()), "{r:#?}");
    assert!(!r.verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_contacts_never_complete() {
    let b = bench(&[Fault::SwappedContacts], true, 0.05).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let r = b.rig.settle(&r).await;
    // It read "on" before the write ("already so"); after pull-in it reads "off": it moved
    // away and never held — TIMEOUT, never completed.
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Timeout, "TIMEOUT"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_already_so_report_that_comes_before_expect_s_never_confirms_an_mqtt_device() {
    // Swapped contacts report "on" while the output is off, and a heartbeat every 10 ms lands
    // between the broker's PUBACK and the contact's pull-in (60 ms): each still shows "on", the
    // target. Only a report from expect_s (0.15 s) on counts, and those show "off".
    let relay = MqttRelayOptions {
        heartbeat_s: 0.01,
        pull_in_ms: 60,
        ..options(0.3)
    };
    let b = bench_with(&[Fault::SwappedContacts], Some(relay), 0.15).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let r = b.rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Timeout, "TIMEOUT"),
        "{r:#?}"
    );
    assert!(!r.verified, "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_fires_the_will_and_the_device_is_offline_at_once() {
    let b = bench(&[], true, 0.05).await;
    b.rig.online("lamp").await;
    b.relay
        .as_ref()
        .unwrap()
        .inject(FaultSpec::now(Fault::PowerOff))
        .unwrap();
    // The will `offline` makes it offline well before the 1.5 s silence window.
    let t = std::time::Instant::now();
    wait_liveness(&b.rig, Liveness::Offline).await;
    let state = b.rig.engine.device_state("lamp").expect("lamp");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?} {state:#?}"
    );
    assert!(r.detail.as_deref().unwrap().contains("offline"), "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_mid_command_fails_device_offline() {
    // The set takes 1 s to act (latency); the device dies while the command runs.
    let b = bench(&[Fault::LatencyMs { ms: 1000 }], true, 1.2).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 0.2).await;
    assert_eq!(r.status, Status::Running, "{r:#?}");
    b.relay
        .as_ref()
        .unwrap()
        .inject(FaultSpec::now(Fault::PowerOff))
        .unwrap();
    let r = b.rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_that_stays_connected_but_says_nothing_is_offline_after_the_silence_window() {
    let b = bench(&[], true, 0.05).await;
    b.rig.online("lamp").await;
    b.relay
        .as_ref()
        .unwrap()
        .inject(FaultSpec::now(Fault::Zombie))
        .unwrap();
    wait_liveness(&b.rig, Liveness::Offline).await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_longer_than_the_deadline_never_completes() {
    // Deadline 0.15 × 3 + 0.1 + 0.05 = 0.6 s: the set takes effect 0.8 s after it was sent,
    // while heartbeats (every 0.3 s) keep reporting "off" inside the window — fresh samples
    // showing the feedback unmoved: FEEDBACK_MISMATCH, never completed.
    let b = bench(&[Fault::LatencyMs { ms: 800 }], true, 0.15).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    let r = b.rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "FEEDBACK_MISMATCH"),
        "{r:#?}"
    );
    assert_eq!(ev_value(&r, "on"), json!(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_dying_mid_command_is_device_offline() {
    let mut b = bench(&[Fault::LatencyMs { ms: 1000 }], true, 1.2).await;
    b.rig.online("lamp").await;
    let r = b.rig.act("lamp", "switch", json!({"on": true}), 0.2).await;
    assert_eq!(r.status, Status::Running, "{r:#?}");
    b.broker.kill();
    let r = b.rig.settle(&r).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Failed, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    assert!(r.detail.as_deref().unwrap().contains("broker"), "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_broker_the_device_is_offline_and_nothing_is_sent() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let src = LAMP
        .replace("URL", &format!("mqtt://127.0.0.1:{port}"))
        .replace("EXPECT", "0.05");
    let rig = rig(&src).await;
    wait_liveness(&rig, Liveness::Offline).await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Rejected, "DEVICE_OFFLINE"),
        "{r:#?}"
    );
    assert!(r.detail.as_deref().unwrap().contains("broker"), "{r:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_offline_will_gives_way_to_live_messages() {
    // The broker holds an old will; the board is back but its `online` never reached us.
    let broker = Mosquitto::start().await;
    let board = broker.client("board").await;
    closedloop_mqtt::testing::publish_retained(&board, "lab/lamp/status", "offline")
        .await
        .expect("retained will");
    let rig = rig(&LAMP.replace("URL", &broker.url).replace("EXPECT", "0.05")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_ne!(
        rig.engine.device_state("lamp").unwrap().liveness,
        Liveness::Online
    );
    for _ in 0..20 {
        board
            .publish(
                "lab/lamp/state",
                r#"{"on": false}"#,
                1,
                Duration::from_secs(5),
            )
            .await
            .expect("state acked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_liveness(&rig, Liveness::Online).await;
}

/// One state message, republished by the listener every `poll_ms`, is one sample: `hold_ms`
/// needs done_when on distinct samples, so a device that reported once cannot satisfy it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_ms_counts_distinct_messages_not_the_listener_s_republished_snapshot() {
    let broker = Mosquitto::start().await;
    let held = |src: &str| {
        src.replace("idempotent = true", "idempotent = true\nhold_ms = 400")
            .replace("max_silence_s = 1.5", "max_silence_s = 10.0")
    };
    let src = held(&LAMP.replace("URL", &broker.url).replace("EXPECT", "0.5"));
    // A heartbeat every 5 s: after the set, one state message within the 1.65 s deadline.
    let quiet =
        MqttRelay::start(&broker.url, "lamp-device", &options(5.0), &[], 7).expect("relay starts");
    let rig = rig(&src).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": true}), 5.0).await;
    assert_eq!(
        (r.status, code(&r).as_str()),
        (Status::Timeout, "TIMEOUT"),
        "one sample cannot hold for 400 ms: {r:#?}"
    );
    drop(quiet);
    drop(rig);
    // The same action on a device that reports every 0.3 s holds and completes.
    let chatty = MqttRelay::start(&broker.url, "lamp-device-2", &options(0.3), &[], 7)
        .expect("relay starts");
    let rig = common::rig(&src.replace("closedloop-engine-test", "closedloop-engine-test-2")).await;
    rig.online("lamp").await;
    let r = rig.act("lamp", "switch", json!({"on": false}), 5.0).await;
    assert_eq!(r.status, Status::Completed, "{r:#?}");
    drop(chatty);
}
