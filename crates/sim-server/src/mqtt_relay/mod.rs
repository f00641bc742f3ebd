//! The `mqtt-relay` simulated device (docs/simulator.md), an MQTT client of its own.
//!
//! Subscribes `{prefix}/set` (`{"on": bool}`); publishes `{prefix}/state`
//! `{"on": bool, "seq": n}` (QoS 1) on connect, `pull_in_ms` after every set, whenever the
//! reported state changes, and every `heartbeat_s`; `{prefix}/status` is retained `online`, with
//! the last will `offline`. `seq` counts the state messages since the device last booted.
//!
//! # Faults
//! Each may carry `after_ms`, counted exactly as in `closedloop_sim`: from the first set the relay
//! takes, or from the injection when it has already taken one. "Takes" excludes a set a zombie
//! ignores or `drop_rate` loses.
//!
//! | fault | on the wire |
//! |---|---|
//! | `power_off` | the connection drops without DISCONNECT (the broker publishes the will `offline`), then nothing; output off. Cleared: connects as a fresh client, output off, retained `online`, state |
//! | `reboot {down_ms}` | as `power_off`, back by itself after `down_ms` (or when cleared); sets still waiting out `latency_ms` are lost |
//! | `zombie` | stays connected, publishes nothing, ignores sets. Cleared: publishes its state at once |
//! | `brownout` | the contact opens at once and stays open; cleared, it follows the output after `pull_in_ms` |
//! | `swapped_contacts` | the state is reported inverted |
//! | `latency_ms {ms}` | each set takes effect `ms` after it arrived (at most [`MAX_DELAYED`] waiting) |
//! | `drop_rate {p}` | each set is ignored with probability `p` (a seeded, reproducible draw) |
//!
//! `nak`, `crc_error` and `stall` have no meaning for an MQTT relay and are refused ([`refusal`]).
//!
//! # Structure
//! - `core`: the device as a pure state machine: events in (a set arrived, the connection came
//!   up, a fault was injected or cleared, time passed), `Effect`s out (cut the connection, connect
//!   afresh, publish); it does no I/O and reads no clock. When faults strike is kept by
//!   [`closedloop_sim::Schedule`], the simulator's own scheduler.
//! - `task`: owns a restartable [`MqttBroker`](closedloop_mqtt::MqttBroker) connection and
//!   turns effects into I/O.
//! - here: the handle, [`MqttRelay`], whose methods run the core under its lock and wake the
//!   task; and the faults the model refuses.

mod core;
mod task;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use closedloop_mqtt::{BrokerConfig, Will, parse_broker_url};
use closedloop_sim::{
    FaultConfig, FaultKind, FaultSpec, MqttRelayOptions, SimConfig, SimConfigError,
};
use thiserror::Error;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use self::core::{Core, Effect};
use self::task::Topics;

/// Sets waiting out `latency_ms` at most; one more makes the oldest lost, as a device's full
/// input buffer would.
pub const MAX_DELAYED: usize = 64;

/// Why an `mqtt-relay` cannot suffer a fault of `kind`, or `None` when it can.
///
/// Kept next to the model so that the plant-file check, the run-time control and the model itself
/// refuse the same kinds with the same reason.
pub fn refusal(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::Nak => Some(
            "MQTT has no negative answer to a set: the broker acknowledges the publish, never the \
             device; use `zombie` or `drop_rate` for a relay that ignores sets",
        ),
        FaultKind::CrcError => {
            Some("MQTT frames carry no CRC; it applies to register-mapped models")
        }
        FaultKind::Stall => Some("only a stepper stalls"),
        _ => None,
    }
}

/// Checks a plant file's `faults = [...]` (already validated by `closedloop_sim`) for kinds the
/// relay refuses; the error names `faults[i].kind`.
pub fn check_faults(faults: &[FaultSpec]) -> Result<(), SimConfigError> {
    for (i, spec) in faults.iter().enumerate() {
        check_kind(spec.fault.kind(), &format!("faults[{i}]"))?;
    }
    Ok(())
}

