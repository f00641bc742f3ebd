//! The background task of one broker connection: it polls the rumqttc `EventLoop` (which does
//! all I/O and reconnects) and turns each event into a change of the [`Shared`] state the
//! [`MqttBroker`](super::MqttBroker) handles read.
//!
//! One method per event keeps the loop itself a plain dispatch table; every method locks
//! [`Shared`] only for its own step and never across an `.await`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::Outgoing;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PubAck, PubAckReason, Publish};
use rumqttc::v5::{AsyncClient, ConnectionError, Event, EventLoop};
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Ack, Connection, Message, Shared, lock, tls};
use crate::Error;
use crate::codec::topic_matches;

/// Longest wait between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// First wait after a failure, and the wait again once a connection succeeded.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// A connection the broker closes this soon after its CONNACK counts as closed "at once": two
/// in a row are what a duplicate client id looks like (the broker keeps one connection per id,
/// and two clients with it take turns closing each other).
const QUICK_CLOSE: Duration = Duration::from_secs(5);

/// Everything the task owns: the rumqttc event loop and the ends it reports through.
pub(super) struct EventLoopTask {
    pub(super) eventloop: EventLoop,
    /// For (re)subscribing after every CONNACK.
    pub(super) client: AsyncClient,
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) connection: watch::Sender<Connection>,
    /// The broker URL, for the logs.
    pub(super) url: String,
    /// The client id this connection uses, for the logs (a duplicate is named).
    pub(super) client_id: String,
    /// When the current connection's CONNACK came.
    pub(super) connected_at: Option<Instant>,
    /// Connections in a row the broker closed within [`QUICK_CLOSE`] of accepting them.
    pub(super) quick_closes: u32,
}

impl EventLoopTask {
    /// Polls forever; the handle's [`Drop`] (or [`MqttBroker::abort`](super::MqttBroker::abort))
    /// aborts the task. A failed poll is a lost connection: reported, then retried after a
    /// doubling backoff.
    pub(super) async fn run(mut self) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(_))) => {
                    backoff = FIRST_BACKOFF;
                    self.connected_at = Some(Instant::now());
                    self.connected();
                }
                Ok(Event::Incoming(Packet::Publish(publish))) => self.received(publish),
                Ok(Event::Outgoing(Outgoing::Publish(pkid))) => self.written(pkid),
                Ok(Event::Incoming(Packet::PubAck(ack))) => self.acknowledged(ack),
                Ok(_) => {}
                Err(error) => {
                    self.lost(&error, backoff);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// CONNACK: the connection is up; every known filter is subscribed again (a clean start
    /// forgets them on the broker's side).
    fn connected(&self) {
        let mut s = lock(&self.shared);
        s.connection = Connection::Connected;
        s.last_error = None;
        for (filter, _) in &s.subs {
            let _ = self.client.try_subscribe(filter.clone(), QoS::AtLeastOnce);
        }
        self.connection.send_replace(Connection::Connected);
    }

    /// An incoming PUBLISH: numbered, then handed to every subscription whose filter matches.
    fn received(&self, publish: Publish) {
        let mut s = lock(&self.shared);
        s.seq += 1;
        let topic = String::from_utf8_lossy(&publish.topic).into_owned();
        let message = Message {
            retained: publish.retain,
            payload: publish.payload,
            received_at: Instant::now(),
            seq: s.seq,
            expiry_s: publish
                .properties
                .and_then(|properties| properties.message_expiry_interval),
            topic,
        };
        for (filter, sender) in &s.subs {
            if topic_matches(filter, &message.topic) {
                let _ = sender.send(message.clone());
            }
        }
    }

    /// A queued publish was written to the socket: QoS 0 is done now, QoS 1 waits for its
    /// PUBACK under the packet id it just got.
    fn written(&self, pkid: u16) {
        let mut s = lock(&self.shared);
        if let Some((qos, waiter)) = s.queued.pop_front() {
            if qos == QoS::AtMostOnce {
                let _ = waiter.send(Ok(Ack {
                    pkid,
                    seq: s.seq,
                    at: Instant::now(),
                    no_subscribers: false,
                }));
            } else {
                s.inflight.insert(pkid, waiter);
            }
        }
    }

    /// A PUBACK: resolves the publish waiting under its packet id, with the fence `seq`.
    fn acknowledged(&self, ack: PubAck) {
        let mut s = lock(&self.shared);
        if let Some(waiter) = s.inflight.remove(&ack.pkid) {
            let result = match ack.reason {
                PubAckReason::Success | PubAckReason::NoMatchingSubscribers => Ok(Ack {
                    pkid: ack.pkid,
                    seq: s.seq,
                    at: Instant::now(),
                    // Accepted, and delivered to nobody (a retained message is still kept).
                    no_subscribers: ack.reason == PubAckReason::NoMatchingSubscribers,
                }),
                other => Err(Error::Refused(format!("{other:?}"))),
            };
            let _ = waiter.send(result);
        }
    }

    /// Why the connection was lost, in words; after connections the broker closed at once twice
    /// in a row, with the duplicate client id that most often causes it.
    fn why_lost(&mut self, error: &ConnectionError) -> String {
        let why = tls::explain(error, &self.client_id);
        let quick = (self.connected_at.take()).is_some_and(|t| t.elapsed() < QUICK_CLOSE);
        self.quick_closes = if quick { self.quick_closes + 1 } else { 0 };
        if self.quick_closes < 2 || why.contains("session taken over") {
            return why;
        }
        format!(
            "{why}; the broker has closed the connection {} times in a row within seconds of \
             accepting it: most often another client uses the same client_id {:?} (the broker \
             keeps one connection per id); give each gateway and plant its own client_id",
            self.quick_closes, self.client_id
        )
    }

    /// The connection attempt failed or the connection was lost: logs why, records it for
    /// [`MqttBroker::last_error`](super::MqttBroker::last_error), fails every waiting publish
    /// and only then reports the connection down.
    fn lost(&mut self, error: &ConnectionError, backoff: Duration) {
        let why = self.why_lost(error);
        {
            let mut s = lock(&self.shared);
            // The same failure again and again (a broker that stays unreachable, a
            // certificate that stays wrong) is logged once at warn, then at debug.
            if s.last_error.as_deref() == Some(why.as_str()) {
                tracing::debug!(
                    broker = %self.url,
                    error = %why,
                    "MQTT still not connected; retrying in {backoff:?}"
                );
            } else {
                tracing::warn!(
                    broker = %self.url,
                    error = %why,
                    "MQTT connection failed or lost; reconnecting in {backoff:?}"
                );
            }
            s.last_error = Some(why);
            // Drop everything rumqttc would replay: a publish is never re-sent blindly.
            self.eventloop.clean();
            self.eventloop.pending.clear();
            s.connection = Connection::Disconnected;
            for (_, waiter) in s.queued.drain(..) {
                let _ = waiter.send(Err(Error::Disconnected));
            }
            for (_, waiter) in s.inflight.drain() {
                let _ = waiter.send(Err(Error::Disconnected));
            }
        }
        self.connection.send_replace(Connection::Disconnected);
    }
}
