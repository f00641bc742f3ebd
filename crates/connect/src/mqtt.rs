//! MQTT devices: clients of a broker connection shared by every device on that broker.
//!
//! A listener takes the messages of the device's topics. A value's number is the message's
//! number on the connection, and a publish's fence is the number of the last message received
//! before its PUBACK: only messages that arrived after the acknowledgement count. Retained
//! messages (delivered on subscribe) update the cache with number 0, so they are never evidence
//! and never a sign of life. The device is offline when its status topic carries the `offline`
//! payload (its last will), when the broker connection is down, or after `max_silence_s`
//! without a message; every `poll_ms` the listener republishes the sample so supervisors see a
//! silence as it happens.

use crate::base::Base;
use closedloop_contract::BoxFuture;
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, PlanError, Reporting, Request, Snapshot, SnapshotTx,
    WriteError,
};
use closedloop_mqtt::MqttBroker;
use closedloop_plant::{Device, Source, WriteEntry};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// An MQTT publish with its payload rendered: never retained, expiring at the command's
/// deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// Topic.
    pub topic: String,
    /// Rendered payload.
    pub payload: String,
    /// QoS 0 or 1.
    pub qos: u8,
}

impl fmt::Display for Publish {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "publish {} {} (QoS {})",
            self.topic, self.payload, self.qos
        )
    }
}

impl Encoded for Publish {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An MQTT device.
pub struct MqttLink {
    base: Base,
    broker: MqttBroker,
}

impl MqttLink {
    /// A link for the device `spec` on `broker` (a connection shared with the broker's other
    /// devices); [`Link::run`] starts listening.
    pub fn new(spec: Arc<Device>, broker: MqttBroker, clock: Clock) -> MqttLink {
        MqttLink {
            base: Base::new(spec, clock),
            broker,
        }
    }

    async fn publish(&self, p: &Publish, expiry: Duration) -> Result<u64, WriteError> {
        let sent = self
            .broker
            .publish(&p.topic, p.payload.clone().into_bytes(), p.qos, expiry);
        match tokio::time::timeout(expiry, sent).await {
            Ok(Ok(ack)) => Ok(ack.seq),
            Ok(Err(e)) => Err(closedloop_mqtt::write_error(&e, &p.topic)),
            Err(_) => Err(WriteError::unanswered(format!(
                "publishing to {}: the broker did not acknowledge within {:.1} s",
                p.topic,
                expiry.as_secs_f64()
            ))),
        }
    }

