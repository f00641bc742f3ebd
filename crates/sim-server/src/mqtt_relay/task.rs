//! The task behind [`MqttRelay`](super::MqttRelay): owns the device's one connection to the
//! broker (dropped abruptly on a cut, made anew on a connect), feeds the core what happens on it
//! and when, and turns the core's effects into I/O.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::{Instant, MissedTickBehavior};

use closedloop_mqtt::{BrokerConfig, Connection, MqttBroker, Subscription};

use super::core::Effect;
use super::{Presence, Shared, lock};

/// How long one publish waits for its PUBACK before the relay goes on without it.
const PUBLISH_WAIT: Duration = Duration::from_secs(2);

/// The `{"on": bool}` of a set message, or `None` for anything else.
fn parse_set(payload: &[u8]) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    v.get("on")?.as_bool()
}

/// The device's three topics, under its prefix.
pub(super) struct Topics {
    pub(super) set: String,
    pub(super) state: String,
    pub(super) status: String,
}

/// One connection to the broker, dropped (abruptly) on a cut and made anew on a connect.
struct Conn {
    broker: MqttBroker,
    sets: Subscription,
    connection: watch::Receiver<Connection>,
}

/// What woke the task.
enum Event {
    Set(bool),
    Connection(bool),
    Time,
    Beat,
}

/// Runs the device until the handle aborts it: carries out the effects queued in `shared`,
/// then waits for whatever comes first (the handle, a set, a connection change, the core's next
/// deadline, the heartbeat) and hands it to the core.
pub(super) async fn run(
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    config: BrokerConfig,
    topics: Topics,
    heartbeat: Duration,
    presence: watch::Sender<Presence>,
) {
    let mut conn: Option<Conn> = None;
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Set once the effects of the connection coming up (the retained `online`) have been carried
    // out.
    let mut announce = None;
    loop {
        let effects = std::mem::take(&mut lock(&shared).outbox);
        for effect in effects {
            apply(effect, &mut conn, &config, &topics, &presence).await;
        }
        if let Some(p) = announce.take()
            && conn.is_some()
        {
            presence.send_replace(p);
        }
        let deadline = lock(&shared).core.next_deadline(Instant::now());
        let (sets, connection) = match conn.as_mut() {
            Some(c) => (Some(&mut c.sets), Some(&mut c.connection)),
            None => (None, None),
        };
        let event = tokio::select! {
            () = wake.notified() => continue,
            on = next_set(sets) => Event::Set(on),
            up = connection_change(connection) => Event::Connection(up),
            () = sleep_until(deadline) => Event::Time,
            _ = tick.tick() => Event::Beat,
        };
        let now = Instant::now();
        let mut s = lock(&shared);
        let fx = match event {
            Event::Set(on) => s.core.on_set(on, now),
            Event::Connection(true) => {
                announce = Some(Presence::Connected);
                s.core.on_connected(now)
            }
            Event::Connection(false) => {
                announce = Some(Presence::Connecting);
                s.core.on_disconnected();
                Vec::new()
            }
            Event::Time => s.core.advance(now),
            Event::Beat => s.core.heartbeat(now),
        };
        s.outbox.extend(fx);
    }
}

async fn apply(
    effect: Effect,
    conn: &mut Option<Conn>,
    config: &BrokerConfig,
    topics: &Topics,
    presence: &watch::Sender<Presence>,
) {
    match effect {
        Effect::Cut => {
            if let Some(c) = conn.take() {
                c.broker.abort();
            }
            presence.send_replace(Presence::Off);
        }
        Effect::Connect => match MqttBroker::connect(config.clone()) {
            Ok(broker) => {
                let sets = broker.subscribe(&topics.set);
                let connection = broker.connection();
                *conn = Some(Conn {
                    broker,
                    sets,
                    connection,
                });
                presence.send_replace(Presence::Connecting);
            }
            // The URL was checked at start, so this does not happen; stay off rather than panic.
            Err(e) => tracing::warn!(error = %e, "mqtt-relay cannot connect"),
        },
        Effect::Online => publish(conn.as_ref(), &topics.status, "online".into(), true).await,
        Effect::State { on, seq } => {
            let body = format!(r#"{{"on": {on}, "seq": {seq}}}"#);
            publish(conn.as_ref(), &topics.state, body, false).await;
        }
    }
}

/// Publishes at QoS 1 and waits (bounded) for the PUBACK, so publishes leave in order.
async fn publish(conn: Option<&Conn>, topic: &str, payload: String, retain: bool) {
    let Some(c) = conn else { return };
    let sent = c.broker.send(topic, payload.into(), 1, None, retain);
    match tokio::time::timeout(PUBLISH_WAIT, sent).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::debug!(topic, error = %e, "mqtt-relay publish not acknowledged"),
        Err(_) => tracing::debug!(
            topic,
            "mqtt-relay publish: no PUBACK within {PUBLISH_WAIT:?}"
        ),
    }
}

/// The next valid set, never when there is no connection.
async fn next_set(sets: Option<&mut Subscription>) -> bool {
    let Some(sets) = sets else {
        return std::future::pending().await;
    };
    loop {
        match sets.recv().await {
            Some(msg) => {
                if let Some(on) = parse_set(&msg.payload) {
                    return on;
                }
            }
            None => return std::future::pending().await,
        }
    }
}

/// The next connection change (true: connected), never when there is no connection.
async fn connection_change(connection: Option<&mut watch::Receiver<Connection>>) -> bool {
    let Some(connection) = connection else {
        return std::future::pending().await;
    };
    if connection.changed().await.is_err() {
        return std::future::pending().await;
    }
    *connection.borrow_and_update() == Connection::Connected
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_payloads() {
        assert_eq!(parse_set(br#"{"on": true}"#), Some(true));
        assert_eq!(parse_set(br#"{"on": false, "id": "x"}"#), Some(false));
        assert_eq!(parse_set(br#"{"on": 1}"#), None);
        assert_eq!(parse_set(b"ON"), None);
    }
}
