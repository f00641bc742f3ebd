//! The journal's readings replayed, in the order they were written, through the alarms of both
//! files: each reading updates the last value known of every signal it carries, and each alarm
//! is stepped as the engine's watch steps it (`alarms/watch/one.rs`): active once `when` has held
//! `for_ms`; once active with a `clear_when`, active until that holds; without one, active while
//! `when` holds. A value older than its device's liveness window is not used (the engine would
//! not use it either); an alarm that cannot be evaluated on what is known keeps its state.
//!
//! A move is a reading from which the two files' alarm stands differently — active under one,
//! not under the other — where it stood alike (or the other way) before. An alarm only one file
//! has counts as never active under the other.
//!
//! The journal keeps readings taken while commands ran, of the signals their criteria read:
//! between commands it has none, and the replay says how many it had.

use super::verdict::Reading;
use super::{Totals, sample};
use anyhow::Result;
use closedloop_contract::Value;
use closedloop_engine::clock::rfc3339;
use closedloop_engine::verdict::value_of_json as value;
use closedloop_journal::Journal;
use closedloop_plant::{Alarm, Params, Plant, Scope};
use std::collections::{BTreeMap, BTreeSet};

/// Readings read per page.
const PAGE: u32 = 1000;

/// A reading from which an alarm stands differently under the two files.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AlarmMove {
    pub alarm: String,
    /// When the reading was journaled (RFC 3339).
    pub at: String,
    /// Under the old file from this reading on: `active` or `inactive`.
    pub old: &'static str,
    /// Under the new file.
    pub new: &'static str,
    /// The device and values of the reading.
    pub reading: String,
}

/// One alarm of one file, stepped over the readings.
struct Track<'a> {
    alarm: &'a Alarm,
    active: bool,
    /// Since when `when` has held, while it holds.
    holding_since: Option<i64>,
}

impl<'a> Track<'a> {
    fn new(alarm: &'a Alarm) -> Track<'a> {
        Track {
            alarm,
            active: false,
            holding_since: None,
        }
    }

    /// Steps it on the values known at `at_ms`; it keeps its state when they cannot decide.
    fn step(&mut self, scope: &Scope, at_ms: i64) {
        let Ok(holds) = self.alarm.when.eval_bool(scope) else {
            return;
        };
        let since = match holds {
            true => *self.holding_since.get_or_insert(at_ms),
            false => {
                self.holding_since = None;
                at_ms
            }
        };
        let raised = holds && at_ms - since >= self.alarm.for_ms as i64;
        self.active = match (&self.alarm.clear_when, self.active) {
            (Some(clear), true) => !clear.eval_bool(scope).unwrap_or(false),
            _ => raised,
        };
    }
}

fn stands(active: bool) -> &'static str {
    if active { "active" } else { "inactive" }
}

/// Each alarm by name, under the old file and the new (absent from one: `None`), and how it
/// stood under each after the last reading.
type Tracks<'a> = Vec<(&'a str, Option<Track<'a>>, Option<Track<'a>>, (bool, bool))>;

/// Values known, by device and signal, with when they were journaled.
type Known = BTreeMap<String, BTreeMap<String, (Value, i64)>>;

/// Replays every reading through both files' alarms, calling `moved` for each move.
pub(crate) async fn replay(
    journal: &Journal,
    (old, new): (&Plant, &Plant),
    totals: &mut Totals,
    mut moved: impl FnMut(AlarmMove),
) -> Result<()> {
    let names: BTreeSet<&str> = old
        .alarms
        .iter()
        .chain(&new.alarms)
        .map(|a| a.name.as_str())
        .collect();
    let mut tracks: Tracks = names
        .iter()
        .map(|n| (*n, track(old, n), track(new, n), (false, false)))
        .collect();
    let window = |device: &str| {
        let d = new.device(device).or_else(|| old.device(device));
        d.map_or(2_000, |d| (d.liveness.max_silence_s * 1000.0) as i64)
    };
    let mut known = Known::new();
    let (params, mut after) = (Params::new(), 0);
    loop {
        let page = journal.readings(after, PAGE).await?;
        for row in &page {
            let Some(reading) = Reading::from_event(&row.data) else {
                continue;
            };
            totals.readings += 1;
            sample(&mut totals.recorded, &row.device, &reading);
            learn(&mut known, &row.device, &reading, row.at_ms);
            let devices = usable(&known, row.at_ms, &window);
            let signals = BTreeMap::new();
            let scope = Scope {
                signals: &signals,
                params: &params,
                devices: &devices,
                extra_strings: &[],
            };
            for (name, o, n, was) in &mut tracks {
                for t in [o.as_mut(), n.as_mut()].into_iter().flatten() {
                    t.step(&scope, row.at_ms);
                }
                let now = (
                    o.as_ref().is_some_and(|t| t.active),
                    n.as_ref().is_some_and(|t| t.active),
                );
                if now.0 != now.1 && now != *was {
                    totals.alarm_moves += 1;
                    totals.looser += u64::from(now.0);
                    moved(AlarmMove {
                        alarm: name.to_string(),
                        at: rfc3339(row.at_ms),
                        old: stands(now.0),
                        new: stands(now.1),
                        reading: format!("{}: {}", row.device, super::verdict::words(&reading)),
                    });
                }
                *was = now;
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE as usize => after = last.seq,
            _ => break,
        }
    }
    Ok(())
}

fn track<'p>(plant: &'p Plant, name: &str) -> Option<Track<'p>> {
    plant.alarms.iter().find(|a| a.name == name).map(Track::new)
}

/// The reading's values, as the last known of each device's signals.
fn learn(known: &mut Known, device: &str, r: &Reading, at_ms: i64) {
    for (name, v) in &r.values {
        let Some(v) = value(v) else { continue };
        let (d, s) = match closedloop_plant::other_device(name) {
            Some((d, s)) => (d, s),
            None => (device, name.as_str()),
        };
        known
            .entry(d.to_string())
            .or_default()
            .insert(s.to_string(), (v, at_ms));
    }
}

/// The known values no older than their device's liveness window at `now_ms`.
fn usable(
    known: &Known,
    now_ms: i64,
    window: &impl Fn(&str) -> i64,
) -> BTreeMap<String, BTreeMap<String, Value>> {
    known
        .iter()
        .map(|(d, signals)| {
            let w = window(d);
            let fresh = (signals.iter())
                .filter(|(_, (_, at))| now_ms - at <= w)
                .map(|(s, (v, _))| (s.clone(), *v))
                .collect();
            (d.clone(), fresh)
        })
        .collect()
}
