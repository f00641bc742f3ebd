//! The `mqtt-relay` simulated device (DESIGN §3), an MQTT client of its own.
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
//! `Core` is the device as a pure state machine: events in (a set arrived, the link came up, a
//! fault was injected or cleared, time passed), `Effect`s out (cut the connection, connect
//! afresh, publish); it does no I/O and reads no clock. The task behind [`MqttRelay`] owns a
//! restartable [`MqttBroker`] connection and turns effects into I/O; the handle's methods run the
//! core under its lock and wake the task.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use closedloop_sim::{
    Fault, FaultConfig, FaultKind, FaultSpec, MqttRelayOptions, SimConfig, SimConfigError,
};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::{BrokerConfig, Link, MqttBroker, Subscription, Will, parse_broker_url};

/// Sets waiting out `latency_ms` at most; one more makes the oldest lost, as a device's full
/// input buffer would.
pub const MAX_DELAYED: usize = 64;
/// How long one publish waits for its PUBACK before the relay goes on without it.
const PUBLISH_WAIT: Duration = Duration::from_secs(2);

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
    /// ([`crate::Error::UnsupportedFault`]).
    pub fn start(
        broker: &str,
        client_id: &str,
        options: &MqttRelayOptions,
        faults: &[FaultSpec],
        seed: u64,
    ) -> Result<MqttRelay, crate::Error> {
        if let Some(spec) = faults.iter().find(|s| refusal(s.fault.kind()).is_some()) {
            return Err(crate::Error::UnsupportedFault(
                spec.fault.kind().to_string(),
            ));
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
        let task = tokio::spawn(run(
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
    pub fn inject(&self, spec: FaultSpec) -> Result<(), crate::Error> {
        if refusal(spec.fault.kind()).is_some() {
            return Err(crate::Error::UnsupportedFault(
                spec.fault.kind().to_string(),
            ));
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

/// What the task must do for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Drop the broker connection without DISCONNECT: the broker publishes the will.
    Cut,
    /// Connect afresh (clean start), subscribed to `{prefix}/set`.
    Connect,
    /// Publish the retained `online`.
    Online,
    /// Publish `{"on": on, "seq": seq}` on the state topic.
    State { on: bool, seq: u64 },
}

/// Where one fault stands in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Has `after_ms` and waits for the first set to start counting.
    Waiting,
    /// Strikes at this instant.
    Due(Instant),
    /// Struck at this instant and in force.
    Struck(Instant),
}

/// A fault event due: the fault at this index strikes, or the reboot at this index is over.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Due {
    Strike(usize),
    Recover(usize),
}

/// The relay as a pure state machine: every method takes the instant it happens at.
///
/// # Invariants
/// - At most one fault per kind; a fault is `Waiting` only while no set has been taken.
/// - `down` is true while the device must hold no connection (power_off or a reboot struck, or
///   not booted yet); `linked` (the broker acknowledged the current connection) implies `!down`.
/// - The contact is `from` before `switch_at` and `to` from then on; `to` is the drive (output
///   on and no brownout) as of its last change.
#[derive(Debug)]
struct Core {
    pull_in: Duration,
    /// The commanded output: what the last set that took effect asked for.
    output: bool,
    from: bool,
    to: bool,
    switch_at: Instant,
    /// Sets taken but waiting out `latency_ms`, with the instant each takes effect.
    delayed: VecDeque<(Instant, bool)>,
    /// A state message owed `pull_in` after a set (or at once, after a zombie wakes up).
    confirm_at: Option<Instant>,
    /// The state last published on this boot: a different one is published on change.
    reported: Option<bool>,
    seq: u64,
    down: bool,
    linked: bool,
    /// `online` was published on the current connection.
    announced: bool,
    faults: Vec<(FaultSpec, Phase)>,
    first_set: Option<Instant>,
    /// xorshift64 state for `drop_rate`; never 0.
    rng: u64,
}

impl Core {
    fn new(pull_in: Duration, seed: u64, now: Instant) -> Core {
        Core {
            pull_in,
            output: false,
            from: false,
            to: false,
            switch_at: now,
            delayed: VecDeque::new(),
            confirm_at: None,
            reported: None,
            seq: 0,
            down: true,
            linked: false,
            announced: false,
            faults: Vec::new(),
            first_set: None,
            rng: if seed == 0 { 0x5EED } else { seed },
        }
    }

    /// Powers up with the plant file's faults; connects unless one holds it off.
    fn boot(&mut self, faults: &[FaultSpec], now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        for spec in faults {
            fx.extend(self.inject(*spec, now));
        }
        self.come_back(now, &mut fx);
        fx
    }

    fn struck(&self, which: impl Fn(&Fault) -> bool) -> bool {
        self.faults
            .iter()
            .any(|(s, p)| matches!(p, Phase::Struck(_)) && which(&s.fault))
    }

    fn zombie(&self) -> bool {
        self.struck(|f| matches!(f, Fault::Zombie))
    }

    fn brownout(&self) -> bool {
        self.struck(|f| matches!(f, Fault::Brownout))
    }

    fn held_off(&self) -> bool {
        self.struck(|f| matches!(f, Fault::PowerOff | Fault::Reboot { .. }))
    }

    fn latency(&self) -> Duration {
        self.struck_value(|f| match f {
            Fault::LatencyMs { ms } => Some(Duration::from_millis(*ms)),
            _ => None,
        })
        .unwrap_or_default()
    }

    fn drop_p(&self) -> f64 {
        self.struck_value(|f| match f {
            Fault::DropRate { p } => Some(*p),
            _ => None,
        })
        .unwrap_or(0.0)
    }

    fn struck_value<T>(&self, value: impl Fn(&Fault) -> Option<T>) -> Option<T> {
        self.faults
            .iter()
            .filter(|(_, p)| matches!(p, Phase::Struck(_)))
            .find_map(|(s, _)| value(&s.fault))
    }

    /// A uniform draw in `[0, 1)` (xorshift64).
    fn draw(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn contact(&self, t: Instant) -> bool {
        if t >= self.switch_at {
            self.to
        } else {
            self.from
        }
    }

    /// What the state topic says at `t`.
    fn reported_at(&self, t: Instant) -> bool {
        self.contact(t) != self.struck(|f| matches!(f, Fault::SwappedContacts))
    }

    /// Re-aims the contact at the drive: at once (power gone, brownout) or after `pull_in`.
    fn redrive(&mut self, now: Instant, immediate: bool) {
        let drive = self.output && !self.brownout();
        if immediate {
            (self.from, self.to, self.switch_at) = (drive, drive, now);
        } else if drive != self.to {
            self.from = self.contact(now);
            self.to = drive;
            self.switch_at = now.checked_add(self.pull_in).unwrap_or(now);
        }
    }

    /// A set takes effect at `t`.
    fn apply(&mut self, t: Instant, on: bool) {
        self.output = on;
        self.redrive(t, false);
        self.confirm_at = Some(t.checked_add(self.pull_in).unwrap_or(t));
    }

    fn outputs_off(&mut self, now: Instant) {
        self.output = false;
        self.redrive(now, true);
        self.delayed.clear();
        self.confirm_at = None;
    }

    fn go_down(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        self.outputs_off(now);
        if !self.down {
            self.down = true;
            self.linked = false;
            self.announced = false;
            fx.push(Effect::Cut);
        }
    }

    /// Boots afresh (output off, `seq` from 1) once nothing holds the device off.
    fn come_back(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        if self.down && !self.held_off() {
            self.down = false;
            self.outputs_off(now);
            self.seq = 0;
            self.reported = None;
            fx.push(Effect::Connect);
        }
    }

    /// The earliest fault event, due or not.
    fn next_event(&self) -> Option<(Instant, Due)> {
        let mut best: Option<(Instant, Due)> = None;
        for (i, (spec, phase)) in self.faults.iter().enumerate() {
            let event = match (*phase, spec.fault) {
                (Phase::Due(t), _) => Some((t, Due::Strike(i))),
                (Phase::Struck(t), Fault::Reboot { down_ms }) => t
                    .checked_add(Duration::from_millis(down_ms))
                    .map(|back| (back, Due::Recover(i))),
                _ => None,
            };
            if let Some((t, due)) = event
                && best.is_none_or(|(b, _)| t < b)
            {
                best = Some((t, due));
            }
        }
        best
    }

    /// When the task must call [`Core::advance`] next, if ever.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        [
            self.next_event().map(|(t, _)| t),
            self.delayed.front().map(|(t, _)| *t),
            self.confirm_at,
            (self.switch_at > now).then_some(self.switch_at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Lets every fault event and delayed set due by `now` happen, each at its own instant.
    fn run_until(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        loop {
            let fault = self.next_event().filter(|(t, _)| *t <= now);
            let set = self.delayed.front().copied().filter(|(t, _)| *t <= now);
            match (fault, set) {
                (fault, Some((ts, on))) if fault.is_none_or(|(tf, _)| ts <= tf) => {
                    self.delayed.pop_front();
                    self.apply(ts, on);
                }
                (Some((t, due)), _) => self.fault_event(t, due, fx),
                _ => return,
            }
        }
    }

    fn fault_event(&mut self, t: Instant, due: Due, fx: &mut Vec<Effect>) {
        match due {
            Due::Recover(i) => {
                self.faults.remove(i);
                self.come_back(t, fx);
            }
            Due::Strike(i) => {
                let Some((spec, phase)) = self.faults.get_mut(i) else {
                    return;
                };
                *phase = Phase::Struck(t);
                let fault = spec.fault;
                match fault {
                    Fault::PowerOff | Fault::Reboot { .. } => self.go_down(t, fx),
                    Fault::Brownout => self.redrive(t, true),
                    _ => {}
                }
            }
        }
    }

    /// Publishes the state if one is owed or it changed, unless the device cannot talk.
    fn publish_if_due(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        let owed = self.confirm_at.is_some_and(|t| t <= now);
        if owed {
            self.confirm_at = None;
        }
        if !self.linked || self.zombie() {
            return;
        }
        let on = self.reported_at(now);
        if owed || self.reported != Some(on) {
            self.publish(on, fx);
        }
    }

    fn publish(&mut self, on: bool, fx: &mut Vec<Effect>) {
        self.seq += 1;
        self.reported = Some(on);
        fx.push(Effect::State { on, seq: self.seq });
    }

    /// Time passed.
    fn advance(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The heartbeat period elapsed: the state, unless one was just published.
    fn heartbeat(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = self.advance(now);
        let published = fx.iter().any(|e| matches!(e, Effect::State { .. }));
        if self.linked && !self.zombie() && !published {
            let on = self.reported_at(now);
            self.publish(on, &mut fx);
        }
        fx
    }

    /// A valid `{"on": bool}` arrived on `{prefix}/set`.
    fn on_set(&mut self, on: bool, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        let p = self.drop_p();
        let lost = p > 0.0 && self.draw() < p;
        if !(self.down || self.zombie() || lost) {
            let latency = self.latency();
            if latency.is_zero() {
                self.apply(now, on);
            } else {
                if self.delayed.len() >= MAX_DELAYED {
                    self.delayed.pop_front();
                }
                let at = now.checked_add(latency).unwrap_or(now);
                self.delayed.push_back((at, on));
            }
            if self.first_set.is_none() {
                self.first_set = Some(now);
                for (spec, phase) in &mut self.faults {
                    if let (Phase::Waiting, Some(ms)) = (*phase, spec.after_ms) {
                        *phase = due_after(now, ms);
                    }
                }
            }
        }
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The broker acknowledged the current connection (CONNACK; the subscription is on its way).
    fn on_link_up(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        if self.down {
            return fx; // a fault struck meanwhile: the cut is on its way
        }
        self.linked = true;
        self.announced = false;
        if !self.zombie() {
            fx.push(Effect::Online);
            self.announced = true;
            self.confirm_at = Some(now);
        }
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The connection was lost (the broker client reconnects by itself).
    fn on_link_down(&mut self) {
        self.linked = false;
        self.announced = false;
    }

    /// Adds (or replaces) a fault at `now`.
    fn inject(&mut self, spec: FaultSpec, now: Instant) -> Vec<Effect> {
        let mut fx = self.clear(spec.fault.kind(), now);
        let phase = match (spec.after_ms, self.first_set) {
            (None, _) => Phase::Due(now),
            (Some(ms), Some(_)) => due_after(now, ms),
            (Some(_), None) => Phase::Waiting,
        };
        self.faults.push((spec, phase));
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// Removes the fault of `kind` at `now`, undoing what it holds.
    fn clear(&mut self, kind: FaultKind, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        if let Some(i) = self.faults.iter().position(|(s, _)| s.fault.kind() == kind) {
            let (spec, phase) = self.faults.remove(i);
            if matches!(phase, Phase::Struck(_)) {
                match spec.fault {
                    Fault::PowerOff | Fault::Reboot { .. } => self.come_back(now, &mut fx),
                    Fault::Brownout => self.redrive(now, false),
                    Fault::Zombie if self.linked => {
                        if !self.announced {
                            fx.push(Effect::Online);
                            self.announced = true;
                        }
                        self.confirm_at = Some(now);
                    }
                    _ => {}
                }
            }
        }
        self.publish_if_due(now, &mut fx);
        fx
    }

    fn specs(&self) -> Vec<FaultSpec> {
        self.faults.iter().map(|(s, _)| *s).collect()
    }
}

/// `Due(now + ms)`, or `Waiting` forever when the instant cannot be represented.
fn due_after(now: Instant, ms: u64) -> Phase {
    now.checked_add(Duration::from_millis(ms))
        .map_or(Phase::Waiting, Phase::Due)
}

/// The `{"on": bool}` of a set message, or `None` for anything else.
fn parse_set(payload: &[u8]) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(payload).ok()?;
    v.get("on")?.as_bool()
}

struct Topics {
    set: String,
    state: String,
    status: String,
}

/// One connection to the broker, dropped (abruptly) on a cut and made anew on a connect.
struct Conn {
    broker: MqttBroker,
    sets: Subscription,
    link: watch::Receiver<Link>,
}

/// What woke the task.
enum Event {
    Set(bool),
    Link(bool),
    Time,
    Beat,
}

async fn run(
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    config: BrokerConfig,
    topics: Topics,
    heartbeat: Duration,
    presence: watch::Sender<Presence>,
) {
    let mut conn: Option<Conn> = None;
    let mut tick = tokio::time::interval(heartbeat);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // Set once a link-up's effects (the retained `online`) have been carried out.
    let mut announce = None;
    loop {
        let effects = std::mem::take(&mut lock(&shared).outbox);
        for effect in effects {
            apply(effect, &mut conn, &config, &topics, &presence).await;
        }
        if let Some(p) = announce.take()
            && conn.is_some()
        {
            presence.send_replace(p);
        }
        let deadline = lock(&shared).core.next_deadline(Instant::now());
        let (sets, link) = match conn.as_mut() {
            Some(c) => (Some(&mut c.sets), Some(&mut c.link)),
            None => (None, None),
        };
        let event = tokio::select! {
            () = wake.notified() => continue,
            on = next_set(sets) => Event::Set(on),
            up = link_change(link) => Event::Link(up),
            () = sleep_until(deadline) => Event::Time,
            _ = tick.tick() => Event::Beat,
        };
        let now = Instant::now();
        let mut s = lock(&shared);
        let fx = match event {
            Event::Set(on) => s.core.on_set(on, now),
            Event::Link(true) => {
                announce = Some(Presence::Connected);
                s.core.on_link_up(now)
            }
            Event::Link(false) => {
                announce = Some(Presence::Connecting);
                s.core.on_link_down();
                Vec::new()
            }
            Event::Time => s.core.advance(now),
            Event::Beat => s.core.heartbeat(now),
        };
        s.outbox.extend(fx);
    }
}

async fn apply(
    effect: Effect,
    conn: &mut Option<Conn>,
    config: &BrokerConfig,
    topics: &Topics,
    presence: &watch::Sender<Presence>,
) {
    match effect {
        Effect::Cut => {
            if let Some(c) = conn.take() {
                c.broker.abort();
            }
            presence.send_replace(Presence::Off);
        }
        Effect::Connect => match MqttBroker::connect(config.clone()) {
            Ok(broker) => {
                let sets = broker.subscribe(&topics.set);
                let link = broker.link();
                *conn = Some(Conn { broker, sets, link });
                presence.send_replace(Presence::Connecting);
            }
            // The URL was checked at start, so this does not happen; stay off rather than panic.
            Err(e) => tracing::warn!(error = %e, "mqtt-relay cannot connect"),
        },
        Effect::Online => publish(conn.as_ref(), &topics.status, "online".into(), true).await,
        Effect::State { on, seq } => {
            let body = format!(r#"{{"on": {on}, "seq": {seq}}}"#);
            publish(conn.as_ref(), &topics.state, body, false).await;
        }
    }
}

/// Publishes at QoS 1 and waits (bounded) for the PUBACK, so publishes leave in order.
async fn publish(conn: Option<&Conn>, topic: &str, payload: String, retain: bool) {
    let Some(c) = conn else { return };
    let sent = c.broker.send(topic, payload.into(), 1, None, retain);
    match tokio::time::timeout(PUBLISH_WAIT, sent).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::debug!(topic, error = %e, "mqtt-relay publish not acknowledged"),
        Err(_) => tracing::debug!(
            topic,
            "mqtt-relay publish: no PUBACK within {PUBLISH_WAIT:?}"
        ),
    }
}

/// The next valid set, never when there is no connection.
async fn next_set(sets: Option<&mut Subscription>) -> bool {
    let Some(sets) = sets else {
        return std::future::pending().await;
    };
    loop {
        match sets.recv().await {
            Some(msg) => {
                if let Some(on) = parse_set(&msg.payload) {
                    return on;
                }
            }
            None => return std::future::pending().await,
        }
    }
}

/// The next link change (true: connected), never when there is no connection.
async fn link_change(link: Option<&mut watch::Receiver<Link>>) -> bool {
    let Some(link) = link else {
        return std::future::pending().await;
    };
    if link.changed().await.is_err() {
        return std::future::pending().await;
    }
    *link.borrow_and_update() == Link::Connected
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

    const PULL_IN: Duration = Duration::from_millis(10);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A booted core whose connection is up, and the instant it came up.
    fn linked(faults: &[FaultSpec]) -> (Core, Instant) {
        let t0 = Instant::now();
        let mut core = Core::new(PULL_IN, 7, t0);
        assert_eq!(core.boot(faults, t0), vec![Effect::Connect]);
        let fx = core.on_link_up(t0);
        assert!(fx.contains(&Effect::Online), "{fx:?}");
        (core, t0)
    }

    fn states(fx: &[Effect]) -> Vec<bool> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::State { on, .. } => Some(*on),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn set_payloads() {
        assert_eq!(parse_set(br#"{"on": true}"#), Some(true));
        assert_eq!(parse_set(br#"{"on": false, "id": "x"}"#), Some(false));
        assert_eq!(parse_set(br#"{"on": 1}"#), None);
        assert_eq!(parse_set(b"ON"), None);
    }

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
    fn the_state_follows_a_set_after_pull_in_with_increasing_seq() {
        let (mut core, t0) = linked(&[]);
        let fx = core.on_set(true, t0 + ms(5));
        assert!(states(&fx).is_empty(), "not before pull_in: {fx:?}");
        assert_eq!(core.next_deadline(t0 + ms(5)), Some(t0 + ms(15)));
        let fx = core.advance(t0 + ms(15));
        assert_eq!(fx, vec![Effect::State { on: true, seq: 2 }]);
        assert_eq!(
            core.heartbeat(t0 + ms(100)),
            vec![Effect::State { on: true, seq: 3 }]
        );
    }

    #[test]
    fn brownout_opens_the_contact_and_clearing_lets_it_follow_again() {
        let (mut core, t0) = linked(&[]);
        core.on_set(true, t0);
        core.advance(t0 + ms(10));
        let fx = core.inject(FaultSpec::now(Fault::Brownout), t0 + ms(20));
        assert_eq!(states(&fx), vec![false], "published on change");
        assert!(states(&core.on_set(true, t0 + ms(30))).is_empty());
        assert_eq!(states(&core.advance(t0 + ms(40))), vec![false]);
        assert!(states(&core.clear(FaultKind::Brownout, t0 + ms(50))).is_empty());
        assert_eq!(states(&core.advance(t0 + ms(60))), vec![true]);
    }

    #[test]
    fn swapped_contacts_report_the_opposite() {
        let (mut core, t0) = linked(&[FaultSpec::now(Fault::SwappedContacts)]);
        assert_eq!(states(&core.heartbeat(t0)), vec![true]);
        core.on_set(true, t0);
        assert_eq!(states(&core.advance(t0 + ms(10))), vec![false]);
    }

    #[test]
    fn a_zombie_ignores_sets_and_publishes_nothing_until_cleared() {
        let (mut core, t0) = linked(&[]);
        assert!(core.inject(FaultSpec::now(Fault::Zombie), t0).is_empty());
        assert!(core.on_set(true, t0).is_empty());
        assert!(core.heartbeat(t0 + ms(100)).is_empty());
        let fx = core.clear(FaultKind::Zombie, t0 + ms(200));
        assert_eq!(
            states(&fx),
            vec![false],
            "back at once, the set was ignored"
        );
    }

    #[test]
    fn power_off_cuts_and_clearing_boots_afresh() {
        let (mut core, t0) = linked(&[]);
        core.on_set(true, t0);
        core.advance(t0 + ms(10));
        assert_eq!(
            core.inject(FaultSpec::now(Fault::PowerOff), t0 + ms(20)),
            vec![Effect::Cut]
        );
        assert!(core.heartbeat(t0 + ms(100)).is_empty());
        assert!(core.on_set(true, t0 + ms(110)).is_empty());
        assert_eq!(
            core.clear(FaultKind::PowerOff, t0 + ms(200)),
            vec![Effect::Connect]
        );
        let fx = core.on_link_up(t0 + ms(210));
        assert_eq!(
            fx,
            vec![Effect::Online, Effect::State { on: false, seq: 1 }]
        );
    }

    #[test]
    fn a_reboot_comes_back_by_itself_and_drops_the_pending_set() {
        let (mut core, t0) = linked(&[FaultSpec::now(Fault::LatencyMs { ms: 50 })]);
        core.on_set(true, t0);
        let fx = core.inject(FaultSpec::now(Fault::Reboot { down_ms: 100 }), t0 + ms(10));
        assert_eq!(fx, vec![Effect::Cut]);
        assert_eq!(core.next_deadline(t0 + ms(10)), Some(t0 + ms(110)));
        assert!(core.advance(t0 + ms(109)).is_empty());
        assert_eq!(core.advance(t0 + ms(110)), vec![Effect::Connect]);
        let fx = core.on_link_up(t0 + ms(120));
        assert_eq!(states(&fx), vec![false]);
        assert!(states(&core.advance(t0 + ms(500))).is_empty());
        assert_eq!(
            core.specs(),
            vec![FaultSpec::now(Fault::LatencyMs { ms: 50 })]
        );
    }

    #[test]
    fn latency_delays_the_set_taking_effect() {
        let (mut core, t0) = linked(&[FaultSpec::now(Fault::LatencyMs { ms: 100 })]);
        core.on_set(true, t0);
        assert!(states(&core.advance(t0 + ms(100))).is_empty());
        assert_eq!(states(&core.advance(t0 + ms(110))), vec![true]);
    }

    #[test]
    fn drop_rate_one_loses_every_set_and_zero_none() {
        let (mut core, t0) = linked(&[FaultSpec::now(Fault::DropRate { p: 1.0 })]);
        for i in 0..50 {
            core.on_set(true, t0 + ms(i));
        }
        assert_eq!(states(&core.heartbeat(t0 + ms(100))), vec![false]);
        core.inject(FaultSpec::now(Fault::DropRate { p: 0.0 }), t0 + ms(100));
        core.on_set(true, t0 + ms(100));
        assert_eq!(states(&core.advance(t0 + ms(110))), vec![true]);
    }

    #[test]
    fn after_ms_counts_from_the_first_set_or_from_the_injection() {
        let (mut core, t0) = linked(&[FaultSpec::after(Fault::PowerOff, 100)]);
        assert!(core.advance(t0 + ms(1000)).is_empty(), "waits for a set");
        core.on_set(true, t0 + ms(1000));
        assert_eq!(states(&core.advance(t0 + ms(1010))), vec![true]);
        assert_eq!(core.advance(t0 + ms(1100)), vec![Effect::Cut]);
        core.clear(FaultKind::PowerOff, t0 + ms(1200));
        core.on_link_up(t0 + ms(1200));
        // A set was taken already: a new delayed fault counts from its injection.
        core.inject(FaultSpec::after(Fault::Brownout, 50), t0 + ms(1300));
        core.on_set(true, t0 + ms(1300));
        assert_eq!(states(&core.advance(t0 + ms(1310))), vec![true]);
        assert_eq!(states(&core.advance(t0 + ms(1350))), vec![false]);
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
