//! Standing alarms (`[[alarm]]`): each is judged every poll period on the latest values of the
//! devices its condition reads; while one is active, the devices it blocks take no command, and
//! a command running on one of them is stopped (its cancel plan written) with the alarm's name
//! as its code.

use crate::clock::rfc3339;
use crate::context::Context;
use crate::device::Liveness;
use closedloop_plant::{Alarm, Params, Scope, WhenOffline};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// One alarm's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlarmState {
    /// Whether it is raised.
    pub active: bool,
    /// When it was raised (RFC 3339), while active.
    pub since: Option<String>,
    /// Why, in words: the values that made it hold, or the device that went silent.
    pub why: Option<String>,
}

/// The alarms' states, with a version that moves on every raise and clear.
pub struct AlarmBoard {
    states: Mutex<BTreeMap<String, AlarmState>>,
    version: watch::Sender<u64>,
}

impl AlarmBoard {
    /// A board with every alarm of the plant cleared.
    pub fn new(alarms: &[Alarm]) -> AlarmBoard {
        AlarmBoard {
            states: Mutex::new(
                alarms
                    .iter()
                    .map(|a| (a.name.clone(), AlarmState::default()))
                    .collect(),
            ),
            version: watch::channel(0).0,
        }
    }

    /// A receiver woken on every raise and clear.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Every alarm's state, by name.
    pub fn states(&self) -> BTreeMap<String, AlarmState> {
        self.read(BTreeMap::clone)
    }

    /// One alarm's state (cleared when the plant has no such alarm). Each watcher asks for its
    /// own every period: a copy of the whole board there cost a hall with an alarm per device
    /// a core and more at rest (2,000 alarms: 129 % of one core).
    pub fn state(&self, name: &str) -> AlarmState {
        self.read(|s| s.get(name).cloned().unwrap_or_default())
    }

    /// Whether the alarm `name` is raised.
    pub fn is_active(&self, name: &str) -> bool {
        self.read(|s| s.get(name).is_some_and(|st| st.active))
    }

    fn read<T>(&self, f: impl FnOnce(&BTreeMap<String, AlarmState>) -> T) -> T {
        f(&self.states.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn set(&self, name: &str, state: AlarmState) -> bool {
        let mut s = self.states.lock().unwrap_or_else(|p| p.into_inner());
        let changed = s.get(name).is_none_or(|old| old.active != state.active);
        s.insert(name.to_string(), state);
        drop(s);
        if changed {
            self.version.send_modify(|v| *v += 1);
        }
        changed
    }
}

/// One alarm as `list_alarms` shows it.
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
pub struct AlarmInfo {
    /// Its name (the code of a command it stops).
    pub name: String,
    /// As the plant file says.
    pub severity: String,
    /// Whether it is raised now.
    pub active: bool,
    /// When it was raised, while active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Why, while active: the values that made it hold, or the device that went silent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The devices it blocks.
    pub blocks: Vec<String>,
    /// Written for a model.
    pub description: String,
}

/// Every alarm of the plant with its state.
pub(crate) fn list(ctx: &Context) -> Vec<AlarmInfo> {
    let states = ctx.alarms.states();
    ctx.plant
        .alarms
        .iter()
        .map(|a| {
            let st = states.get(&a.name).cloned().unwrap_or_default();
            AlarmInfo {
                name: a.name.clone(),
                severity: a.severity.clone(),
                active: st.active,
                since: st.since,
                why: st.why,
                blocks: a.blocks.clone(),
                description: a.description.clone(),
            }
        })
        .collect()
}

/// The active alarm blocking `device`, with its detail for a refusal, if any.
pub(crate) fn blocking(ctx: &Context, device: &str) -> Option<(String, String)> {
    ctx.plant.alarms.iter().find_map(|a| {
        if !a.blocks.iter().any(|d| d == device) {
            return None;
        }
        let st = ctx.alarms.state(&a.name);
        if !st.active {
            return None;
        }
        let why = st.why.as_deref().unwrap_or("its condition holds");
        let detail = format!(
            "The {} alarm {} is active ({why}) and blocks {device}: {}",
            a.severity,
            a.name,
            a.description.trim_end_matches('.')
        );
        Some((a.name.clone(), detail))
    })
}

/// The names of every active alarm blocking `device` (what `get_device_state` shows).
pub(crate) fn blocking_names(ctx: &Context, device: &str) -> Vec<String> {
    ctx.plant
        .alarms
        .iter()
        .filter(|a| a.blocks.iter().any(|d| d == device))
        .filter(|a| ctx.alarms.is_active(&a.name))
        .map(|a| a.name.clone())
        .collect()
}

/// Starts one watcher per alarm; they end when `stop` is notified.
pub(crate) fn spawn_watchers(
    ctx: &Arc<Context>,
    stop: &Arc<Notify>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..ctx.plant.alarms.len())
        .map(|i| tokio::spawn(watch_alarm(Arc::clone(ctx), i, Arc::clone(stop))))
        .collect()
}

async fn watch_alarm(ctx: Arc<Context>, index: usize, stop: Arc<Notify>) {
    let alarm = &ctx.plant.alarms[index];
    let ids = devices_read(alarm);
    let period = ids
        .iter()
        .filter_map(|d| ctx.devices.get(d))
        .map(|d| d.spec.poll_ms)
        .min()
        .unwrap_or(100)
        .max(5);
    let mut tick = tokio::time::interval(Duration::from_millis(period));
    let mut holding_since: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.notified() => return,
        }
        let was = ctx.alarms.state(&alarm.name);
        let (holds, why) = judge(&ctx, alarm, &alarm.when, &ids);
        let since = match holds {
            true => *holding_since.get_or_insert_with(Instant::now),
            false => {
                holding_since = None;
                Instant::now()
            }
        };
        let raised = holds && since.elapsed() >= Duration::from_millis(alarm.for_ms);
        let (active, why) = match (&alarm.clear_when, was.active) {
            // Hysteresis: once raised, only clear_when ends it (a silent device never does).
            (Some(clear), true) => match judge(&ctx, alarm, clear, &ids) {
                (true, why) if !offline_blocks(&ctx, alarm, &ids) => (false, why),
                _ => (true, was.why.clone().unwrap_or(why)),
            },
            _ => (raised, why),
        };
        if active != was.active {
            record(&ctx, alarm, active, why).await;
        }
    }
}

