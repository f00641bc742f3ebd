//! `closedloop diff OLD NEW --journal PLANT_OR_URL`: yesterday's commands and readings, judged
//! again under the new file. Every recorded command's readings go through the new action's
//! criteria by the engine's own rules ([`verdict::judge`]); every command whose verdict would differ from the one the
//! journal recorded is named, with the reading that decides it. Every recorded reading goes,
//! in journal order, through the alarms of both files ([`alarms`]); every reading from which an
//! alarm would stand otherwise (active under one file, not under the other) is named.
//!
//! Streamed: commands are read in pages of [`PAGE`] with their timelines, readings in pages by
//! `seq`; memory holds one page, the alarms' state, a bounded sample of the values seen (for the
//! expression comparison) and at most [`KEPT`] moved commands and alarm moves for the report,
//! whatever the journal's length (the totals count every one).
//!
//! Only actions confirmed by feedback in both files are judged again: a readback or `none`
//! action journals no readings (its outcome is the registers read back, or nothing), so there
//! is nothing to judge it on; such commands are counted as not judged.

mod alarms;
pub(crate) mod verdict;

use super::behaviour::Recorded;
use anyhow::Result;
use closedloop_engine::clock::rfc3339;
use closedloop_engine::verdict::Timeline;
use closedloop_journal::{AuditFilter, CommandRow, Journal};
use closedloop_plant::{Action, Device, Plant, Verification};
use verdict::{Reading, Verdict};

/// Commands read per page.
const PAGE: u32 = 500;
/// Moved commands (and alarm moves) kept for the report; the totals count every one.
pub(crate) const KEPT: usize = 10_000;
/// Values kept per name for the expression comparison.
const SAMPLES: usize = 64;

/// A command whose verdict would change.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Moved {
    pub command_id: String,
    /// When it was accepted (RFC 3339).
    pub at: String,
    /// `oven.set_temperature`.
    pub action: String,
    pub old: Verdict,
    pub new: Verdict,
    /// The reading that decides the new verdict, or the last one when none does.
    pub reading: String,
}

/// What one pass over the journal found, beyond the lines already printed.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    /// Commands in the journal.
    pub commands: u64,
    /// Those a reading decided, judged again.
    pub judged: u64,
    /// Of those, the ones whose verdict would change.
    pub moved: u64,
    /// Those whose action the new file no longer has.
    pub gone: u64,
    /// Readings replayed through the alarms.
    pub readings: u64,
    /// Readings from which an alarm would stand otherwise.
    pub alarm_moves: u64,
    /// Decided commands not judged again: an action confirmed otherwise than by feedback in
    /// one of the files.
    pub unjudged: u64,
    /// Commands the new criteria could not be judged on, by the first name they read that the
    /// journal never kept for them.
    pub unjournaled: std::collections::BTreeMap<String, u64>,
    /// Commands not judged again because the engine's decision would rest on what the journal
    /// does not keep, by the reason (`closedloop_engine::verdict::replay`).
    pub unreplayable: std::collections::BTreeMap<String, u64>,
    /// Moves that let more through: a command that would now complete, an alarm active under
    /// the old file and not under the new.
    pub looser: u64,
    /// Values seen, by name (a bounded sample).
    pub recorded: Recorded,
}

/// Opens the journal a plant file names, or the one a URL (`sqlite://…`, `postgres://…`)
/// names, read-only.
pub(crate) async fn open(arg: &str) -> Result<Journal> {
    let is_url = ["sqlite:", "postgres://", "postgresql://"]
        .iter()
        .any(|p| arg.starts_with(p));
    if is_url {
        return crate::journal_cmds::open_url(arg, arg).await;
    }
    let plant = crate::journal_view(std::path::Path::new(arg)).map_err(|e| {
        anyhow::anyhow!("--journal {arg}: neither a journal URL (sqlite://…, postgres://…) nor a plant file that names one:\n{e}")
    })?;
    crate::journal_cmds::open(&plant).await
}

