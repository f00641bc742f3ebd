//! A real Mosquitto on 127.0.0.1 and a free port, for the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use closedloop_mqtt::{BrokerConfig, Link, Message, MqttBroker, Subscription};
use tokio::process::{Child, Command};

const MOSQUITTO: &str = "/usr/sbin/mosquitto";

/// A Mosquitto process, killed on drop.
pub struct Mosquitto {
    pub url: String,
    _child: Child,
    conf: PathBuf,
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.conf);
    }
}

impl Mosquitto {
    /// Starts Mosquitto and waits until its port accepts connections (bounded, no fixed sleep).
    pub async fn start() -> Mosquitto {
        assert!(
            std::path::Path::new(MOSQUITTO).exists(),
            "{MOSQUITTO} is missing: the MQTT integration tests need a real broker; \
             run `apt-get install mosquitto`"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let conf = std::env::temp_dir().join(format!(
            "closedloop-mosquitto-{port}-{}.conf",
            std::process::id()
        ));
        std::fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"),
        )
        .expect("write mosquitto.conf");
        let child = Command::new(MOSQUITTO)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn mosquitto");
        let addr = format!("127.0.0.1:{port}");
        tokio::time::timeout(Duration::from_secs(10), async {
            while tokio::net::TcpStream::connect(&addr).await.is_err() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("mosquitto accepts connections within 10 s");
        Mosquitto {
            url: format!("mqtt://{addr}"),
            _child: child,
            conf,
        }
    }

    /// A connected client handle.
    pub async fn client(&self, id: &str) -> MqttBroker {
        connected(BrokerConfig::new(&self.url, id)).await
    }
}

/// Connects and waits (bounded) for CONNACK.
pub async fn connected(config: BrokerConfig) -> MqttBroker {
    let broker = MqttBroker::connect(config).expect("valid config");
    let mut link = broker.link();
    tokio::time::timeout(
        Duration::from_secs(5),
        link.wait_for(|l| *l == Link::Connected),
    )
    .await
    .expect("connected within 5 s")
    .expect("link open");
    broker
}

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