fn check_kind(kind: FaultKind, prefix: &str) -> Result<(), SimConfigError> {
    match refusal(kind) {
        None => Ok(()),
        Some(why) => Err(SimConfigError::FaultNotForModel {
            key: format!("{prefix}.kind"),
            kind,
            model: "mqtt-relay".into(),
            why: why.into(),
        }),
    }
}

/// Why a relay did not start, or a fault was not injected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The broker URL cannot be used (the MQTT driver's own check).
    #[error(transparent)]
    Broker(#[from] closedloop_mqtt::Error),
    /// A simulator fault the `mqtt-relay` model cannot honour ([`refusal`] says why).
    #[error("fault `{0}` does not apply to mqtt-relay")]
    UnsupportedFault(String),
}

/// Where a relay stands with its broker: what `closedloop sim` waits for before announcing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Connecting, or reconnecting after the broker went away.
    Connecting,
    /// Connected and subscribed to `{prefix}/set`; `online` published unless it is a zombie.
    Connected,
    /// Off the broker on purpose: `power_off`, or a `reboot` still down.
    Off,
}

/// A running `mqtt-relay`. Dropping it stops the device abruptly: the connection closes without
/// DISCONNECT, so the broker publishes the will.
pub struct MqttRelay {
    shared: Arc<Mutex<Shared>>,
    /// Wakes the task after the handle changed the core (new effects, new deadlines).
    wake: Arc<Notify>,
    presence: watch::Receiver<Presence>,
    prefix: String,
    task: JoinHandle<()>,
}

/// The core and the effects it produced that the task has not carried out yet. Never held across
/// `.await`. `outbox` stays small: the task drains it every time it wakes, and only the handle's
/// fault requests add to it in between.
struct Shared {
    core: Core,
    outbox: Vec<Effect>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for MqttRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for MqttRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqttRelay")
            .field("prefix", &self.prefix)
            .field("presence", &*self.presence.borrow())
            .finish_non_exhaustive()
    }
}

impl MqttRelay {
    /// Starts the device with `faults` (as validated from a plant file) and connects to `broker`
    /// (`mqtt://host:port`) as `client_id`, in the background; watch [`MqttRelay::presence`].
    /// `seed` makes `drop_rate` reproducible. Must be called inside a tokio runtime.
    ///
    /// Refuses a malformed broker URL and a fault the model cannot honour
    /// ([`RelayError::UnsupportedFault`]).
    pub fn start(
        broker: &str,
        client_id: &str,
        options: &MqttRelayOptions,
        faults: &[FaultSpec],
        seed: u64,
    ) -> Result<MqttRelay, RelayError> {
        if let Some(spec) = faults.iter().find(|s| refusal(s.fault.kind()).is_some()) {
            return Err(RelayError::UnsupportedFault(spec.fault.kind().to_string()));
        }
        parse_broker_url(broker)?;
        let prefix = options.prefix.trim_end_matches('/').to_string();
        let topics = Topics {
            set: format!("{prefix}/set"),
            state: format!("{prefix}/state"),
            status: format!("{prefix}/status"),
        };
        let mut config = BrokerConfig::new(broker, client_id);
        config.will = Some(Will {
            topic: topics.status.clone(),
            payload: "offline".into(),
            retain: true,
        });
        config.keep_alive = Duration::from_secs(5);
        let now = Instant::now();
        let mut core = Core::new(Duration::from_millis(options.pull_in_ms), seed, now);
        let outbox = core.boot(faults, now);
        let initial = if outbox.contains(&Effect::Connect) {
            Presence::Connecting
        } else {
            Presence::Off // a power_off or reboot given from the start
        };
        let shared = Arc::new(Mutex::new(Shared { core, outbox }));
        let wake = Arc::new(Notify::new());
        let (presence_tx, presence) = watch::channel(initial);
        let heartbeat = Duration::from_secs_f64(options.heartbeat_s.max(0.01));
        let task = tokio::spawn(task::run(
            shared.clone(),
            wake.clone(),
            config,
            topics,
            heartbeat,
            presence_tx,
        ));
        Ok(MqttRelay {
            shared,
            wake,
            presence,
            prefix,
            task,
        })
    }

