//! A plant file's `mqtt-relay` run by `bind_plant` against a real Mosquitto, watched by a plain
//! MQTT client: the state follows a set after `pull_in_ms`, every fault with an MQTT meaning is
//! injected and cleared through the control endpoint, and the faults without one are refused by
//! the control endpoint (the plant-file load refuses them too: `mqtt_relay_load.rs`).

use closedloop_mqtt::testing::Mosquitto;
use closedloop_mqtt::{Message, MqttBroker, Subscription};
use closedloop_sim::{Fault, FaultSpec};
use closedloop_sim_server::{
    ControlCommand, ControlError, ControlServer, ServedRelay, Simulated, bind_plant, control,
};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::time::Instant;

mod mqtt_lamp;

use mqtt_lamp::{plant, plant_text};

/// Long enough for any message on a loaded machine; only awaited in full when nothing comes.
const WAIT: Duration = Duration::from_secs(5);

/// The broker, the relay as `bind_plant` runs it with its control endpoint, and an observer.
struct Rig {
    broker: Mosquitto,
    relays: Vec<ServedRelay>,
    lamp: Simulated,
    control: SocketAddr,
    observer: Observer,
}

async fn rig(sim: &str) -> Rig {
    let broker = Mosquitto::start().await;
    let bound = bind_plant(&plant(&plant_text(Some(&broker.url), sim)))
        .await
        .expect("binds");
    let relays = bound.relays.clone();
    let lamp = bound.devices["lamp"].clone();
    let server = ControlServer::bind("127.0.0.1:0".parse().unwrap(), bound.devices.clone())
        .await
        .unwrap();
    let control = server.local_addr().unwrap();
    tokio::spawn(server.run());
    tokio::spawn(bound.run());
    let observer = Observer::new(broker.client("observer").await).await;
    Rig {
        broker,
        relays,
        lamp,
        control,
        observer,
    }
}

/// A plain MQTT client subscribed to `lab/lamp/status` and `lab/lamp/state`.
struct Observer {
    client: MqttBroker,
    sub: Subscription,
}

/// A message the observer saw.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Status(String),
    State { on: bool, seq: u64 },
}

impl Observer {
    /// Subscribes after `bind_plant` returned, so the relay's retained `online` is the first
    /// message: once it is seen, the subscription is active.
    async fn new(client: MqttBroker) -> Observer {
        let sub = client.subscribe("lab/lamp/+");
        let mut o = Observer { client, sub };
        let (first, retained) = o.next_raw().await;
        assert_eq!(first, Seen::Status("online".into()));
        assert!(retained, "the relay's `online` is retained");
        o
    }

    /// The next status or state message (its own sets skipped), bounded by `WAIT`.
    async fn next_raw(&mut self) -> (Seen, bool) {
        let m = tokio::time::timeout(WAIT, async {
            loop {
                let m: Message = self.sub.recv().await.expect("subscription open");
                if m.topic != "lab/lamp/set" {
                    return m;
                }
            }
        })
        .await
        .expect("a message within 5 s");
        (seen(&m), m.retained)
    }

    async fn next(&mut self) -> Seen {
        self.next_raw().await.0
    }

    /// The next status message, skipping states.
    async fn status(&mut self) -> String {
        loop {
            if let Seen::Status(s) = self.next().await {
                return s;
            }
        }
    }

    /// The next state message, skipping statuses.
    async fn state(&mut self) -> (bool, u64) {
        loop {
            if let Seen::State { on, seq } = self.next().await {
                return (on, seq);
            }
        }
    }

    /// The first state saying `want`, and when it came.
    async fn state_until(&mut self, want: bool) -> Instant {
        while self.state().await.0 != want {}
        Instant::now()
    }

    /// Everything seen during `d`.
    async fn during(&mut self, d: Duration) -> Vec<Seen> {
        let end = Instant::now() + d;
        let mut out = Vec::new();
        while let Ok(Some(m)) = tokio::time::timeout_at(end, self.sub.recv()).await {
            if m.topic != "lab/lamp/set" {
                out.push(seen(&m));
            }
        }
        out
    }

