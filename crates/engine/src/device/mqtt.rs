//! MQTT devices: a listener instead of a poller (see the parent module's doc).

use super::*;

impl DeviceRuntime {
    /// The MQTT listener: messages of the device's topics into the cache, link and status-topic
    /// changes into liveness, and a republished snapshot every `poll_ms`.
    pub(super) async fn listen(self: Arc<Self>, broker: MqttBroker, stop: Arc<Notify>) {
        let mut topics: Vec<String> = self
            .spec
            .signals
            .iter()
            .filter_map(|s| match &s.source {
                Source::Topic { topic, .. } => Some(topic.clone()),
                _ => None,
            })
            .collect();
        let status = self.spec.liveness.status_topic.clone();
        topics.extend(status.clone());
        topics.sort();
        topics.dedup();
        let (msg_tx, mut msgs) = tokio::sync::mpsc::channel(256);
        let mut forwarders = tokio::task::JoinSet::new();
        for topic in &topics {
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
        drop(msg_tx);
        let mut link = broker.link();
        let mut tick = tokio::time::interval(Duration::from_millis(self.spec.poll_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let url = match &self.spec.driver {
            closedloop_plant::DriverConfig::Mqtt { broker, .. } => broker.to_string(),
            _ => String::new(),
        };
        let mut announced_offline = false;
        let mut offline_seq = 0u64;
        let mut link_up = *link.borrow_and_update() == Link::Connected;
        loop {
            let mut snap = self.snapshot();
            tokio::select! {
                m = msgs.recv() => {
                    let Some(m) = m else { return };
                    if status.as_deref() == Some(m.topic.as_str()) {
                        let text = String::from_utf8_lossy(&m.payload);
                        let text = text.trim();
                        if text == self.spec.liveness.offline {
                            announced_offline = true;
                            offline_seq = m.seq;
                        } else if text == self.spec.liveness.online {
                            announced_offline = false;
                            if !m.retained {
                                snap.last_valid = Some(m.received_at);
                            }
                        }
                    } else {
                        // A live message sent after the will: the device is back, whether or
                        // not its `online` reached us.
                        if !m.retained && m.seq > offline_seq {
                            announced_offline = false;
                        }
                        self.take_message(&mut snap, &m);
                    }
                }
                changed = link.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    link_up = *link.borrow_and_update() == Link::Connected;
                }
                _ = tick.tick() => {}
                _ = stop.notified() => return,
            }
            let down = !link_up || announced_offline;
            if !link_up {
                snap.last_error = Some(match broker.last_error() {
                    Some(why) => format!("the connection to the broker {url} is down: {why}"),
                    None => format!("the connection to the broker {url} is down"),
                });
            } else if announced_offline {
                snap.last_error = Some(format!(
                    "{} announced {:?} on its status topic {}",
                    self.id(),
                    self.spec.liveness.offline,
                    status.as_deref().unwrap_or_default()
                ));
            } else if snap.down {
                // Back: the reason it was down no longer holds.
                snap.last_error = None;
            }
            snap.down = down;
            snap.last_seen_ms = snap.last_valid.map(|t| self.clock.wall_ms(t));
            snap.liveness = self.judge_liveness(&snap, self.started);
            self.tx.send_replace(snap);
        }
    }

    /// One message of a signal topic into the snapshot.
    pub(super) fn take_message(&self, snap: &mut Snapshot, m: &closedloop_mqtt::Message) {
        // Retained: the broker's memory of some earlier moment — a value to show, never
        // evidence (sequence 0) and never a sign of life.
        let seq = if m.retained { 0 } else { m.seq };
        let at_ms = self.clock.wall_ms(m.received_at);
        let mut undecoded = Vec::new();
        for s in &self.spec.signals {
            let Source::Topic {
                topic,
                json,
                true_values,
                ty,
            } = &s.source
            else {
                continue;
            };
            if !closedloop_mqtt::topic_matches(topic, &m.topic) {
                continue;
            }
            let ty = if s.source.is_bool() {
                closedloop_driver::ValueType::Bool
            } else {
                *ty
            };
            match closedloop_mqtt::decode(&m.payload, json.as_deref(), true_values, ty) {
                Some(value) => {
                    snap.values.insert(
                        s.name.clone(),
                        SignalValue {
                            value,
                            at_ms,
                            source: s.source.describe(),
                            seq,
                        },
                    );
                }
                None => undecoded.push(s.name.as_str()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lamp() -> Device {
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
        let dev = DeviceRuntime::new(Arc::new(lamp()), DeviceIo::Mqtt(broker), Clock::new());
        let mut snap = dev.snapshot();
        dev.take_message(
            &mut snap,
            &message("lab/lamp/state", r#"{"on": true}"#, true, 7),
        );
        assert_eq!(snap.values["on"].value, Value::Bool(true));
        assert_eq!(snap.values["on"].seq, 0, "a retained value is never fresh");
        assert_eq!(snap.seq, 0);
        assert!(
            snap.last_valid.is_none(),
            "a retained message is no sign of life"
        );

        dev.take_message(
            &mut snap,
            &message("lab/lamp/state", r#"{"on": false}"#, false, 8),
        );
        assert_eq!(snap.values["on"].value, Value::Bool(false));
        assert_eq!((snap.values["on"].seq, snap.seq), (8, 8));
        assert!(snap.last_valid.is_some());
        assert_eq!(snap.values["on"].source, "lab/lamp/state /on");

        // A wildcard signal topic takes the concrete topic; a payload without the value is
        // named in last_error and changes nothing.
        dev.take_message(&mut snap, &message("lab/desk/level", "42.5", false, 9));
        assert_eq!(snap.values["level"].value, Value::Number(42.5));
        dev.take_message(&mut snap, &message("lab/lamp/state", "{}", false, 10));
        assert_eq!(snap.values["on"].value, Value::Bool(false));
        assert!(
            snap.last_error.as_deref().unwrap().contains("on"),
            "{snap:?}"
        );
    }
}
