//! The `mqtt-relay` simulated device (DESIGN §3), an MQTT client of its own.
//!
//! Subscribes `{prefix}/set` (`{"on": bool}`); publishes `{prefix}/state`
//! `{"on": bool, "seq": n}` (QoS 1) on connect, `pull_in_ms` after every set, and every
//! `heartbeat_s`;
//! `{prefix}/status` is retained `online`, with the last will `offline`.
//!
//! Faults it honours: `power_off` (drops the connection without DISCONNECT: the will fires, then
//! silence; terminal for this instance), `zombie` (stays connected, publishes nothing, ignores
//! sets), `brownout` (the state stays off), `swapped_contacts` (the state is reported inverted),
//! `latency_ms` (added before a set takes effect). Others are refused by
//! [`MqttRelay::set_faults`]; `after_ms` scheduling is the caller's (the simulator's) job.

use std::time::Duration;

use closedloop_sim::{Fault, MqttRelayOptions};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::{BrokerConfig, Link, MqttBroker, Will};

/// The faults currently active on a relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Faults {
    power_off: bool,
    zombie: bool,
    brownout: bool,
    swapped: bool,
    latency: Duration,
}

/// A running `mqtt-relay`. Dropping it stops the device abruptly: the connection closes without
/// DISCONNECT, so the broker publishes the will.
pub struct MqttRelay {
    faults: watch::Sender<Faults>,
    task: JoinHandle<()>,
}

impl Drop for MqttRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MqttRelay {
    /// Connects to `broker` (`mqtt://host:port`) as `client_id` and starts behaving.
    pub fn start(
        broker: &str,
        client_id: &str,
        options: &MqttRelayOptions,
        faults: &[Fault],
    ) -> Result<MqttRelay, crate::Error> {
        let initial =
            to_faults(faults).map_err(|f| crate::Error::UnsupportedFault(f.kind().to_string()))?;
        let prefix = options.prefix.trim_end_matches('/').to_string();
        let mut config = BrokerConfig::new(broker, client_id);
        config.will = Some(Will {
            topic: format!("{prefix}/status"),
            payload: "offline".into(),
            retain: true,
        });
        config.keep_alive = Duration::from_secs(5);
        let mqtt = MqttBroker::connect(config)?;
        let (tx, rx) = watch::channel(initial);
        let heartbeat = Duration::from_secs_f64(options.heartbeat_s.max(0.01));
        let pull_in = Duration::from_millis(options.pull_in_ms);
        let task = tokio::spawn(run(mqtt, prefix, heartbeat, pull_in, rx));
        Ok(MqttRelay { faults: tx, task })
    }

    /// Replaces the active faults. Refuses (returning it) a fault this model cannot honour.
    pub fn set_faults(&self, faults: &[Fault]) -> Result<(), Fault> {
        let f = to_faults(faults)?;
        self.faults.send_replace(f);
        Ok(())
    }
}

fn to_faults(list: &[Fault]) -> Result<Faults, Fault> {
    let mut f = Faults::default();
    for fault in list {
        match fault {
            Fault::PowerOff => f.power_off = true,
            Fault::Zombie => f.zombie = true,
            Fault::Brownout => f.brownout = true,
            Fault::SwappedContacts => f.swapped = true,
            Fault::LatencyMs { ms } => f.latency = Duration::from_millis(*ms),
            other => return Err(*other),
        }
    }
    Ok(f)
}

/// The `{"on": bool}` of a set message, or `None` for anything else.
fn parse_set(payload: &[u8]) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    v.get("on")?.as_bool()
}

async fn run(
    mqtt: MqttBroker,
    prefix: String,
    heartbeat: Duration,
    pull_in: Duration,
    mut faults: watch::Receiver<Faults>,
) {
    let state_topic = format!("{prefix}/state");
    let status_topic = format!("{prefix}/status");
    let mut sets = mqtt.subscribe(&format!("{prefix}/set"));
    let mut link = mqtt.link();
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut on = false;
    let mut seq: u64 = 0;
    // A set waiting out `latency + pull_in`: when it takes effect and the commanded state.
    let mut pending: Option<(Instant, bool)> = None;
    loop {
        let f = *faults.borrow_and_update();
        if f.power_off {
            mqtt.abort();
            return;
        }
        let due = pending.map(|(at, _)| at);
        let publish_state = tokio::select! {
            changed = link.changed() => {
                if changed.is_err() {
                    return;
                }
                // On every (re)connect: the retained `online`, then the current state.
                let up = *link.borrow_and_update() == Link::Connected;
                if up && !f.zombie {
                    let _ = mqtt.send(&status_topic, "online".into(), 1, None, true).await;
                }
                up
            }
            changed = faults.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
            msg = sets.recv() => {
                let Some(msg) = msg else { return };
                if let (Some(cmd), false) = (parse_set(&msg.payload), f.zombie) {
                    pending = Some((Instant::now() + f.latency + pull_in, cmd));
                }
                false
            }
            () = sleep_until(due) => {
                if let Some((_, cmd)) = pending.take() {
                    on = cmd && !f.brownout;
                }
                true
            }
            _ = tick.tick() => true,
        };
        if publish_state && !f.zombie && *link.borrow() == Link::Connected {
            seq += 1;
            let reported = on != f.swapped;
            let body = format!(r#"{{"on": {reported}, "seq": {seq}}}"#);
            let _ = mqtt.send(&state_topic, body.into(), 1, None, false).await;
        }
    }
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

    #[test]
    fn only_relay_faults_are_honoured() {
        let f = to_faults(&[Fault::Zombie, Fault::LatencyMs { ms: 30 }]).expect("relay faults");
        assert!(f.zombie && !f.power_off && !f.brownout);
        assert_eq!(f.latency, Duration::from_millis(30));
        assert_eq!(to_faults(&[Fault::Nak]), Err(Fault::Nak));
    }
}