    /// Publishes a set and returns when it was sent.
    async fn set(&self, on: bool) -> Instant {
        let sent = Instant::now();
        self.client
            .publish("lab/lamp/set", format!(r#"{{"on": {on}}}"#), 1, WAIT)
            .await
            .expect("the broker acks the set");
        sent
    }
}

fn seen(m: &Message) -> Seen {
    let text = String::from_utf8_lossy(&m.payload).into_owned();
    match m.topic.as_str() {
        "lab/lamp/status" => Seen::Status(text),
        "lab/lamp/state" => {
            let v: serde_json::Value = serde_json::from_str(&text).expect("state is JSON");
            Seen::State {
                on: v["on"].as_bool().expect("on"),
                seq: v["seq"].as_u64().expect("seq"),
            }
        }
        other => panic!("unexpected topic {other}"),
    }
}

async fn ctl(addr: SocketAddr, line: &str) -> Result<(), ControlError> {
    control::send(addr, &ControlCommand::parse(line).expect("a request")).await
}

fn states(seen: &[Seen]) -> Vec<bool> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::State { on, .. } => Some(*on),
            Seen::Status(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_is_followed_by_its_state_after_pull_in() {
    let mut r = rig("pull_in_ms = 50\nheartbeat_s = 5.0").await;
    assert_eq!(
        r.relays,
        vec![ServedRelay {
            device: "lamp".into(),
            prefix: "lab/lamp".into(),
            broker: r.broker.url.clone(),
        }]
    );
    let sent = r.observer.set(true).await;
    let at = r.observer.state_until(true).await;
    assert!(at - sent >= Duration::from_millis(50), "{:?}", at - sent);
    r.observer.set(false).await;
    r.observer.state_until(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_off_fires_the_will_then_silence_and_clearing_brings_it_back_off() {
    let mut r = rig("heartbeat_s = 0.1").await;
    r.observer.set(true).await;
    r.observer.state_until(true).await;
    ctl(r.control, "fault lamp power_off").await.unwrap();
    assert_eq!(r.observer.status().await, "offline");
    assert_eq!(r.lamp.faults(), vec![FaultSpec::now(Fault::PowerOff)]);
    // After the will nothing: no heartbeat, no answer to a set.
    r.observer.set(true).await;
    let silent = r.observer.during(Duration::from_millis(500)).await;
    assert!(
        silent.is_empty(),
        "a powered-off relay is silent: {silent:?}"
    );
    ctl(r.control, "clear lamp power_off").await.unwrap();
    assert_eq!(r.observer.status().await, "online");
    assert_eq!(r.observer.state().await, (false, 1), "a fresh boot, off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_stays_connected_silent_and_deaf_until_cleared() {
    let mut r = rig("heartbeat_s = 0.1").await;
    r.observer.state_until(false).await; // heartbeats flow
    ctl(r.control, "fault lamp zombie").await.unwrap();
    r.observer.during(Duration::from_millis(300)).await; // what was in flight
    r.observer.set(true).await;
    let silent = r.observer.during(Duration::from_millis(500)).await;
    assert!(silent.is_empty(), "no will, no state: {silent:?}");
    ctl(r.control, "clear lamp zombie").await.unwrap();
    assert!(
        !r.observer.state().await.0,
        "the set it ignored stays ignored"
    );
    r.observer.set(true).await;
    r.observer.state_until(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brownout_keeps_the_contact_open_until_cleared() {
    let mut r = rig("pull_in_ms = 20\nheartbeat_s = 5.0").await;
    ctl(r.control, "fault lamp brownout").await.unwrap();
    r.observer.set(true).await;
    assert!(!r.observer.state().await.0, "confirmed off");
    ctl(r.control, "clear lamp brownout").await.unwrap();
    assert!(r.observer.state().await.0, "follows the output again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_contacts_report_the_opposite() {
    let mut r = rig("heartbeat_s = 5.0").await;
    ctl(r.control, "fault lamp swapped_contacts").await.unwrap();
    assert!(r.observer.state().await.0, "off, reported on");
    r.observer.set(true).await;
    assert!(!r.observer.state().await.0, "on, reported off");
    ctl(r.control, "clear lamp swapped_contacts").await.unwrap();
    assert!(r.observer.state().await.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_delays_the_set_taking_effect_until_cleared() {
    let mut r = rig("pull_in_ms = 10\nheartbeat_s = 5.0").await;
    ctl(r.control, "fault lamp latency_ms ms=600")
        .await
        .unwrap();
    let sent = r.observer.set(true).await;
    let at = r.observer.state_until(true).await;
    assert!(at - sent >= Duration::from_millis(610), "{:?}", at - sent);
    ctl(r.control, "clear lamp latency_ms").await.unwrap();
    let sent = r.observer.set(false).await;
    let at = r.observer.state_until(false).await;
    assert!(at - sent < Duration::from_millis(600), "{:?}", at - sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reboot_goes_away_for_down_ms_and_comes_back_off_without_the_pending_set() {
    let mut r = rig("pull_in_ms = 10\nheartbeat_s = 5.0").await;
    r.observer.set(true).await;
    r.observer.state_until(true).await;
    ctl(r.control, "fault lamp latency_ms ms=800")
        .await
        .unwrap();
    r.observer.set(true).await; // pending when the reboot strikes, due after it is back
    let struck = Instant::now();
    ctl(r.control, "fault lamp reboot down_ms=300")
        .await
        .unwrap();
    assert_eq!(r.observer.status().await, "offline");
    assert_eq!(r.observer.status().await, "online");
    assert!(
        struck.elapsed() >= Duration::from_millis(300),
        "down for down_ms"
    );
    assert_eq!(
        r.observer.state().await,
        (false, 1),
        "back with the output off"
    );
    let after = r.observer.during(Duration::from_millis(900)).await;
    assert!(
        !states(&after).contains(&true),
        "the pending set was lost: {after:?}"
    );
    assert_eq!(
        r.lamp.faults(),
        vec![FaultSpec::now(Fault::LatencyMs { ms: 800 })],
        "a reboot is spent once over"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_rate_one_loses_every_set_and_zero_none() {
    let mut r = rig("pull_in_ms = 10\nheartbeat_s = 0.1").await;
    ctl(r.control, "fault lamp drop_rate p=1.0").await.unwrap();
    for _ in 0..3 {
        r.observer.set(true).await;
    }
    let seen = states(&r.observer.during(Duration::from_millis(500)).await);
    assert!(seen.len() >= 2, "heartbeats go on: {seen:?}");
    assert!(!seen.contains(&true), "every set was lost: {seen:?}");
    ctl(r.control, "fault lamp drop_rate p=0").await.unwrap();
    r.observer.set(true).await;
    r.observer.state_until(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_ms_waits_for_the_first_set() {
    let sim =
        "pull_in_ms = 10\nheartbeat_s = 0.1\nfaults = [{ kind = \"power_off\", after_ms = 300 }]";
    let mut r = rig(sim).await;
    let before = r.observer.during(Duration::from_millis(600)).await;
    assert!(
        !before.contains(&Seen::Status("offline".into())),
        "no set yet, no power_off: {before:?}"
    );
    let sent = r.observer.set(true).await;
    r.observer.state_until(true).await;
    assert_eq!(r.observer.status().await, "offline");
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "{:?}",
        sent.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_without_mqtt_meaning_are_refused_by_the_control() {
    let r = rig("").await;
    for (line, kind) in [
        ("fault lamp nak", "nak"),
        ("fault lamp crc_error", "crc_error"),
        ("fault lamp stall at_mm=3", "stall"),
    ] {
        let Err(ControlError::Refused(msg)) = ctl(r.control, line).await else {
            panic!("{line} was accepted")
        };
        assert!(
            msg.contains("\"lamp\"") && msg.contains(kind) && msg.contains("mqtt-relay"),
            "{msg}"
        );
    }
    let Err(ControlError::Refused(msg)) = ctl(r.control, "fault lamp nak").await else {
        panic!("nak accepted")
    };
    assert!(
        msg.contains("fault.kind") && msg.contains("zombie"),
        "{msg}"
    );
    let Err(ControlError::Refused(msg)) = ctl(r.control, "fault lamp drop_rate p=2").await else {
        panic!("p=2 accepted")
    };
    assert!(msg.contains("fault.p"), "{msg}");
    assert!(r.lamp.faults().is_empty());
}