/// Re-judges every recorded command under `new`, calling `moved` for each whose verdict would
/// change, in the order they were accepted.
pub(crate) async fn commands(
    journal: &Journal,
    (old, new): (&Plant, &Plant),
    totals: &mut Totals,
    mut moved: impl FnMut(Moved),
) -> Result<()> {
    let mut filter = AuditFilter {
        limit: PAGE,
        ..AuditFilter::default()
    };
    loop {
        let page = journal.audit(&filter).await?;
        let Some(last) = page.last() else { break };
        filter.after = Some((last.command.accepted_at_ms, last.command.command_id.clone()));
        for row in page.iter().map(|a| &a.command) {
            totals.commands += 1;
            let (Some(a), b) = (action_of(old, row), action_of(new, row)) else {
                continue;
            };
            let Some(b) = b else {
                totals.gone += 1;
                continue;
            };
            let Some(was) = verdict::recorded(row, a) else {
                continue;
            };
            let feedback = |x: &Action| x.verification == Verification::Feedback;
            if !feedback(a) || !feedback(b) {
                totals.unjudged += 1;
                continue;
            }
            let (timeline, readings) = readings_of(journal, row).await?;
            if let Some(name) = (!readings.is_empty())
                .then(|| verdict::unjournaled(b, &readings))
                .flatten()
            {
                *totals.unjournaled.entry(name).or_default() += 1;
                continue;
            }
            let device = new
                .device(&row.device)
                .expect("the new file has the action's device");
            let m = match one(row, (device, b), was, &timeline, &readings) {
                Ok(m) => m,
                Err(why) => {
                    *totals.unreplayable.entry(why).or_default() += 1;
                    continue;
                }
            };
            totals.judged += 1;
            if let Some(m) = m {
                totals.moved += 1;
                totals.looser += u64::from(m.new == Verdict::Completed);
                moved(m);
            }
        }
        if page.len() < PAGE as usize {
            break;
        }
    }
    Ok(())
}

fn action_of<'p>(plant: &'p Plant, row: &CommandRow) -> Option<&'p Action> {
    plant.device(&row.device)?.action(&row.action)
}

/// The command's timeline as the replay reads it, and its journaled readings, in order.
async fn readings_of(journal: &Journal, row: &CommandRow) -> Result<(Timeline, Vec<Reading>)> {
    let events = journal.events(&row.command_id).await?;
    let readings = (events.iter())
        .filter(|e| e.event == "signal")
        .filter_map(|e| Reading::from_event(&e.data))
        .collect();
    Ok((Timeline::of(&events), readings))
}

/// The command's verdict under `b` (of `device`), when it differs from the recorded one; `Err`
/// with the reason when the journal cannot replay it.
fn one(
    row: &CommandRow,
    (device, b): (&Device, &Action),
    was: Verdict,
    timeline: &Timeline,
    readings: &[Reading],
) -> std::result::Result<Option<Moved>, String> {
    let args = row.params.as_object().cloned().unwrap_or_default();
    let (now, at) = match b.check_params(&args) {
        Ok(params) => verdict::judge(b, device, &params, timeline, readings)?,
        Err(e) => (Verdict::Refused(e.to_string()), None),
    };
    if now == was {
        return Ok(None);
    }
    let reading = match (at, readings.last()) {
        (Some(i), _) => verdict::words(&readings[i]),
        (None, Some(last)) => format!("none decides it; the last was {}", verdict::words(last)),
        (None, None) => "no reading was journaled".to_string(),
    };
    Ok(Some(Moved {
        command_id: row.command_id.clone(),
        at: rfc3339(row.accepted_at_ms),
        action: format!("{}.{}", row.device, row.action),
        old: was,
        new: now,
        reading,
    }))
}

/// Adds a reading's values to the bounded sample, by the names alarms and other devices'
/// criteria read them (`devices.<id>.<signal>`).
pub(crate) fn sample(recorded: &mut Recorded, device: &str, reading: &Reading) {
    for (name, v) in &reading.values {
        let Some(n) = v.as_f64() else { continue };
        let key = if name.starts_with("devices.") {
            name.clone()
        } else {
            closedloop_plant::other_device_name(device, name)
        };
        let seen = recorded.entry(key).or_default();
        if seen.len() < SAMPLES && !seen.contains(&n) {
            seen.push(n);
        }
    }
}

pub(crate) use alarms::{AlarmMove, replay as replay_alarms};