    /// The topic prefix (`{prefix}/set`, `/state`, `/status`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Where the relay stands with its broker, updated as it connects, is cut off and returns.
    pub fn presence(&self) -> watch::Receiver<Presence> {
        self.presence.clone()
    }

    /// Injects a fault now, replacing any fault of its kind; `after_ms` counts as in the module
    /// doc. Refuses a kind the model cannot honour.
    pub fn inject(&self, spec: FaultSpec) -> Result<(), RelayError> {
        if refusal(spec.fault.kind()).is_some() {
            return Err(RelayError::UnsupportedFault(spec.fault.kind().to_string()));
        }
        self.with(|core, now| core.inject(spec, now));
        Ok(())
    }

    /// Checks a fault written as in the plant file (the simulator control's input) exactly as
    /// `closedloop_sim` checks an `mqtt-relay` table, keys prefixed `fault.`, and injects it.
    pub fn inject_config(&self, fault: &FaultConfig) -> Result<(), SimConfigError> {
        let table = SimConfig {
            model: "mqtt-relay".into(),
            prefix: Some(self.prefix.clone()),
            faults: vec![fault.clone()],
            ..SimConfig::default()
        };
        let valid = table.validate().map_err(rekey)?;
        for spec in valid.faults {
            check_kind(spec.fault.kind(), "fault")?;
            self.with(|core, now| core.inject(spec, now));
        }
        Ok(())
    }

    /// Removes the fault of `kind`, if any. Clearing a `power_off` or a `reboot` still down brings
    /// the device back as after a boot.
    pub fn clear(&self, kind: FaultKind) {
        self.with(|core, now| core.clear(kind, now));
    }

    /// Removes every fault.
    pub fn clear_all(&self) {
        self.with(|core, now| {
            let mut fx = Vec::new();
            for kind in FaultKind::ALL {
                fx.extend(core.clear(kind, now));
            }
            fx
        });
    }

    /// The faults pending or in force (a finished reboot is gone).
    pub fn faults(&self) -> Vec<FaultSpec> {
        self.with(|core, now| core.advance(now));
        lock(&self.shared).core.specs()
    }

    /// Runs `f` on the core now, queues its effects for the task and wakes it.
    fn with(&self, f: impl FnOnce(&mut Core, Instant) -> Vec<Effect>) {
        {
            let mut s = lock(&self.shared);
            let fx = f(&mut s.core, Instant::now());
            s.outbox.extend(fx);
        }
        self.wake.notify_one();
    }
}

/// Renames `faults[0]` to `fault` in a check of one injected fault, as `SimDevice` names it.
fn rekey(mut e: SimConfigError) -> SimConfigError {
    let rename = |key: &mut String| {
        if let Some(rest) = key.strip_prefix("faults[0]") {
            *key = format!("fault{rest}");
        }
    };
    match &mut e {
        SimConfigError::Conflict { key, other, .. } => {
            rename(key);
            rename(other);
        }
        SimConfigError::OutOfRange { key, .. }
        | SimConfigError::Missing { key, .. }
        | SimConfigError::UnknownFaultKind { key, .. }
        | SimConfigError::FaultNotForModel { key, .. }
        | SimConfigError::FaultOptionNotAllowed { key, .. } => rename(key),
        _ => {}
    }
    e
}

#[cfg(test)]
mod tests {
    use closedloop_sim::Fault;

    use super::*;

    #[test]
    fn faults_without_mqtt_meaning_are_refused_with_the_key() {
        for kind in [FaultKind::Nak, FaultKind::CrcError, FaultKind::Stall] {
            assert!(refusal(kind).is_some(), "{kind}");
        }
        let ok = [FaultSpec::now(Fault::Zombie), FaultSpec::now(Fault::Nak)];
        let e = check_faults(&ok).unwrap_err();
        assert_eq!(e.key(), "faults[1].kind");
        assert!(e.to_string().contains("nak") && e.to_string().contains("mqtt-relay"));
    }

    #[test]
    fn injected_keys_are_named_like_sim_devices() {
        let e = rekey(SimConfigError::OutOfRange {
            key: "faults[0].p".into(),
            value: "2".into(),
            expected: "a probability".into(),
        });
        assert_eq!(e.key(), "fault.p");
    }
}
