//! `MqttBroker` against a real Mosquitto.

use std::time::Duration;

use closedloop_mqtt::testing::{Mosquitto, await_active, connected, next};
use closedloop_mqtt::{BrokerConfig, Connection, Error, MqttBroker, Will};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_resolves_on_puback() {
    let m = Mosquitto::start().await;
    let b = m.client("puback").await;
    let mut sub = b.subscribe("lab/lamp/set");
    await_active(&b, &mut sub, "lab/lamp/set").await;
    let ack = b
        .publish("lab/lamp/set", r#"{"on": true}"#, 1, Duration::from_secs(3))
        .await
        .expect("acked");
    assert!(ack.pkid > 0, "QoS 1 has a packet id");
    let ack0 = b
        .publish("lab/lamp/set", "x", 0, Duration::from_secs(3))
        .await
        .expect("sent");
    assert_eq!(ack0.pkid, 0);
}

/// Mosquitto answers a QoS 1 publish nobody subscribes to with PUBACK reason 0x10, "No matching
/// subscribers": the broker has the message, and nobody received it — a board that is powered
/// off has no subscription. A command's publish is then not delivered; a device's retained
/// publish is still kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_puback_saying_no_matching_subscribers_is_not_a_delivery() {
    let m = Mosquitto::start().await;
    let b = m.client("nobody-listens").await;
    let r = b
        .publish("lab/gone/set", "ON", 1, Duration::from_secs(3))
        .await;
    assert_eq!(r, Err(Error::NoSubscribers));
    let kept = (b.send("lab/gone/state", "OFF".into(), 1, None, true)).await;
    assert!(
        kept.is_ok_and(|a| a.no_subscribers),
        "a retained publish is kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_is_refused_at_once_when_not_connected() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let b = MqttBroker::connect(BrokerConfig::new(
        format!("mqtt://127.0.0.1:{port}"),
        "nobody",
    ))
    .expect("config");
    assert_eq!(*b.connection().borrow(), Connection::Disconnected);
    let r = b.publish("t", "x", 1, Duration::from_secs(1)).await;
    assert_eq!(r, Err(Error::Disconnected));
    assert_eq!(
        b.publish("a/+", "x", 1, Duration::from_secs(1)).await,
        Err(Error::InvalidTopic("a/+".into()))
    );
    assert_eq!(
        b.publish("a", "x", 2, Duration::from_secs(1)).await,
        Err(Error::UnsupportedQos(2))
    );
    assert_eq!(
        b.publish("a", "x", 1, Duration::ZERO).await,
        Err(Error::Expired)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retained_messages_are_flagged_and_live_ones_are_not() {
    let m = Mosquitto::start().await;
    // Another client leaves a retained state behind (as a device does with its status).
    let (port_host, port) = closedloop_mqtt::parse_broker_url(&m.url).expect("url");
    let (raw, mut el) = AsyncClient::new(MqttOptions::new("retainer", port_host, port), 8);
    raw.publish("lab/lamp/state", QoS::AtLeastOnce, true, r#"{"on": true}"#)
        .await
        .expect("queued");
    loop {
        match el.poll().await.expect("raw client runs") {
            Event::Incoming(rumqttc::v5::mqttbytes::v5::Packet::PubAck(_)) => break,
            _ => continue,
        }
    }

    let b = m.client("reader").await;
    let mut sub = b.subscribe("lab/lamp/state");
    let first = next(&mut sub).await;
    assert!(first.retained, "the retained message is flagged: {first:?}");
    assert_eq!(first.payload.as_ref(), br#"{"on": true}"#);

    b.publish(
        "lab/lamp/state",
        r#"{"on": false}"#,
        1,
        Duration::from_secs(5),
    )
    .await
    .expect("acked");
    let live = next(&mut sub).await;
    assert!(!live.retained, "a live message is not: {live:?}");
    assert!(live.seq > first.seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_increasing_seq_and_the_expiry() {
    let m = Mosquitto::start().await;
    let writer = m.client("writer").await;
    let reader = m.client("reader").await;
    let mut sub = reader.subscribe("plant/+/state");
    await_active(&writer, &mut sub, "plant/probe/state").await;
    for i in 0..5 {
        writer
            .publish(
                &format!("plant/d{i}/state"),
                format!("{i}"),
                1,
                Duration::from_millis(29_500),
            )
            .await
            .expect("acked");
    }
    let mut last = 0;
    for i in 0..5 {
        let msg = next(&mut sub).await;
        assert_eq!(msg.topic, format!("plant/d{i}/state"));
        assert!(msg.seq > last, "seq increases: {} after {last}", msg.seq);
        last = msg.seq;
        let expiry = msg.expiry_s.expect("message expiry is set on publishes");
        assert!(
            (1..=30).contains(&expiry),
            "expiry rounded up to 30 s, then counted down: {expiry}"
        );
        assert!(!msg.retained);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_will_fires_on_an_abrupt_disconnect() {
    let m = Mosquitto::start().await;
    let watcher = m.client("watcher").await;
    let mut status = watcher.subscribe("lab/lamp/status");
    let mut cfg = BrokerConfig::new(&m.url, "lamp");
    cfg.will = Some(Will {
        topic: "lab/lamp/status".into(),
        payload: "offline".into(),
        retain: true,
    });
    let device = connected(cfg).await;
    await_active(&watcher, &mut status, "lab/lamp/status").await;
    device.abort();
    let msg = next(&mut status).await;
    assert_eq!(msg.payload.as_ref(), b"offline");
    assert!(
        !msg.retained,
        "a will delivered live is not flagged retained"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_broker_fails_the_publish_and_the_connection_goes_down() {
    let m = Mosquitto::start().await;
    let b = m.client("orphan").await;
    let mut connection = b.connection();
    drop(m);
    tokio::time::timeout(
        Duration::from_secs(5),
        connection.wait_for(|l| *l == Connection::Disconnected),
    )
    .await
    .expect("disconnect noticed")
    .expect("connection watch open");
    assert_eq!(
        b.publish("t", "x", 1, Duration::from_secs(1)).await,
        Err(Error::Disconnected)
    );
}

/// Two gateways with one client id: Mosquitto closes the older connection with DISCONNECT 0x8E
/// (session taken over); the error names the duplicate id instead of "connection closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_client_id_is_named_when_the_broker_closes_the_connection() {
    let m = Mosquitto::start().await;
    let first = m.client("closedloop-plant").await;
    let mut connection = first.connection();
    let _second = m.client("closedloop-plant").await;
    tokio::time::timeout(
        Duration::from_secs(5),
        connection.wait_for(|l| *l == Connection::Disconnected),
    )
    .await
    .expect("the first connection is closed")
    .expect("connection watch open");
    // The two take turns closing each other; the reason names the id (by the broker's
    // DISCONNECT 0x8E when it sends one, else by the closes in a row).
    let mut seen = Vec::new();
    for _ in 0..1000 {
        if let Some(why) = first.last_error() {
            if why.contains("client_id \"closedloop-plant\"") {
                return;
            }
            seen.push(why);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the duplicate id was never named: {seen:?}");
}
