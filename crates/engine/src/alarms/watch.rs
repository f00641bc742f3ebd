//! The alarms' watchers: one task per distinct period judges every alarm of that period on each
//! tick, as the pollers share one tick per period. A hall with an alarm per device had a task
//! and a timer per alarm, a copy of each device's sample and a CEL evaluation per alarm every
//! period (8,000 alarms at 100 ms: half a core at rest). Now each alarm keeps the values its
//! conditions read, updated in place from the device's latest sample
//! where it lies, and evaluates a condition again only when one of those values changed.
//!
//! A raise or clear is on the board at once; its row goes to the journal through a task of its
//! own, in order, so a slow journal delays no other alarm's judgement.

mod one;

use super::AlarmState;
use crate::clock::rfc3339;
use crate::context::Context;
use closedloop_journal::AlarmRow;
use one::{Step, Watch};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

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
                match watch.step(&self.ctx) {
                    Some(Step::Set(active, why)) => self.record(watch.index, active, why),
                    Some(Step::Explain(why)) => self.ctx.alarms.explain(watch.index, why),
                    None => {}
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
