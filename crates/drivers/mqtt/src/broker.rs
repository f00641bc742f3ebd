//! One MQTT 5 connection per broker, shared by every device on it (docs/plant-file.md).
//!
//! The rumqttc `EventLoop` runs in its own task and does all I/O; [`MqttBroker`] is the cloneable
//! handle. Publishes resolve when the broker's PUBACK arrives — which moves a command to
//! `running`, never to `completed` (docs/architecture.md).
//!
//! `mqtts://` connections use rustls with the `ring` provider, configured in `broker/tls.rs`
//! (trusted roots, client certificate) rather than by rumqttc, so no process-wide crypto provider
//! is needed.
//!
//! The configuration (and its rumqttc options) lives in `broker/config.rs`, the event-loop task in
//! `broker/event_loop.rs`; this file holds the handle and the state both share.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::PublishProperties;
use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::Error;
use crate::codec::expiry_secs;

mod config;
mod event_loop;
mod tls;

use config::mqtt_options;
pub use config::{BrokerConfig, BrokerTls, Will};
use event_loop::EventLoopTask;

/// Messages buffered per subscription filter. On overflow the oldest are dropped and the receiver
/// learns how many it missed ([`Subscription::recv`] skips them and counts them in `lagged`).
const SUBSCRIPTION_BUFFER: usize = 256;

/// The state of the connection to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Not connected yet, or reconnecting.
    Disconnected,
    /// CONNACK received; subscriptions (re)sent.
    Connected,
}

/// One message received from the broker.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Its topic.
    pub topic: String,
    /// Its payload.
    pub payload: Bytes,
    /// Delivered because it was retained (on subscribe): updates the cache, never evidence.
    pub retained: bool,
    /// When the event loop received it.
    pub received_at: Instant,
    /// Strictly increasing per connection handle, across all topics; compare with [`Ack::seq`]
    /// to know whether it arrived after a publish was acknowledged.
    pub seq: u64,
    /// The MQTT 5 message expiry left, in seconds, if the sender set one.
    pub expiry_s: Option<u32>,
}

/// The broker acknowledged a publish (PUBACK for QoS 1; handed to the socket for QoS 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Packet id (0 for QoS 0).
    pub pkid: u16,
    /// The `seq` of the last message received before the acknowledgement: a message with a
    /// greater `seq` was received after it (the "fresh read" fence of docs/architecture.md).
    pub seq: u64,
    /// When the acknowledgement was processed.
    pub at: Instant,
    /// The broker's PUBACK said "No matching subscribers" (MQTT 5 reason 0x10): nobody
    /// received the message (a retained one is still kept for later subscribers). Never set
    /// for QoS 0, whose publish the broker does not answer.
    pub no_subscribers: bool,
}

type Waiter = oneshot::Sender<Result<Ack, Error>>;

/// State shared by the handle and the event-loop task. Never held across `.await`.
///
/// # Invariants
/// `queued` lists, in order, the waiters of publishes sent to the event loop but not yet written
/// to the socket; the event loop writes them in the same order, so `Outgoing::Publish(pkid)` pops
/// the front. Both `queued` and `inflight` are emptied (failed `Disconnected`) whenever the
/// connection drops, together with the event loop's own pending requests: nothing is re-sent
/// blindly after a reconnect.
struct Shared {
    connection: Connection,
    queued: VecDeque<(QoS, Waiter)>,
    inflight: HashMap<u16, Waiter>,
    subs: Vec<(String, broadcast::Sender<Message>)>,
    seq: u64,
    /// Why the last connection attempt failed or the connection was lost; cleared on CONNACK.
    last_error: Option<String>,
}

/// A cloneable handle on one broker connection.
#[derive(Clone)]
pub struct MqttBroker {
    inner: Arc<Inner>,
}

