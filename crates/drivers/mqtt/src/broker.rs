//! One MQTT 5 connection per broker, shared by every device on it (docs/plant-file.md).
//!
//! The rumqttc `EventLoop` runs in its own task and does all I/O; [`MqttBroker`] is the cloneable
//! handle. Publishes resolve when the broker's PUBACK arrives — which moves a command to
//! `running`, never to `completed` (docs/architecture.md).
//!
//! `mqtts://` connections use rustls with the `ring` provider, configured in `broker/tls.rs`
//! (trusted roots, client certificate) rather than by rumqttc, so no process-wide crypto provider
//! is needed.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{LastWill, Packet, PubAckReason, PublishProperties};
use rumqttc::v5::{AsyncClient, Event, EventLoop, MqttOptions};
use rumqttc::{Outgoing, TlsConfiguration, Transport};
use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::Error;
use crate::codec::{expiry_secs, parse_broker, topic_matches};

mod tls;

/// Messages buffered per subscription filter. On overflow the oldest are dropped and the receiver
/// learns how many it missed ([`Subscription::recv`] skips them and counts them in `lagged`).
const SUBSCRIPTION_BUFFER: usize = 256;
/// Longest wait between reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How to reach a broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `mqtt://host[:port]` (plain) or `mqtts://host[:port]` (TLS); see
    /// [`crate::parse_broker_url`].
    pub url: String,
    /// MQTT client id; the broker drops an older connection with the same id.
    pub client_id: String,
    /// User name, if the broker wants one.
    pub username: Option<String>,
    /// Password, if the broker wants one.
    pub password: Option<String>,
    /// Last will the broker publishes when this connection dies without a DISCONNECT.
    pub will: Option<Will>,
    /// MQTT keep-alive; a dead broker is noticed within ~1.5× this.
    pub keep_alive: Duration,
    /// Requests (publishes, subscribes) queued towards the broker; beyond it `publish` is
    /// [`Error::Busy`] rather than waiting.
    pub capacity: usize,
    /// `mqtts://` only: whom to trust and who to be. Boxed because most brokers are plain and
    /// the config travels by value inside larger enums (the engine's connections).
    pub tls: Box<BrokerTls>,
}

/// The TLS files of an `mqtts://` connection (PEM); all empty means the system's trusted roots
/// and no client certificate. Read by [`MqttBroker::connect`], which refuses them on a plain URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerTls {
    /// The CA certificate(s) to trust *instead of* the system's roots — for a self-signed
    /// broker or a private CA. `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// A certificate chain presented to a broker that asks for client certificates (mutual
    /// TLS). Goes with `client_key`: both or neither.
    pub client_cert: Option<PathBuf>,
    /// The private key (PKCS#8, PKCS#1 or SEC1) of `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl BrokerTls {
    /// The first file set, by its plant key (for "only with `mqtts://`").
    fn first_set(&self) -> Option<&'static str> {
        [
            ("ca_file", &self.ca_file),
            ("client_cert", &self.client_cert),
            ("client_key", &self.client_key),
        ]
        .into_iter()
        .find_map(|(key, v)| v.as_ref().map(|_| key))
    }
}

impl BrokerConfig {
    /// A config with defaults: no credentials, no will, keep-alive 5 s, capacity 64; with
    /// `mqtts://`, the system's trusted roots and no client certificate.
    pub fn new(url: impl Into<String>, client_id: impl Into<String>) -> BrokerConfig {
        BrokerConfig {
            url: url.into(),
            client_id: client_id.into(),
            username: None,
            password: None,
            will: None,
            keep_alive: Duration::from_secs(5),
            capacity: 64,
            tls: Box::default(),
        }
    }
}

/// A last will (QoS 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Will {
    /// Where the broker publishes it.
    pub topic: String,
    /// What it publishes (`offline`).
    pub payload: String,
    /// Whether it is retained (a status topic's will is).
    pub retain: bool,
}

