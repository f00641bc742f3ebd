//! The `mqtt-relay` simulated device on its own (without a plant file), driven through
//! `MqttBroker` against a real Mosquitto.

use std::time::Duration;

use closedloop_mqtt::testing::{Mosquitto, await_active, next};
use closedloop_mqtt::{Ack, Message, MqttBroker, Subscription};
use closedloop_sim::{Fault, FaultKind, FaultSpec, MqttRelayOptions};
use closedloop_sim_server::{MqttRelay, Presence, RelayError};
use tokio::time::Instant;

fn options(heartbeat_s: f64, pull_in_ms: u64) -> MqttRelayOptions {
    MqttRelayOptions {
        prefix: "lab/relay".into(),
        heartbeat_s,
        pull_in_ms,
    }
}

fn state(m: &Message) -> (bool, u64) {
    let v: serde_json::Value = serde_json::from_slice(&m.payload).expect("state is JSON");
    (
        v["on"].as_bool().expect("on"),
        v["seq"].as_u64().expect("seq"),
    )
}

/// Subscribes to the relay's status and state, active at the broker before the relay starts.
async fn watch(b: &MqttBroker) -> (Subscription, Subscription) {
    let mut status = b.subscribe("lab/relay/status");
    let mut states = b.subscribe("lab/relay/state");
    await_active(b, &mut status, "lab/relay/status").await;
    await_active(b, &mut states, "lab/relay/state").await;
    (status, states)
}

/// The first non-retained state with `on == want`, and when it came.
async fn state_until(states: &mut Subscription, want: bool) -> (Message, Instant) {
    loop {
        let m = next(states).await;
        if !m.retained && state(&m).0 == want {
            return (m, Instant::now());
        }
    }
}

