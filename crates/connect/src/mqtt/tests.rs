//! The MQTT link's cache, fed by hand: retained messages fill it but are neither evidence nor life.

use super::*;
use closedloop_contract::Value;
use tokio::time::Instant;

/// The one device of a plant file's text.
fn device(text: &str) -> Arc<Device> {
    let plant = closedloop_plant::parse(text, "t.toml", std::path::Path::new("."));
    plant.expect("plant parses").devices[0].clone()
}

fn lamp() -> Arc<Device> {
    device(
        r#"
[[device]]
id = "lamp"
description = "test"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:9", client_id = "t" }
[device.signals]
on = { topic = "lab/lamp/state", json = "/on", type = "bool" }
level = { topic = "lab/+/level" }
"#,
    )
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
    // named in last_error and takes the current value away (its last good one is history).
    dev.take_message(&mut snap, &message("lab/desk/level", "42.5", false, 9));
    assert_eq!(last(&snap, "level").value, Value::Number(42.5));
    dev.take_message(&mut snap, &message("lab/lamp/state", "{}", false, 10));
    assert_eq!(last(&snap, "on").value, Value::Bool(false));
    assert_eq!(snap.reading("on").and_then(|r| r.current()), None);
    let failure = snap
        .reading("on")
        .and_then(|r| r.failure())
        .expect("no value");
    assert!(
        failure.no_value && failure.why.contains("JSON without /on"),
        "{failure:?}"
    );
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

fn switch() -> Arc<Device> {
    device(
        r#"
[[device]]
id = "heater"
description = "test"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:9", client_id = "t" }
[device.signals]
heater = { topic = "h/state", true_values = ["ON"], false_values = ["OFF"] }
plain = { topic = "h/plain", type = "bool" }
temp_c = { topic = "h/probe", json = "/temperature" }
level = { topic = "h/level" }
"#,
    )
}

/// Payloads firmwares send that are not values, and some that are, in any order.
fn payload() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        prop::sample::select(vec![
            "ON",
            "OFF",
            "None",
            "none",
            "unknown",
            "unavailable",
            "",
            " ",
            "null",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "true",
            "false",
            "1",
            "0",
            "45.0",
            "1e999",
            "on",
            "Off",
            r#"{"temperature": 45.5}"#,
            r#"{"temperature": null}"#,
            r#"{"temperature": "nan"}"#,
            r#"{"temperature": "85"}"#,
            r#"{"temperature": [1]}"#,
            r#"{"temperature": {}}"#,
            r#"{"temperature": true}"#,
            "{}",
            "[]",
            "{",
            "\u{0}",
            "\u{1b}[2J",
        ])
        .prop_map(str::to_string),
        ".{0,12}",
    ]
}

/// One random message into the link's cache; panics when a decider could use a value that the
/// payload does not hold.
fn take_and_check(
    dev: &MqttLink,
    snap: &mut Snapshot,
    s: &closedloop_plant::Signal,
    text: &str,
    retained: bool,
    seq: u64,
) {
    let rule = closedloop_contract::sample::Freshness {
        now_ms: i64::MAX / 2,
        within_ms: None,
    };
    let Source::Topic {
        topic,
        json,
        true_values,
        false_values,
        ..
    } = &s.source
    else {
        unreachable!("every signal here is a topic")
    };
    let ty = match s.source.is_bool() {
        true => closedloop_contract::ValueType::Bool,
        false => closedloop_contract::ValueType::F64,
    };
    let words = closedloop_mqtt::Words {
        on: true_values,
        off: false_values,
    };
    let want = closedloop_mqtt::decode(text.as_bytes(), json.as_deref(), words, ty);
    dev.take_message(snap, &message(topic, text, retained, seq));
    let current = snap.reading(&s.name).and_then(|r| r.current());
    match (&want, retained) {
        (Ok(v), false) => {
            assert_eq!(current.map(|c| c.value), Some(*v), "{text:?}");
            assert!(snap.usable(&s.name, rule).is_ok());
        }
        (Ok(_), true) => assert!(snap.usable(&s.name, rule).is_err(), "retained {text:?}"),
        (Err(_), _) => {
            assert_eq!(current, None, "{text:?} left a current value");
            assert!(snap.usable(&s.name, rule).is_err());
        }
    }
    for (name, v) in snap.usable_values(rule) {
        if let Value::Number(n) = v {
            assert!(n.is_finite(), "{name} = {n}");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

    /// Whatever a firmware publishes, in any order and retained or not: each signal's current
    /// value is exactly what the last live payload on its topic decodes to, or it has none and
    /// no decider may use it — never a default, never an older value, never a retained one.
    #[test]
    fn no_decision_rests_on_a_payload_that_is_no_value(
        msgs in proptest::collection::vec(
            (0usize..4, payload(), proptest::prelude::any::<bool>()),
            1..24,
        )
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async {
            let config = closedloop_mqtt::BrokerConfig::new("mqtt://127.0.0.1:9", "t");
            let broker = MqttBroker::connect(config).expect("config");
            let spec = switch();
            let dev = MqttLink::new(Arc::clone(&spec), broker, Clock::new());
            let mut snap = dev.base.snapshot();
            snap.liveness = closedloop_link::Liveness::Online;
            for (i, (which, text, retained)) in msgs.into_iter().enumerate() {
                let s = &spec.signals[which];
                take_and_check(&dev, &mut snap, s, &text, retained, i as u64 + 1);
            }
        });
    }
}

/// Zigbee2MQTT's availability is JSON (`{"state": "offline"}`): read through `status_json`, its
/// `offline` takes the device down; a payload without the word says neither.
#[tokio::test]
async fn a_json_status_payload_is_read_through_its_pointer() {
    let spec = device(
        r#"
[[device]]
id = "plug"
description = "test"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:9", client_id = "t" }
liveness = { status_topic = "z/plug/availability", status_json = "/state" }
[device.signals]
on = { topic = "z/plug", json = "/state", true_values = ["ON"], false_values = ["OFF"] }
"#,
    );
    let config = closedloop_mqtt::BrokerConfig::new("mqtt://127.0.0.1:9", "t");
    let dev = MqttLink::new(
        spec,
        MqttBroker::connect(config).expect("config"),
        Clock::new(),
    );
    let mut snap = dev.base.snapshot();
    let mut presence = Presence::default();
    let status = |text: &str, seq| message("z/plug/availability", text, false, seq);
    dev.take(
        &mut presence,
        &mut snap,
        &status(r#"{"state":"offline"}"#, 1),
    );
    assert!(presence.announced_offline, "the JSON word counts");
    dev.take(&mut presence, &mut snap, &status("offline", 2));
    assert!(
        presence.announced_offline,
        "a bare word is no JSON: nothing said"
    );
    dev.take(
        &mut presence,
        &mut snap,
        &status(r#"{"state":"online"}"#, 3),
    );
    assert!(!presence.announced_offline);
    assert!(snap.last_valid.is_some(), "online is a sign of life");
}