/// The devices an alarm's conditions read, each once.
fn devices_read(alarm: &Alarm) -> Vec<String> {
    let mut v: Vec<String> = std::iter::once(&alarm.when)
        .chain(alarm.clear_when.as_ref())
        .flat_map(|e| e.devices().iter().map(|(d, _)| d.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Whether a device the alarm reads is silent and the alarm counts that as holding.
fn offline_blocks(ctx: &Context, alarm: &Alarm, ids: &[String]) -> bool {
    alarm.when_offline == WhenOffline::Block
        && ids.iter().any(|id| {
            ctx.devices
                .get(id)
                .is_some_and(|d| d.current().liveness != Liveness::Online)
        })
}

/// Raises or clears the alarm on the board and in the journal.
async fn record(ctx: &Context, alarm: &Alarm, active: bool, why: String) {
    let now = ctx.clock.now_ms();
    let row = closedloop_journal::AlarmRow {
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
    if ctx.alarms.set(&alarm.name, state) {
        tracing::warn!(alarm = %alarm.name, active, "alarm {}", if active { "raised" } else { "cleared" });
        // On the record, with what decided it; a journal that refuses is logged, never
        // waited for: the alarm blocks its devices either way.
        if let Err(e) = ctx.journal.record_alarm(&row).await {
            tracing::error!(alarm = %alarm.name, error = %e, "alarm not journaled");
        }
    }
}

/// Whether `cond` (the alarm's `when` or `clear_when`) holds now, and why in words; a silent
/// device counts as holding when the alarm says `when_offline = "block"`.
fn judge(
    ctx: &Context,
    alarm: &Alarm,
    cond: &closedloop_plant::Expr,
    ids: &[String],
) -> (bool, String) {
    let mut devices = BTreeMap::new();
    for id in ids {
        let Some(dev) = ctx.devices.get(id) else {
            continue;
        };
        let snap = dev.current();
        if snap.liveness != Liveness::Online && alarm.when_offline == WhenOffline::Block {
            return (
                true,
                format!("{id} is not answering, so nothing shows it is safe"),
            );
        }
        devices.insert(id.clone(), snap.plain());
    }
    let signals = BTreeMap::new();
    let params = Params::new();
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    let holds = cond.eval_bool(&scope).unwrap_or(false);
    let values = crate::admit::values_read(cond, &scope);
    (holds, format!("`{}`{values}", cond.source()))
}

#[cfg(test)]
mod tests {
    use super::{AlarmBoard, AlarmState};

    const PLANT: &str = r#"
[[device]]
id = "r"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[alarm]]
name = "HOT"
when = "devices.r.contact"
blocks = ["r"]
[[alarm]]
name = "COLD"
when = "!devices.r.contact"
blocks = ["r"]
"#;

    #[test]
    fn each_alarm_is_read_alone_and_a_raise_moves_the_boards_version() {
        let plant = closedloop_plant::parse(PLANT, "t.toml", std::path::Path::new(".")).unwrap();
        let board = AlarmBoard::new(&plant.alarms);
        let mut version = board.watch();
        assert_eq!(board.state("HOT"), AlarmState::default());
        let hot = AlarmState {
            active: true,
            since: Some("2026-12-04T17:00:00Z".into()),
            why: Some("`devices.r.contact` (devices.r.contact = true)".into()),
        };
        assert!(board.set("HOT", hot.clone()));
        assert!(version.has_changed().unwrap());
        assert_eq!(board.state("HOT"), hot);
        assert!(board.is_active("HOT"));
        assert!(!board.is_active("COLD"));
        assert_eq!(board.state("NO_SUCH"), AlarmState::default());
        assert!(!board.is_active("NO_SUCH"));
        version.mark_unchanged();
        assert!(!board.set("HOT", hot), "raised again: no change");
        assert!(!version.has_changed().unwrap());
        assert_eq!(board.states().len(), 2);
    }
}