    /// The MQTT listener: messages of the device's topics into the cache, connection and
    /// status-topic changes into liveness, and a republished snapshot every `poll_ms`.
    async fn listen(self: Arc<Self>, stop: Arc<Notify>) {
        let (mut msgs, _forwarders) = forward(&self.broker, &self.topics());
        let mut connection = self.broker.connection();
        let mut tick = tokio::time::interval(Duration::from_millis(self.base.spec.poll_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut presence = Presence::default();
        let mut broker_up =
            *connection.borrow_and_update() == closedloop_mqtt::Connection::Connected;
        let mut ever_up = broker_up;
        loop {
            let mut snap = self.base.snapshot();
            tokio::select! {
                m = msgs.recv() => {
                    let Some(m) = m else { return };
                    self.take(&mut presence, &mut snap, &m);
                }
                changed = connection.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    broker_up =
                        *connection.borrow_and_update() == closedloop_mqtt::Connection::Connected;
                    ever_up |= broker_up;
                }
                _ = tick.tick() => {}
                _ = stop.notified() => return,
            }
            let failed = self.broker.last_error().is_some();
            let down = broker_down(broker_up, ever_up, failed);
            self.judge_down(&mut snap, !down, presence.announced_offline);
            self.base.publish(snap);
        }
    }

    /// The device's signal topics and its status topic, each once.
    fn topics(&self) -> Vec<String> {
        let spec = &self.base.spec;
        let mut topics: Vec<String> = spec
            .signals
            .iter()
            .filter_map(|s| match &s.source {
                Source::Topic { topic, .. } => Some(topic.clone()),
                _ => None,
            })
            .collect();
        topics.extend(spec.liveness.status_topic.clone());
        topics.sort();
        topics.dedup();
        topics
    }

    /// One message: the status topic's payload into presence, a signal topic's into the cache.
    fn take(&self, presence: &mut Presence, snap: &mut Snapshot, m: &closedloop_mqtt::Message) {
        let liveness = &self.base.spec.liveness;
        if liveness.status_topic.as_deref() != Some(m.topic.as_str()) {
            // A live message sent after the will: the device is back, whether or not its
            // `online` reached us.
            if !m.retained && m.seq > presence.offline_seq {
                presence.announced_offline = false;
            }
            self.take_message(snap, m);
            return;
        }
        let text = status_word(&m.payload, liveness.status_json.as_deref());
        let text = text.trim();
        if text == liveness.offline {
            presence.announced_offline = true;
            presence.offline_seq = m.seq;
        } else if text == liveness.online {
            presence.announced_offline = false;
            if !m.retained {
                snap.last_valid = Some(m.received_at);
            }
        }
    }

    /// Down while the broker connection is, or while the device's will says so; the reason in
    /// `last_error`, cleared when the device is back.
    fn judge_down(&self, snap: &mut Snapshot, broker_up: bool, announced_offline: bool) {
        let spec = &self.base.spec;
        if !broker_up {
            let url = match &spec.driver {
                closedloop_plant::DriverConfig::Mqtt { broker, .. } => broker.to_string(),
                _ => String::new(),
            };
            snap.last_error = Some(match self.broker.last_error() {
                Some(why) => format!("the connection to the broker {url} is down: {why}"),
                None => format!("the connection to the broker {url} is down"),
            });
        } else if announced_offline {
            snap.last_error = Some(format!(
                "{} announced {:?} on its status topic {}",
                self.base.id(),
                spec.liveness.offline,
                spec.liveness.status_topic.as_deref().unwrap_or_default()
            ));
        } else if snap.down {
            // Back: the reason it was down no longer holds.
            snap.last_error = None;
        }
        snap.down = !broker_up || announced_offline;
    }

    /// One message of a signal topic into the snapshot.
    fn take_message(&self, snap: &mut Snapshot, m: &closedloop_mqtt::Message) {
        // Retained: the broker's memory of some earlier moment — a value to show, never
        // evidence (sequence 0) and never a sign of life; of an age known only when its
        // payload carries the time the plant names (`time_json`).
        let seq = if m.retained { 0 } else { m.seq };
        let at_ms = self.base.clock.wall_ms(m.received_at);
        let mut undecoded = Vec::new();
        for s in &self.base.spec.signals {
            let Source::Topic {
                topic,
                json,
                true_values,
                false_values,
                ty,
                time_json,
            } = &s.source
            else {
                continue;
            };
            if !closedloop_mqtt::topic_matches(topic, &m.topic) {
                continue;
            }
            let ty = if s.source.is_bool() {
                closedloop_contract::ValueType::Bool
            } else {
                *ty
            };
            let words = closedloop_mqtt::Words {
                on: true_values,
                off: false_values,
            };
            // The time its payload says it was taken dates what is shown, never a decision.
            let taken = (time_json.as_deref())
                .and_then(|p| closedloop_mqtt::payload_time(&m.payload, p).ok());
            let describe = || s.source.describe();
            match closedloop_mqtt::decode(&m.payload, json.as_deref(), words, ty) {
                Ok(value) => snap.record_taken(&s.name, value, (at_ms, taken), seq, describe),
                Err(what) => {
                    let why = format!("a message on {} held {what}", m.topic);
                    snap.no_value(&s.name, why, at_ms, seq);
                    undecoded.push(s.name.as_str());
                }
            }
        }
        if !m.retained {
            snap.seq = snap.seq.max(m.seq);
            snap.last_valid = Some(m.received_at);
            snap.last_error = (!undecoded.is_empty()).then(|| {
                format!(
                    "a message on {} held no value for {}",
                    m.topic,
                    undecoded.join(", ")
                )
            });
        }
    }
}

/// The word a status topic's payload says: the payload itself, or the string at `pointer` in
/// it when the plant names one (`status_json`); anything else says neither word.
fn status_word(payload: &[u8], pointer: Option<&str>) -> String {
    let text = String::from_utf8_lossy(payload);
    let Some(pointer) = pointer else {
        return text.into_owned();
    };
    let doc: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    (doc.as_ref())
        .and_then(|d| d.pointer(pointer)?.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Whether the broker connection counts as down: lost after it was up, or its first attempt
/// failed. Before the first attempt has ended nothing is known yet — the device stays
/// `unknown`, not `offline`, as every device does before its first answer.
fn broker_down(broker_up: bool, ever_up: bool, failed: bool) -> bool {
    !broker_up && (ever_up || failed)
}

/// What the device's status topic last said.
#[derive(Default)]
struct Presence {
    /// Its `offline` payload (its last will) came, and no live message since.
    announced_offline: bool,
    /// The number of that `offline` message.
    offline_seq: u64,
}

/// Every message of `topics`, forwarded into one channel by one task per subscription (the
/// tasks end with the returned set).
fn forward(
    broker: &MqttBroker,
    topics: &[String],
) -> (
    tokio::sync::mpsc::Receiver<closedloop_mqtt::Message>,
    tokio::task::JoinSet<()>,
) {
    let (msg_tx, msgs) = tokio::sync::mpsc::channel(256);
    let mut forwarders = tokio::task::JoinSet::new();
    for topic in topics {
        let mut sub = broker.subscribe(topic);
        let tx = msg_tx.clone();
        forwarders.spawn(async move {
            while let Some(m) = sub.recv().await {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
        });
    }
    (msgs, forwarders)
}

/// An MQTT publish from its entry and the payload the plan rendered.
pub fn encode(entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
    let WriteEntry::Mqtt { topic, qos, .. } = entry else {
        return Err(PlanError(format!(
            "{} is not a publish; an MQTT device takes `mqtt` write entries",
            entry.describe()
        )));
    };
    let payload = values
        .text
        .clone()
        .ok_or_else(|| PlanError(format!("mqtt {topic}: no payload was rendered")))?;
    Ok(Arc::new(Publish {
        topic: topic.clone(),
        payload,
        qos: *qos,
    }))
}

impl Link for MqttLink {
    fn describe(&self) -> String {
        match &self.base.spec.driver {
            closedloop_plant::DriverConfig::Mqtt { broker, .. } => format!("mqtt {broker}"),
            other => other.kind().to_string(),
        }
    }

    fn reporting(&self) -> Reporting {
        Reporting::WhenItLikes
    }

    fn samples(&self) -> &SnapshotTx {
        &self.base.tx
    }

    fn current(&self) -> Snapshot {
        self.base.current()
    }

    fn liveness(&self) -> closedloop_link::Liveness {
        self.base.liveness()
    }

    fn fence(&self) -> u64 {
        self.broker.last_seq()
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        encode(entry, values)
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            match request.as_any().downcast_ref::<Publish>() {
                Some(p) => self.publish(p, expiry).await,
                None => Err(crate::misfit(request, self.base.id())),
            }
        })
    }

    /// An MQTT device reports when it likes: nothing to ask.
    fn ask(&self) {}

    /// The cache is as fresh as it gets.
    fn fresh(&self, _within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(async move { self.base.current() })
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(self.listen(stop))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests;
