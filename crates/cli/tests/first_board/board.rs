//! The broker and the board: the board played as the page's topic table says it behaves, and a
//! fresh client's look at what the broker holds retained.

use crate::page::Topics;
use closedloop_mqtt::testing::{await_active, connected};
use closedloop_mqtt::{BrokerConfig, MqttBroker, Subscription, Will};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The broker to use: the one named by `$CLOSEDLOOP_MQTT_URL`, or our own (as `tests/mqtt.rs`).
pub enum Broker {
    /// The machine's broker (`.ci/run` points at it), shared with other runs.
    Shared(String),
    /// A Mosquitto this test started on a free port, stopped when dropped.
    Own(Box<closedloop_mqtt::testing::Mosquitto>),
}

impl Broker {
    /// The shared broker if `$CLOSEDLOOP_MQTT_URL` names one (it must answer), else our own.
    pub async fn get() -> Broker {
        match std::env::var("CLOSEDLOOP_MQTT_URL") {
            Ok(url) => {
                let (host, port) = closedloop_mqtt::parse_broker_url(&url).expect("a broker URL");
                tokio::net::TcpStream::connect((host.as_str(), port))
                    .await
                    .unwrap_or_else(|e| panic!("CLOSEDLOOP_MQTT_URL={url} is not reachable: {e}"));
                Broker::Shared(url)
            }
            Err(_) => Broker::Own(Box::new(closedloop_mqtt::testing::Mosquitto::start().await)),
        }
    }

    /// The broker's URL, for the plant's variable and every client here.
    pub fn url(&self) -> &str {
        match self {
            Broker::Shared(url) => url,
            Broker::Own(m) => &m.url,
        }
    }
}

/// The board, as the page's table says it behaves: its own client with the last will, the set
/// topic subscribed, its state reported with the table's QoS and retain flag, on a heartbeat
/// when one runs.
pub struct Board {
    /// The board's connection, which a test cuts (`abort`) as a crash would.
    pub mqtt: MqttBroker,
    /// The sets closedloop publishes, for the test to read as the board would.
    pub sets: Subscription,
    topics: Arc<Topics>,
    /// The relay as the board drives it, which the test switches on a set.
    pub on: Arc<AtomicBool>,
    /// When the board last started a report.
    last_report: Arc<Mutex<Instant>>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Board {
    /// Connects with the table's last will and subscribes to the set topic (active on return).
    pub async fn connect(url: &str, client_id: &str, topics: Arc<Topics>) -> Board {
        let mut config = BrokerConfig::new(url, client_id);
        config.will = Some(Will {
            topic: topics.status.topic.clone(),
            payload: topics.offline().to_string(),
            retain: topics.status.retained,
        });
        let mqtt = connected(config).await;
        let mut sets = mqtt.subscribe(&topics.set.topic);
        await_active(&mqtt, &mut sets, &topics.set.topic).await;
        Board {
            mqtt,
            sets,
            topics,
            on: Arc::new(AtomicBool::new(false)),
            last_report: Arc::new(Mutex::new(Instant::now())),
            heartbeat: None,
        }
    }

    /// `online` on the status topic, as after each connect.
    pub async fn online(&self) {
        let s = &self.topics.status;
        let payload = self.topics.online().to_string();
        self.mqtt
            .send(&s.topic, payload.into(), s.qos, None, s.retained)
            .await
            .expect("online published");
    }

    /// The state, as the table says it is published.
    pub async fn report(&self) {
        report(&self.mqtt, &self.topics, &self.on, &self.last_report).await;
    }

    /// Reports on the table's period until stopped, as the firmware's main loop does.
    pub fn start_heartbeat(&mut self) {
        let (mqtt, topics) = (self.mqtt.clone(), Arc::clone(&self.topics));
        let (on, last) = (Arc::clone(&self.on), Arc::clone(&self.last_report));
        let period = topics.heartbeat();
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                report(&mqtt, &topics, &on, &last).await;
                tokio::time::sleep(period).await;
            }
        }));
    }

    /// The main loop hangs: no more reports; the connection stays open.
    pub fn stop_heartbeat(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }

    /// When the board last started a report, to time closedloop's judgement of its silence.
    pub fn last_report(&self) -> Instant {
        *self.last_report.lock().unwrap()
    }

    /// No set arrived (within a short look; late probes of `await_active` aside).
    pub async fn no_set(&mut self) {
        let look = async {
            loop {
                match self.sets.recv().await {
                    Some(m) if m.payload.as_ref() == b"probe" => continue,
                    other => return other,
                }
            }
        };
        let got = tokio::time::timeout(Duration::from_millis(300), look).await;
        assert!(got.is_err(), "a set was published: {got:?}");
    }
}

/// One state report, shared by `Board::report` and the heartbeat task.
async fn report(mqtt: &MqttBroker, topics: &Topics, on: &AtomicBool, last: &Mutex<Instant>) {
    let s = &topics.state;
    let payload = topics.state_payload(on.load(Ordering::SeqCst)).to_string();
    *last.lock().unwrap() = Instant::now();
    // A report the broker does not take (the board is being cut off) is simply lost.
    let _ = mqtt
        .send(&s.topic, payload.into(), s.qos, None, s.retained)
        .await;
}

/// What the broker holds retained on `topic`, asked by a fresh client (bounded).
pub async fn retained(url: &str, topic: &str, client_id: &str) -> Option<String> {
    let observer = connected(BrokerConfig::new(url, client_id)).await;
    let mut sub = observer.subscribe(topic);
    let got = tokio::time::timeout(Duration::from_secs(1), sub.recv()).await;
    match got {
        Ok(Some(m)) if m.retained => Some(String::from_utf8_lossy(&m.payload).into_owned()),
        _ => None,
    }
}