/// The state of the connection to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
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
    link: Link,
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
    link: watch::Receiver<Link>,
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
    /// [`MqttBroker::link`] for the state. Must be called inside a tokio runtime.
    ///
    /// For `mqtts://` the TLS files are read here, so a missing or malformed one is an
    /// [`Error::Tls`] at once; a handshake that fails later is a lost connection, reported by
    /// [`MqttBroker::last_error`] and the logs.
    pub fn connect(config: BrokerConfig) -> Result<MqttBroker, Error> {
        let addr = parse_broker(&config.url)?;
        let mut options = MqttOptions::new(config.client_id.clone(), addr.host, addr.port);
        options
            .set_keep_alive(config.keep_alive)
            .set_clean_start(true);
        if addr.tls {
            let tls = TlsConfiguration::Rustls(Arc::new(tls::client_config(&config.tls)?));
            options.set_transport(Transport::tls_with_config(tls));
        } else if let Some(key) = config.tls.first_set() {
            return Err(Error::Tls(format!(
                "{key} is set but the broker {} is plain MQTT; write it as mqtts://",
                config.url
            )));
        }
        if let Some(user) = &config.username {
            options.set_credentials(user.clone(), config.password.clone().unwrap_or_default());
        }
        if let Some(w) = &config.will {
            options.set_last_will(LastWill::new(
                w.topic.clone(),
                w.payload.clone().into_bytes(),
                QoS::AtLeastOnce,
                w.retain,
                None,
            ));
        }
        let (client, eventloop) = AsyncClient::new(options, config.capacity.max(1));
        let shared = Arc::new(Mutex::new(Shared {
            link: Link::Disconnected,
            queued: VecDeque::new(),
            inflight: HashMap::new(),
            subs: Vec::new(),
            seq: 0,
            last_error: None,
        }));
        let (link_tx, link_rx) = watch::channel(Link::Disconnected);
        let task = tokio::spawn(run(
            eventloop,
            client.clone(),
            shared.clone(),
            link_tx,
            config.url,
        ))
        .abort_handle();
        Ok(MqttBroker {
            inner: Arc::new(Inner {
                client,
                shared,
                link: link_rx,
                task,
            }),
        })
    }

    /// The connection state, updated on every connect and disconnect.
    pub fn link(&self) -> watch::Receiver<Link> {
        self.inner.link.clone()
    }

    /// Why the link is down: the error of the last failed connection attempt or of the lost
    /// connection (a refused TLS handshake names the certificate problem: unknown issuer, name
    /// mismatch, certificate required). `None` while connected and before the first attempt
    /// ended. Set before [`MqttBroker::link`] turns `Disconnected`, so a watcher woken by that
    /// change reads the reason.
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
        if s.link == Link::Connected {
            // A full queue is harmless here: the filter is in `subs` and is sent on reconnect.
            let _ = self.inner.client.try_subscribe(filter, QoS::AtLeastOnce);
        }
        Subscription { rx, lagged: 0 }
    }

    /// Publishes, never retained, with MQTT 5 message expiry `expiry` (rounded up to whole
    /// seconds). Resolves on PUBACK for QoS 1; for QoS 0 once written to the socket.
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
        self.send(topic, payload.into(), qos, Some(expiry), false)
            .await
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
            if s.link != Link::Connected {
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

async fn run(
    mut eventloop: EventLoop,
    client: AsyncClient,
    shared: Arc<Mutex<Shared>>,
    link: watch::Sender<Link>,
    url: String,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                backoff = Duration::from_millis(100);
                let mut s = lock(&shared);
                s.link = Link::Connected;
                s.last_error = None;
                for (filter, _) in &s.subs {
                    let _ = client.try_subscribe(filter.clone(), QoS::AtLeastOnce);
                }
                link.send_replace(Link::Connected);
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let mut s = lock(&shared);
                s.seq += 1;
                let topic = String::from_utf8_lossy(&p.topic).into_owned();
                let msg = Message {
                    retained: p.retain,
                    payload: p.payload,
                    received_at: Instant::now(),
                    seq: s.seq,
                    expiry_s: p.properties.and_then(|pr| pr.message_expiry_interval),
                    topic,
                };
                for (filter, tx) in &s.subs {
                    if topic_matches(filter, &msg.topic) {
                        let _ = tx.send(msg.clone());
                    }
                }
            }
            Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                let mut s = lock(&shared);
                if let Some((qos, waiter)) = s.queued.pop_front() {
                    if qos == QoS::AtMostOnce {
                        let _ = waiter.send(Ok(Ack {
                            pkid,
                            seq: s.seq,
                            at: Instant::now(),
                        }));
                    } else {
                        s.inflight.insert(pkid, waiter);
                    }
                }
            }
            Ok(Event::Incoming(Packet::PubAck(ack))) => {
                let mut s = lock(&shared);
                if let Some(waiter) = s.inflight.remove(&ack.pkid) {
                    let r = match ack.reason {
                        PubAckReason::Success | PubAckReason::NoMatchingSubscribers => Ok(Ack {
                            pkid: ack.pkid,
                            seq: s.seq,
                            at: Instant::now(),
                        }),
                        other => Err(Error::Refused(format!("{other:?}"))),
                    };
                    let _ = waiter.send(r);
                }
            }
            Ok(_) => {}
            Err(e) => {
                let why = tls::explain(&e);
                {
                    let mut s = lock(&shared);
                    // The same failure again and again (a broker that stays unreachable, a
                    // certificate that stays wrong) is logged once at warn, then at debug.
                    if s.last_error.as_deref() == Some(why.as_str()) {
                        tracing::debug!(
                            broker = %url,
                            error = %why,
                            "MQTT still not connected; retrying in {backoff:?}"
                        );
                    } else {
                        tracing::warn!(
                            broker = %url,
                            error = %why,
                            "MQTT connection failed or lost; reconnecting in {backoff:?}"
                        );
                    }
                    s.last_error = Some(why);
                    // Drop everything rumqttc would replay: a publish is never re-sent blindly.
                    eventloop.clean();
                    eventloop.pending.clear();
                    s.link = Link::Disconnected;
                    for (_, w) in s.queued.drain(..) {
                        let _ = w.send(Err(Error::Disconnected));
                    }
                    for (_, w) in s.inflight.drain() {
                        let _ = w.send(Err(Error::Disconnected));
                    }
                }
                link.send_replace(Link::Disconnected);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
