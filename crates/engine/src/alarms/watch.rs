//! The alarms' watchers: one task per distinct period judges every alarm of that period on each
//! tick, as the pollers share one tick per period. A hall with an alarm per device had a task
//! and a timer per alarm, a copy of each device's sample and a CEL evaluation per alarm every
//! period (8,000 alarms at 100 ms: half a core at rest). Now each alarm keeps the values its
//! conditions read, updated in place from the device's latest sample
//! where it lies, and evaluates a condition again only when one of those values changed.
//!
//! A raise or clear is on the board at once; its row goes to the journal through a task of its
//! own, in order, so a slow journal delays no other alarm's judgement.

use super::AlarmState;
use crate::clock::rfc3339;
use crate::context::Context;
use crate::device::{DeviceRuntime, Liveness};
use closedloop_driver::Value;
use closedloop_journal::AlarmRow;
use closedloop_plant::{Alarm, Expr, Params, Scope, WhenOffline};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

/// How many raises and clears may wait for a journal that is behind; past that, a row is
/// logged as not journaled rather than held (the board has the alarm either way).
const WAITING_ROWS: usize = 4096;

/// The alarms' tasks: one per distinct period, and the one writing their rows to the journal.
#[derive(Default)]
pub(crate) struct Watchers {
    /// They end when `stop` is notified (or are aborted).
    pub groups: Vec<JoinHandle<()>>,
    /// Ends once every group has ended and the rows waiting are written: await it, bounded,
    /// before the journal closes.
    pub journal: Option<JoinHandle<()>>,
}

/// Starts one watcher task per distinct period among the alarms. An alarm's period is the
/// shortest poll period of the devices it reads (5 ms at least, 100 ms when it reads none the
/// plant has).
pub(crate) fn spawn(ctx: &Arc<Context>, stop: &Arc<Notify>) -> Watchers {
    if ctx.plant.alarms.is_empty() {
        return Watchers::default();
    }
    let (rows, journal) = mpsc::channel(WAITING_ROWS);
    let journal = Some(tokio::spawn(journal_rows(Arc::clone(ctx), journal)));
    let mut by_period: BTreeMap<u64, Vec<Watch>> = BTreeMap::new();
    for index in 0..ctx.plant.alarms.len() {
        let watch = Watch::new(ctx, index);
        by_period.entry(watch.period()).or_default().push(watch);
    }
    let groups = by_period.into_iter().map(|(ms, watches)| {
        let group = Group {
            ctx: Arc::clone(ctx),
            period: Duration::from_millis(ms),
            rows: rows.clone(),
        };
        tokio::spawn(group.run(watches, Arc::clone(stop)))
    });
    Watchers {
        groups: groups.collect(),
        journal,
    }
}

/// The alarms of one period and where their raises and clears go.
struct Group {
    ctx: Arc<Context>,
    period: Duration,
    rows: mpsc::Sender<AlarmRow>,
}

impl Group {
    async fn run(self, mut watches: Vec<Watch>, stop: Arc<Notify>) {
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // Waiting from now on: a stop notified while the alarms are being judged is not missed.
        let stopped = stop.notified();
        tokio::pin!(stopped);
        stopped.as_mut().enable();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut stopped => return,
            }
            for watch in &mut watches {
                if let Some((active, why)) = watch.step(&self.ctx) {
                    self.record(watch.index, active, why);
                }
            }
        }
    }

    /// Raises or clears the alarm on the board, and hands its row to the journal.
    fn record(&self, index: usize, active: bool, why: String) {
        let alarm = &self.ctx.plant.alarms[index];
        let now = self.ctx.clock.now_ms();
        let row = AlarmRow {
            name: alarm.name.clone(),
            at_ms: now,
            active,
            evidence: serde_json::json!({ "why": why }),
        };
        let state = AlarmState {
            active,
            since: active.then(|| rfc3339(now)),
            why: active.then_some(why),
        };
        if self.ctx.alarms.set(index, state) {
            tracing::warn!(alarm = %alarm.name, active, "alarm {}", if active { "raised" } else { "cleared" });
            match self.rows.try_send(row) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => tracing::error!(
                    alarm = %alarm.name,
                    "alarm not journaled: {WAITING_ROWS} raises and clears already wait for the journal"
                ),
                Err(mpsc::error::TrySendError::Closed(_)) => tracing::error!(
                    alarm = %alarm.name,
                    "alarm not journaled: the journal's writer of alarms has stopped (shutting down)"
                ),
            }
        }
    }
}

/// Writes the raises and clears in the order they happened, until every group has ended. A
/// journal that refuses is logged, never waited for: the alarm blocks its devices either way.
async fn journal_rows(ctx: Arc<Context>, mut rows: mpsc::Receiver<AlarmRow>) {
    while let Some(row) = rows.recv().await {
        if let Err(e) = ctx.journal.record_alarm(&row).await {
            tracing::error!(alarm = %row.name, error = %e, "alarm not journaled");
        }
    }
}

/// One alarm's watcher state between ticks.
struct Watch {
    index: usize,
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
    fn new(ctx: &Context, index: usize) -> Watch {
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
        }
    }

    fn period(&self) -> u64 {
        let polls = self.devices.iter().map(|d| d.spec.poll_ms);
        polls.min().unwrap_or(100).max(5)
    }

    /// Judges the alarm once; `Some((active, why))` when it is to be raised or cleared.
    ///
    /// It fails safe: a `when` that reads a value no decider may use (unreadable, older than
    /// its device's liveness window, of a silent device) holds — nothing shows it is safe —
    /// unless `when_offline = "ignore"`, which then leaves the alarm as it is; `clear_when`
    /// never holds on such a value.
    fn step(&mut self, ctx: &Context) -> Option<(bool, String)> {
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
        (active != was).then(|| {
            let decided = match (&alarm.clear_when, was) {
                (Some(clear), true) => clear,
                _ => &alarm.when,
            };
            (active, self.why(ctx, silent, blind, decided))
        })
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
            let name = format!("devices.{}.{}", r.device.id(), r.signal);
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
        let values = crate::admit::values_read(cond, &scope);
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
