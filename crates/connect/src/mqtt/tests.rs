//! The MQTT link's cache, fed by hand: retained messages fill it but are neither evidence nor life.

use super::*;
use closedloop_driver::Value;
use tokio::time::Instant;

fn lamp() -> Arc<Device> {
    closedloop_plant::parse(
        r#"
[[device]]
id = "lamp"
description = "test"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:9", client_id = "t" }
[device.signals]
on = { topic = "lab/lamp/state", json = "/on", type = "bool" }
level = { topic = "lab/+/level" }
"#,
        "t.toml",
        std::path::Path::new("."),
    )
    .expect("plant parses")
    .devices[0]
        .clone()
}

/// The last good reading of `name`, current or not.
fn last<'a>(snap: &'a Snapshot, name: &str) -> &'a closedloop_link::SignalValue {
    let reading = snap.reading(name).expect("read");
    reading.last_good().expect("a good value")
}

fn message(topic: &str, payload: &str, retained: bool, seq: u64) -> closedloop_mqtt::Message {
    closedloop_mqtt::Message {
        topic: topic.into(),
        payload: payload.as_bytes().to_vec().into(),
        retained,
        received_at: Instant::now(),
        seq,
        expiry_s: None,
    }
}

#[tokio::test]
async fn retained_messages_fill_the_cache_but_are_neither_evidence_nor_life() {
    let broker = MqttBroker::connect(closedloop_mqtt::BrokerConfig::new(
        "mqtt://127.0.0.1:9",
        "t",
    ))
    .expect("config");
    let dev = MqttLink::new(lamp(), broker, Clock::new());
    let mut snap = dev.base.snapshot();
    dev.take_message(
        &mut snap,
        &message("lab/lamp/state", r#"{"on": true}"#, true, 7),
    );
    assert_eq!(last(&snap, "on").value, Value::Bool(true));
    assert_eq!(last(&snap, "on").seq, 0, "a retained value is never fresh");
    assert_eq!(snap.seq, 0);
    assert!(
        snap.last_valid.is_none(),
        "a retained message is no sign of life"
    );

    dev.take_message(
        &mut snap,
        &message("lab/lamp/state", r#"{"on": false}"#, false, 8),
    );
    assert_eq!(last(&snap, "on").value, Value::Bool(false));
    assert_eq!((last(&snap, "on").seq, snap.seq), (8, 8));
    assert!(snap.last_valid.is_some());
    assert_eq!(last(&snap, "on").source, "lab/lamp/state /on");

    // A wildcard signal topic takes the concrete topic; a payload without the value is
    // named in last_error and changes nothing.
    dev.take_message(&mut snap, &message("lab/desk/level", "42.5", false, 9));
    assert_eq!(last(&snap, "level").value, Value::Number(42.5));
    dev.take_message(&mut snap, &message("lab/lamp/state", "{}", false, 10));
    assert_eq!(last(&snap, "on").value, Value::Bool(false));
    assert!(
        snap.last_error.as_deref().unwrap().contains("on"),
        "{snap:?}"
    );
}

/// Until closedloop's own first connection to the broker has been answered or has failed, the
/// device is not offline: it is `unknown`, like any device before its first answer (a banner
/// printed in those milliseconds said `1 offline`, and a command got DEVICE_OFFLINE).
#[test]
fn a_device_is_not_offline_before_the_first_broker_connection_ends() {
    // (link up, ever up, an attempt failed) → down
    assert!(
        !broker_down(false, false, false),
        "connecting: not known yet"
    );
    assert!(broker_down(false, false, true), "the first attempt failed");
    assert!(broker_down(false, true, false), "lost after it was up");
    assert!(!broker_down(true, true, false));
    assert!(!broker_down(true, true, true), "up again after a failure");
}
