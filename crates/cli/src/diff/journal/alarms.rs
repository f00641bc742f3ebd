//! The journal's readings replayed, in the order they were written, through the alarms of both
//! files: each reading updates the last value known of every signal it carries, and each alarm
//! is stepped as the engine's watch steps it (raised once `when` has held `for_ms` on the
//! readings, cleared when its clear condition holds). A raise or clear that happens under one
//! file and not the other at a reading is a move; an alarm only the new file has moves at every
//! raise and clear it would have made.
//!
//! The journal keeps readings taken while commands ran, of the signals their criteria read:
//! between commands it has none, and the replay says how many it had.

use super::verdict::{Reading, value};
use super::{Totals, sample};
use crate::diff::behaviour::alarm_clears;
use anyhow::Result;
use closedloop_driver::Value;
use closedloop_engine::clock::rfc3339;
use closedloop_journal::Journal;
use closedloop_plant::{Alarm, Expr, Params, Plant, Scope};
use std::collections::{BTreeMap, BTreeSet};

/// Readings read per page.
const PAGE: u32 = 1000;

/// An alarm raise or clear that would move.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AlarmMove {
    pub alarm: String,
    /// When the reading was journaled (RFC 3339).
    pub at: String,
    /// What the old file's alarm did at this reading: `raised`, `cleared` or `nothing`.
    pub old: &'static str,
    /// What the new file's did.
    pub new: &'static str,
    /// The device and values of the reading.
    pub reading: String,
}

/// One alarm of one file, stepped over the readings.
struct Track<'a> {
    alarm: &'a Alarm,
    clears: Expr,
    active: bool,
    /// When `when` began to hold, while it is not yet raised.
    holding_since: Option<i64>,
}

impl<'a> Track<'a> {
    fn new(alarm: &'a Alarm) -> Track<'a> {
        Track {
            alarm,
            clears: alarm_clears(alarm),
            active: false,
            holding_since: None,
        }
    }

    /// `Some(true)` when this reading raises it, `Some(false)` when it clears it.
    fn step(&mut self, scope: &Scope, at_ms: i64) -> Option<bool> {
        if self.active {
            let clear = self.clears.eval_bool(scope).ok()?;
            self.active = !clear;
            return clear.then_some(false);
        }
        if !self.alarm.when.eval_bool(scope).ok()? {
            self.holding_since = None;
            return None;
        }
        let since = *self.holding_since.get_or_insert(at_ms);
        if at_ms - since >= self.alarm.for_ms as i64 {
            self.active = true;
            self.holding_since = None;
            return Some(true);
        }
        None
    }
}

fn did(step: Option<bool>) -> &'static str {
    match step {
        Some(true) => "raised",
        Some(false) => "cleared",
        None => "nothing",
    }
}

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
    let mut tracks: Vec<(&str, Option<Track>, Option<Track>)> = names
        .iter()
        .map(|n| (*n, track(old, n), track(new, n)))
        .collect();
    let mut known: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let (params, mut after) = (Params::new(), 0);
    loop {
        let page = journal.readings(after, PAGE).await?;
        for row in &page {
            let Some(reading) = Reading::from_event(&row.data) else {
                continue;
            };
            totals.readings += 1;
            sample(&mut totals.recorded, &row.device, &reading);
            learn(&mut known, &row.device, &reading);
            let signals = BTreeMap::new();
            let scope = Scope {
                signals: &signals,
                params: &params,
                devices: &known,
                extra_strings: &[],
            };
            for (name, o, n) in &mut tracks {
                let a = o.as_mut().and_then(|t| t.step(&scope, row.at_ms));
                let b = n.as_mut().and_then(|t| t.step(&scope, row.at_ms));
                if a != b {
                    totals.alarm_moves += 1;
                    moved(AlarmMove {
                        alarm: name.to_string(),
                        at: rfc3339(row.at_ms),
                        old: did(a),
                        new: did(b),
                        reading: format!("{}: {}", row.device, reading.words()),
                    });
                }
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
fn learn(known: &mut BTreeMap<String, BTreeMap<String, Value>>, device: &str, r: &Reading) {
    for (name, v) in &r.values {
        let Some(v) = value(v) else { continue };
        let (d, s) = match name
            .strip_prefix("devices.")
            .and_then(|rest| rest.split_once('.'))
        {
            Some((d, s)) => (d, s),
            None => (device, name.as_str()),
        };
        known
            .entry(d.to_string())
            .or_default()
            .insert(s.to_string(), v);
    }
}
