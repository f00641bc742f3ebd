//! The `mqtt-relay` as a pure state machine: every method takes the instant it happens at and
//! returns the [`Effect`]s the task must carry out; no I/O, no clock reads, no async.
//!
//! The fault schedule (when `after_ms` runs out, when a reboot is over) is
//! [`closedloop_sim::Schedule`], so `after_ms` counts exactly as for every other simulated
//! device; this module decides only what each fault does to a relay on MQTT.

use std::collections::VecDeque;
use std::time::Duration;

use closedloop_sim::{Due, Fault, FaultKind, FaultSpec, Schedule};
use tokio::time::Instant;

use super::MAX_DELAYED;

/// What the task must do for the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effect {
    /// Drop the broker connection without DISCONNECT: the broker publishes the will.
    Cut,
    /// Connect afresh (clean start), subscribed to `{prefix}/set`.
    Connect,
    /// Publish the retained `online`.
    Online,
    /// Publish `{"on": on, "seq": seq}` on the state topic.
    State { on: bool, seq: u64 },
}

/// The relay as a pure state machine: every method takes the instant it happens at.
///
/// # Invariants
/// - `faults` holds at most one fault per kind; its "first actuating write" is the first set the
///   relay took (not one a zombie ignored or `drop_rate` lost, nor one while down).
/// - `down` is true while the device must hold no connection (power_off or a reboot struck, or
///   not booted yet); `connected` (the broker acknowledged the current connection) implies `!down`.
/// - The contact is `from` before `switch_at` and `to` from then on; `to` is the drive (output
///   on and no brownout) as of its last change.
#[derive(Debug)]
pub(super) struct Core {
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
    connected: bool,
    /// `online` was published on the current connection.
    announced: bool,
    /// When each fault strikes and when a reboot is over.
    faults: Schedule,
    /// xorshift64 state for `drop_rate`; never 0.
    rng: u64,
}

impl Core {
    pub(super) fn new(pull_in: Duration, seed: u64, now: Instant) -> Core {
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
            connected: false,
            announced: false,
            faults: Schedule::default(),
            rng: if seed == 0 { 0x5EED } else { seed },
        }
    }

    /// Powers up with the plant file's faults; connects unless one holds it off.
    pub(super) fn boot(&mut self, faults: &[FaultSpec], now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        for spec in faults {
            fx.extend(self.inject(*spec, now));
        }
        self.come_back(now, &mut fx);
        fx
    }

    fn struck(&self, which: impl Fn(&Fault) -> bool) -> bool {
        self.faults.struck().any(|f| which(&f))
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
        self.faults.struck().find_map(|f| value(&f))
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
            self.connected = false;
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

    /// When the task must call [`Core::advance`] next, if ever.
    pub(super) fn next_deadline(&self, now: Instant) -> Option<Instant> {
        [
            self.faults.next_event().map(|(t, _)| t),
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
            let fault = self.faults.next_due(now);
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
            Due::Strike(i) => match self.faults.strike(i, t) {
                Some(Fault::PowerOff | Fault::Reboot { .. }) => self.go_down(t, fx),
                Some(Fault::Brownout) => self.redrive(t, true),
                _ => {}
            },
        }
    }

    /// Publishes the state if one is owed or it changed, unless the device cannot talk.
    fn publish_if_due(&mut self, now: Instant, fx: &mut Vec<Effect>) {
        let owed = self.confirm_at.is_some_and(|t| t <= now);
        if owed {
            self.confirm_at = None;
        }
        if !self.connected || self.zombie() {
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
    pub(super) fn advance(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The heartbeat period elapsed: the state, unless one was just published.
    pub(super) fn heartbeat(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = self.advance(now);
        let published = fx.iter().any(|e| matches!(e, Effect::State { .. }));
        if self.connected && !self.zombie() && !published {
            let on = self.reported_at(now);
            self.publish(on, &mut fx);
        }
        fx
    }

    /// A valid `{"on": bool}` arrived on `{prefix}/set`.
    pub(super) fn on_set(&mut self, on: bool, now: Instant) -> Vec<Effect> {
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
            self.faults.on_write(now);
        }
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The broker acknowledged the current connection (CONNACK; the subscription is on its way).
    pub(super) fn on_connected(&mut self, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        if self.down {
            return fx; // a fault struck meanwhile: the cut is on its way
        }
        self.connected = true;
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
    pub(super) fn on_disconnected(&mut self) {
        self.connected = false;
        self.announced = false;
    }

    /// Adds (or replaces) a fault at `now`.
    pub(super) fn inject(&mut self, spec: FaultSpec, now: Instant) -> Vec<Effect> {
        let mut fx = self.clear(spec.fault.kind(), now);
        self.faults.push(spec, now);
        self.run_until(now, &mut fx);
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// Removes the fault of `kind` at `now`, undoing what it holds.
    pub(super) fn clear(&mut self, kind: FaultKind, now: Instant) -> Vec<Effect> {
        let mut fx = Vec::new();
        self.run_until(now, &mut fx);
        match self.faults.take(kind) {
            Some((Fault::PowerOff | Fault::Reboot { .. }, true)) => self.come_back(now, &mut fx),
            Some((Fault::Brownout, true)) => self.redrive(now, false),
            Some((Fault::Zombie, true)) if self.connected => {
                if !self.announced {
                    fx.push(Effect::Online);
                    self.announced = true;
                }
                self.confirm_at = Some(now);
            }
            _ => {}
        }
        self.publish_if_due(now, &mut fx);
        fx
    }

    /// The faults pending or in force.
    pub(super) fn specs(&self) -> Vec<FaultSpec> {
        self.faults.specs()
    }
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
