//! One alarm judged on each tick of its period: the values its conditions read, kept in place
//! and refreshed from its devices' latest samples under the freshness rule of every decider
//! (`closedloop_contract::sample`), its conditions evaluated again only when one of them changed,
//! and what a judgement changes ([`Step`]).

use crate::clock::rfc3339;
use crate::context::Context;
use crate::device::{DeviceRuntime, Liveness};
use closedloop_contract::Value;
use closedloop_plant::{Alarm, Expr, Params, Scope, WhenOffline};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What one judgement of an alarm changes.
pub(super) enum Step {
    /// Raised (`true`) or cleared, and why.
    Set(bool, String),
    /// Still raised, for another reason than the one it was raised for (the door it was raised
    /// for is closed, but the temperature can no longer be read): the board says the new one.
    Explain(String),
}

/// Why a raised alarm holds: the first silent device, the first unusable signal (by position),
/// or its values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cause {
    Silent(usize),
    Blind(usize),
    Values,
}

/// One alarm's watcher state between ticks.
pub(super) struct Watch {
    pub(super) index: usize,
    /// The devices its conditions read, each once, by id.
    devices: Vec<Arc<DeviceRuntime>>,
    /// Each `devices.<id>.<signal>` its conditions read, once, with the value last seen.
    reads: Vec<Read>,
    /// `when` and `clear_when` as last evaluated on `reads`; `None` once a value changed. The
    /// scope an evaluation needs is made for it and dropped: kept, it was a kilobyte an alarm.
    when: Option<bool>,
    clear: Option<bool>,
    /// Since when `when` has held without a break (for `for_ms`).
    holding_since: Option<Instant>,
    /// Why it holds, as the board last said, while raised.
    cause: Option<Cause>,
}

/// One signal of another device that an alarm reads.
struct Read {
    device: Arc<DeviceRuntime>,
    signal: String,
    /// Its value as last seen, when a decider may use it (`Snapshot::usable`): `None` when it
    /// cannot be read, was read longer ago than its device's liveness window, or was never read.
    last: Option<Value>,
    /// Whether `when` reads it, and `clear_when`.
    in_when: bool,
    in_clear: bool,
}

impl Watch {
    pub(super) fn new(ctx: &Context, index: usize) -> Watch {
        let alarm = &ctx.plant.alarms[index];
        let pairs: BTreeSet<&(String, String)> =
            conditions(alarm).flat_map(|e| e.devices()).collect();
        let reads: Vec<Read> = pairs
            .into_iter()
            .filter_map(|pair| {
                let device = Arc::clone(ctx.devices.get(&pair.0)?);
                let reads_it = |e: &Expr| e.devices().contains(pair);
                Some(Read {
                    device,
                    signal: pair.1.clone(),
                    last: None,
                    in_when: reads_it(&alarm.when),
                    in_clear: alarm.clear_when.as_ref().is_some_and(reads_it),
                })
            })
            .collect();
        let mut devices: Vec<Arc<DeviceRuntime>> =
            reads.iter().map(|r| Arc::clone(&r.device)).collect();
        devices.dedup_by(|a, b| a.id() == b.id());
        Watch {
            index,
            devices,
            reads,
            when: None,
            clear: None,
            holding_since: None,
            cause: None,
        }
    }

    pub(super) fn period(&self) -> u64 {
        let polls = self.devices.iter().map(|d| d.spec.poll_ms);
        polls.min().unwrap_or(100).max(5)
    }

    /// Judges the alarm once; `Some((active, why))` when it is to be raised or cleared.
    ///
    /// It fails safe: a `when` that reads a value no decider may use (unreadable, older than
    /// its device's liveness window, of a silent device) holds — nothing shows it is safe —
    /// unless `when_offline = "ignore"`, which then leaves the alarm as it is; `clear_when`
    /// never holds on such a value.
    pub(super) fn step(&mut self, ctx: &Context) -> Option<Step> {
        let alarm = &ctx.plant.alarms[self.index];
        let was = ctx.alarms.is_active_at(self.index);
        let silent = self.silent(alarm);
        if self.refresh(ctx.clock.now_ms()) {
            (self.when, self.clear) = (None, None);
        }
        let blind = self.unusable(|r| r.in_when);
        if blind.is_some() && alarm.when_offline == WhenOffline::Ignore {
            return None;
        }
        let fails_safe = silent.is_some() || blind.is_some();
        let holds = fails_safe || judged(&mut self.when, &alarm.when, &self.reads);
        let since = match holds {
            true => *self.holding_since.get_or_insert_with(Instant::now),
            false => {
                self.holding_since = None;
                Instant::now()
            }
        };
        let raised = holds && since.elapsed() >= Duration::from_millis(alarm.for_ms);
        let active = match (&alarm.clear_when, was) {
            // Hysteresis: once raised, only clear_when ends it, on values a decider may use.
            (Some(clear), true) => {
                let clear_blind = self.unusable(|r| r.in_clear).is_some();
                fails_safe || clear_blind || !judged(&mut self.clear, clear, &self.reads)
            }
            _ => raised,
        };
        let cause = match (silent, blind) {
            (Some(i), _) => Cause::Silent(i),
            (_, Some(i)) => Cause::Blind(i),
            _ => Cause::Values,
        };
        if active == was {
            // Still raised, and `when` holds for another reason than before: say the new one.
            let other = active && holds && self.cause.is_some_and(|c| c != cause);
            return other.then(|| {
                self.cause = Some(cause);
                Step::Explain(self.why(ctx, silent, blind, &alarm.when))
            });
        }
        self.cause = active.then_some(cause);
        let decided = match (&alarm.clear_when, was) {
            (Some(clear), true) => clear,
            _ => &alarm.when,
        };
        Some(Step::Set(active, self.why(ctx, silent, blind, decided)))
    }