struct Inner {
    client: AsyncClient,
    shared: Arc<Mutex<Shared>>,
    connection: watch::Receiver<Connection>,
    task: AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Messages of one subscription filter.
pub struct Subscription {
    rx: broadcast::Receiver<Message>,
    /// Messages dropped because this receiver fell behind.
    pub lagged: u64,
}

impl Subscription {
    /// The next message, or `None` once the broker handle is gone.
    pub async fn recv(&mut self) -> Option<Message> {
        loop {
            match self.rx.recv().await {
                Ok(m) => return Some(m),
                Err(broadcast::error::RecvError::Lagged(n)) => self.lagged += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MqttBroker {
    /// Starts connecting (in the background, with reconnects) and returns at once; watch
    /// [`MqttBroker::connection`] for the state. Must be called inside a tokio runtime.
    ///
    /// For `mqtts://` the TLS files are read here, so a missing or malformed one is an
    /// [`Error::Tls`] at once; a handshake that fails later is a lost connection, reported by
    /// [`MqttBroker::last_error`] and the logs.
    pub fn connect(config: BrokerConfig) -> Result<MqttBroker, Error> {
        let options = mqtt_options(&config)?;
        let (client, eventloop) = AsyncClient::new(options, config.capacity.max(1));
        let shared = Arc::new(Mutex::new(Shared {
            connection: Connection::Disconnected,
            queued: VecDeque::new(),
            inflight: HashMap::new(),
            subs: Vec::new(),
            seq: 0,
            last_error: None,
        }));
        let (connection_tx, connection_rx) = watch::channel(Connection::Disconnected);
        let task = EventLoopTask {
            eventloop,
            client: client.clone(),
            shared: shared.clone(),
            connection: connection_tx,
            client_id: config.client_id.clone(),
            url: config.url,
            connected_at: None,
            quick_closes: 0,
        };
        let task = tokio::spawn(task.run()).abort_handle();
        Ok(MqttBroker {
            inner: Arc::new(Inner {
                client,
                shared,
                connection: connection_rx,
                task,
            }),
        })
    }

    /// The connection state, updated on every connect and disconnect.
    pub fn connection(&self) -> watch::Receiver<Connection> {
        self.inner.connection.clone()
    }

    /// Why the connection is down: the error of the last failed connection attempt or of the
    /// lost connection (a refused TLS handshake names the certificate problem: unknown issuer,
    /// name mismatch, certificate required). `None` while connected and before the first attempt
    /// ended. Set before [`MqttBroker::connection`] turns `Disconnected`, so a watcher woken by
    /// that change reads the reason.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.inner.shared).last_error.clone()
    }

    /// Subscribes (QoS 1) to `filter`. Retained messages for it arrive flagged `retained`; the
    /// subscription is renewed after every reconnect.
    pub fn subscribe(&self, filter: &str) -> Subscription {
        let mut s = lock(&self.inner.shared);
        let rx = match s.subs.iter().find(|(f, _)| f == filter) {
            Some((_, tx)) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(SUBSCRIPTION_BUFFER);
                s.subs.push((filter.to_string(), tx));
                rx
            }
        };
        if s.connection == Connection::Connected {
            // A full queue is harmless here: the filter is in `subs` and is sent on reconnect.
            let _ = self.inner.client.try_subscribe(filter, QoS::AtLeastOnce);
        }
        Subscription { rx, lagged: 0 }
    }

    /// Publishes, never retained, with MQTT 5 message expiry `expiry` (rounded up to whole
    /// seconds). Resolves on PUBACK for QoS 1; for QoS 0 once written to the socket. A PUBACK
    /// saying no client subscribes is [`Error::NoSubscribers`]: a command nobody received was
    /// not delivered.
    ///
    /// Never waits for a connection: while disconnected it is [`Error::Disconnected`] at once.
    /// It does not time out on its own — a broker that never acks is bounded by the caller's
    /// deadline (wrap it in `tokio::time::timeout`).
    pub async fn publish(
        &self,
        topic: &str,
        payload: impl Into<Bytes>,
        qos: u8,
        expiry: Duration,
    ) -> Result<Ack, Error> {
        let expiry = expiry_secs(expiry).ok_or(Error::Expired)?;
        let ack = (self.send(topic, payload.into(), qos, Some(expiry), false)).await?;
        match ack.no_subscribers {
            true => Err(Error::NoSubscribers),
            false => Ok(ack),
        }
    }

    /// Publish with any retain flag and optional expiry, as a device publishes (its retained
    /// `online` status, its state without expiry): for the simulated devices of
    /// closedloop-sim-server and for tests. A command goes out through [`MqttBroker::publish`],
    /// which is never retained and always expires.
    pub async fn send(
        &self,
        topic: &str,
        payload: Bytes,
        qos: u8,
        expiry_s: Option<u32>,
        retain: bool,
    ) -> Result<Ack, Error> {
        let qos = match qos {
            0 => QoS::AtMostOnce,
            1 => QoS::AtLeastOnce,
            other => return Err(Error::UnsupportedQos(other)),
        };
        if topic.is_empty() || topic.contains(['+', '#', '\0']) {
            return Err(Error::InvalidTopic(topic.to_string()));
        }
        let props = PublishProperties {
            message_expiry_interval: expiry_s,
            ..Default::default()
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut s = lock(&self.inner.shared);
            if s.connection != Connection::Connected {
                return Err(Error::Disconnected);
            }
            self.inner
                .client
                .try_publish_with_properties(topic, qos, retain, payload, props)
                .map_err(|_| Error::Busy)?;
            s.queued.push_back((qos, tx));
        }
        rx.await.unwrap_or(Err(Error::Closed))
    }

    /// The `seq` of the last message received on this connection: messages numbered above it
    /// arrive later. A conservative fence when no [`Ack`] is at hand.
    pub fn last_seq(&self) -> u64 {
        lock(&self.inner.shared).seq
    }

    /// Drops the TCP connection without a DISCONNECT and stops: the broker publishes the will.
    /// Used by the simulator's `power_off`; a real driver just drops the handle.
    pub fn abort(&self) {
        self.inner.task.abort();
    }
}
