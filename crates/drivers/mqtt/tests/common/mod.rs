//! A real Mosquitto on 127.0.0.1 and a free port, for the integration tests.

#![allow(dead_code)]

use std::time::Duration;

pub use closedloop_mqtt::testing::{Mosquitto, connected};
use closedloop_mqtt::{Message, MqttBroker, Subscription};

/// The next message on `sub` that is not a probe of [`await_active`], bounded.
pub async fn next(sub: &mut Subscription) -> Message {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = sub.recv().await.expect("subscription open");
            if m.payload.as_ref() != b"probe" {
                return m;
            }
        }
    })
    .await
    .expect("a message within 5 s")
}

/// Waits until the subscription is active at the broker by publishing probes to `topic` until
/// one comes back (the SUBSCRIBE is asynchronous). Returns the first probe seen.
pub async fn await_active(broker: &MqttBroker, sub: &mut Subscription, topic: &str) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            broker
                .publish(topic, "probe", 1, Duration::from_secs(5))
                .await
                .expect("probe acked");
            if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), sub.recv()).await
                && m.payload.as_ref() == b"probe"
            {
                return;
            }
        }
    })
    .await
    .expect("subscription active within 5 s");
}