    /// The first device it reads that is not answering, when the alarm counts that as holding.
    fn silent(&self, alarm: &Alarm) -> Option<usize> {
        if alarm.when_offline != WhenOffline::Block {
            return None;
        }
        let mut devices = self.devices.iter();
        devices.position(|d| d.liveness() != Liveness::Online)
    }

    /// The first read (of those `which` picks) whose value may not be decided on.
    fn unusable(&self, which: impl Fn(&Read) -> bool) -> Option<usize> {
        self.reads.iter().position(|r| which(r) && r.last.is_none())
    }

    /// Brings the values read up to the devices' latest samples, looked at where they lie,
    /// each as a decider may use it at `now_ms`; whether any of them changed.
    fn refresh(&mut self, now_ms: i64) -> bool {
        let mut changed = false;
        for r in &mut self.reads {
            let rule = r.device.freshness(now_ms);
            let now =
                (r.device).with_snapshot(|snap| snap.usable(&r.signal, rule).ok().map(|v| v.value));
            if !same(now, r.last) {
                (r.last, changed) = (now, true);
            }
        }
        changed
    }

    /// Why the alarm is raised or cleared, in words: the values `cond` read, the device that
    /// went silent, or the signal no decider may use. Made only on a raise or a clear.
    fn why(
        &self,
        ctx: &Context,
        silent: Option<usize>,
        blind: Option<usize>,
        cond: &Expr,
    ) -> String {
        if let Some(i) = silent {
            let id = self.devices[i].id();
            return format!("{id} is not answering, so nothing shows it is safe");
        }
        if let Some(r) = blind.map(|i| &self.reads[i]) {
            let now_ms = ctx.clock.now_ms();
            let name = closedloop_plant::other_device_name(r.device.id(), &r.signal);
            let rule = r.device.freshness(now_ms);
            let words = r
                .device
                .with_snapshot(|snap| match snap.usable(&r.signal, rule) {
                    Err(u) => u.describe(&name, now_ms, rfc3339),
                    Ok(_) => format!("{name} could not be used"),
                });
            return format!(
                "`{}` cannot be judged: {words}; nothing shows it is safe",
                cond.source()
            );
        }
        let (signals, params) = (BTreeMap::new(), Params::new());
        let devices = values(&self.reads);
        let scope = scope(&signals, &params, &devices);
        let values = crate::admission::rules::values_read(cond, &scope);
        format!("`{}`{values}", cond.source())
    }
}

/// Whether two values read are the same to the bit: `-0.0` is not `0.0` to a condition that
/// divides by it, and a NaN read again is no change.
fn same(a: Option<Value>, b: Option<Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// An alarm's conditions: `when`, and `clear_when` when it has one.
fn conditions(alarm: &Alarm) -> impl Iterator<Item = &Expr> {
    std::iter::once(&alarm.when).chain(alarm.clear_when.as_ref())
}

/// Whether `cond` holds on the values `reads` last saw (a value not read yet: it does not), as
/// judged before unless `last` was emptied by a change.
fn judged(last: &mut Option<bool>, cond: &Expr, reads: &[Read]) -> bool {
    *last.get_or_insert_with(|| {
        let (signals, params, devices) = (BTreeMap::new(), Params::new(), values(reads));
        let holds = cond.eval_bool(&scope(&signals, &params, &devices));
        holds.unwrap_or(false)
    })
}

/// The values `reads` last saw, as an expression scope's `devices.<id>.<signal>`.
fn values(reads: &[Read]) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut devices: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    for r in reads {
        if let Some(v) = r.last {
            let of = devices.entry(r.device.id().to_string()).or_default();
            of.insert(r.signal.clone(), v);
        }
    }
    devices
}

fn scope<'a>(
    signals: &'a BTreeMap<String, Value>,
    params: &'a Params,
    devices: &'a BTreeMap<String, BTreeMap<String, Value>>,
) -> Scope<'a> {
    Scope {
        signals,
        params,
        devices,
        extra_strings: &[],
    }
}

#[cfg(test)]
mod tests {
    use super::{Value, same};

    #[test]
    fn a_value_is_the_same_only_to_the_bit() {
        let n = |x: f64| Some(Value::Number(x));
        assert!(same(n(1.5), n(1.5)));
        assert!(!same(n(0.0), n(-0.0)), "1 / x tells them apart");
        assert!(
            same(n(f64::NAN), n(f64::NAN)),
            "a NaN read again is no change"
        );
        assert!(!same(n(1.0), Some(Value::Bool(true))));
        assert!(!same(n(1.0), None), "a value gone is a change");
        assert!(same(None, None));
    }
}