async fn set(b: &MqttBroker, on: bool) -> (Instant, Ack) {
    let sent = Instant::now();
    let ack = b
        .publish(
            "lab/relay/set",
            format!(r#"{{"on": {on}}}"#),
            1,
            Duration::from_secs(5),
        )
        .await
        .expect("acked");
    (sent, ack)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_is_confirmed_on_the_state_topic_with_increasing_seq() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (mut status, mut states) = watch(&b).await;
    let _relay = MqttRelay::start(&m.url, "relay", &options(0.2, 20), &[], 1).expect("starts");
    let online = next(&mut status).await;
    assert_eq!(online.payload.as_ref(), b"online");
    let (first, _) = state_until(&mut states, false).await; // heartbeat, nothing set yet
    let (sent, ack) = set(&b, true).await;
    let (on, at) = state_until(&mut states, true).await;
    assert!(
        at - sent >= Duration::from_millis(20),
        "not before pull_in_ms"
    );
    assert!(state(&on).1 > state(&first).1, "seq increases");
    assert!(
        on.seq > ack.seq,
        "the confirmation arrived after the PUBACK fence"
    );
    // Heartbeats keep coming, still on.
    let beat = next(&mut states).await;
    assert!(state(&beat).0);
    assert!(state(&beat).1 > state(&on).1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_is_retained_online() {
    let m = Mosquitto::start().await;
    let relay = MqttRelay::start(&m.url, "relay", &options(1.0, 10), &[], 1).expect("starts");
    // `Connected` comes once the broker acknowledged the retained `online`.
    let mut presence = relay.presence();
    tokio::time::timeout(
        Duration::from_secs(5),
        presence.wait_for(|p| *p == Presence::Connected),
    )
    .await
    .expect("connected within 5 s")
    .expect("relay running");
    let b = m.client("engine").await;
    // Subscribing after the relay came up: the retained `online` is there.
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let mut status = b.subscribe("lab/relay/status");
            if let Ok(Some(msg)) =
                tokio::time::timeout(Duration::from_millis(200), status.recv()).await
                && msg.payload.as_ref() == b"online"
            {
                assert!(msg.retained);
                return;
            }
        }
    })
    .await
    .expect("retained online within 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_fires_the_will_then_silence_and_clearing_brings_it_back_off() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (mut status, mut states) = watch(&b).await;
    let relay = MqttRelay::start(&m.url, "relay", &options(0.1, 10), &[], 1).expect("starts");
    assert_eq!(next(&mut status).await.payload.as_ref(), b"online");
    set(&b, true).await;
    state_until(&mut states, true).await;
    relay
        .inject(FaultSpec::now(Fault::PowerOff))
        .expect("relay fault");
    let will = next(&mut status).await;
    assert_eq!(will.payload.as_ref(), b"offline");
    // Let a state already in flight arrive, then silence: no heartbeat, no answer to a set.
    while tokio::time::timeout(Duration::from_millis(300), states.recv())
        .await
        .is_ok()
    {}
    let r = (b.publish(
        "lab/relay/set",
        r#"{"on": true}"#,
        1,
        Duration::from_secs(5),
    ))
    .await;
    assert_eq!(
        r.map(|_| ()),
        Err(closedloop_mqtt::Error::NoSubscribers),
        "a powered-off relay has no subscription: the broker says nobody received it"
    );
    let silent = tokio::time::timeout(Duration::from_millis(400), states.recv()).await;
    assert!(silent.is_err(), "a powered-off relay is silent: {silent:?}");
    relay.clear(FaultKind::PowerOff);
    assert_eq!(next(&mut status).await.payload.as_ref(), b"online");
    let back = next(&mut states).await;
    assert_eq!(
        state(&back),
        (false, 1),
        "a fresh boot: output off, seq from 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brownout_keeps_the_state_off() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (_status, mut states) = watch(&b).await;
    let _relay = MqttRelay::start(
        &m.url,
        "relay",
        &options(5.0, 10),
        &[FaultSpec::now(Fault::Brownout)],
        1,
    )
    .expect("starts");
    state_until(&mut states, false).await; // first heartbeat
    set(&b, true).await;
    let (after, _) = state_until(&mut states, false).await;
    assert!(
        state(&after).1 >= 2,
        "a state was published after the set, and it is off"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_contacts_report_the_opposite() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (mut status, mut states) = watch(&b).await;
    let _relay = MqttRelay::start(
        &m.url,
        "relay",
        &options(5.0, 10),
        &[FaultSpec::now(Fault::SwappedContacts)],
        1,
    )
    .expect("starts");
    assert_eq!(next(&mut status).await.payload.as_ref(), b"online");
    state_until(&mut states, true).await; // off, reported on
    let (_, ack) = set(&b, true).await;
    let (after, _) = state_until(&mut states, false).await;
    assert!(after.seq > ack.seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_delays_the_confirmation() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (_status, mut states) = watch(&b).await;
    let _relay = MqttRelay::start(
        &m.url,
        "relay",
        &options(5.0, 10),
        &[FaultSpec::now(Fault::LatencyMs { ms: 300 })],
        1,
    )
    .expect("starts");
    state_until(&mut states, false).await;
    let (sent, _) = set(&b, true).await;
    let (_, at) = state_until(&mut states, true).await;
    assert!(
        at - sent >= Duration::from_millis(310),
        "latency + pull_in: {:?}",
        at - sent
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_stays_connected_but_publishes_nothing() {
    let m = Mosquitto::start().await;
    let b = m.client("engine").await;
    let (mut status, mut states) = watch(&b).await;
    let relay = MqttRelay::start(&m.url, "relay", &options(0.1, 10), &[], 1).expect("starts");
    assert_eq!(next(&mut status).await.payload.as_ref(), b"online");
    state_until(&mut states, false).await;
    relay
        .inject(FaultSpec::now(Fault::Zombie))
        .expect("relay fault");
    // Let a state already in flight arrive, then nothing more: not for a set, not as heartbeat.
    while tokio::time::timeout(Duration::from_millis(300), states.recv())
        .await
        .is_ok()
    {}
    set(&b, true).await;
    let silent = tokio::time::timeout(Duration::from_millis(500), states.recv()).await;
    assert!(silent.is_err(), "a zombie publishes nothing: {silent:?}");
    // No will either: it is still connected.
    let mut fresh = b.subscribe("lab/relay/status");
    let retained = next(&mut fresh).await;
    assert_eq!(retained.payload.as_ref(), b"online");
}

#[tokio::test]
async fn a_fault_it_cannot_honour_is_refused() {
    let relay =
        MqttRelay::start("mqtt://127.0.0.1:1", "relay", &options(1.0, 10), &[], 1).expect("starts");
    assert_eq!(
        relay.inject(FaultSpec::now(Fault::Nak)),
        Err(RelayError::UnsupportedFault("nak".into()))
    );
    assert!(
        MqttRelay::start(
            "mqtt://127.0.0.1:1",
            "r",
            &options(1.0, 10),
            &[FaultSpec::now(Fault::CrcError)],
            1
        )
        .is_err()
    );
}
