//! `closedloop report PLANT [--since 7d]`: how each tool fared, from the journal.
//!
//! The journal holds every call — accepted or rejected — with its final status, so it already
//! answers what a plant's author wants to know after a week of agents at work: which tools are
//! called, how often the hardware confirmed them, which refusals come back (a tool refused
//! `INVALID_PARAMS` again and again has a schema or description the model misreads), and how
//! long a caller waits for the truth. Read-only, through `journal_cmds::open`, in bounded
//! pages of `Journal::audit` (the rows `closedloop audit` prints), counted as they are read.

mod tally;

use crate::{audit, journal_cmds};
use anyhow::Result;
use closedloop_engine::clock::rfc3339;
use closedloop_journal::AuditFilter;
use closedloop_plant::JournalView;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use tally::Tally;

/// Rows read per page: the history is counted page by page, never held whole.
const PAGE: u32 = 1000;

/// The accepted outcome columns, in the order printed; `open` is accepted or running.
const OUTCOMES: [&str; 6] = [
    "completed",
    "failed",
    "timeout",
    "sent",
    "cancelled",
    "open",
];

/// A tool whose calls were refused `INVALID_PARAMS` this often (and at least
/// [`CONFUSED_MIN_CALLS`] times called) is named under the table as likely misread.
const CONFUSED_SHARE: f64 = 0.25;
/// Fewer calls than this say nothing about a schema.
const CONFUSED_MIN_CALLS: u32 = 4;

/// `closedloop report PLANT --since D|T`: one row per action tool of the plant (never-called
/// ones with zeros), then the calls of tools the plant no longer has and raw writes.
pub async fn run(plant: &JournalView, since: &str) -> Result<ExitCode> {
    let since_ms =
        audit::parse_since(since, audit::now_ms()).map_err(|m| anyhow::anyhow!("--since: {m}"))?;
    let journal = journal_cmds::open(plant).await?;
    let mut report = Report::of(plant);
    let mut filter = AuditFilter {
        since_ms,
        caller: None,
        after: None,
        limit: PAGE,
    };
    loop {
        let rows = journal.audit(&filter).await?;
        for r in &rows {
            report.add(&r.command);
        }
        match rows.last() {
            Some(last) if rows.len() == PAGE as usize => {
                let c = &last.command;
                filter.after = Some((c.accepted_at_ms, c.command_id.clone()));
            }
            _ => break,
        }
    }
    journal.close().await;
    print!(
        "{}",
        report.render(&plant.file.display().to_string(), since_ms)
    );
    Ok(ExitCode::SUCCESS)
}

/// The tallies of one report, one per tool.
///
/// # Invariants
/// `rows[..plant_tools]` are the plant's action tools in plant order; `index` maps each
/// `(device, action)` seen to its row.
struct Report {
    rows: Vec<(String, Tally)>,
    plant_tools: usize,
    index: HashMap<(String, String), usize>,
}

impl Report {
    /// A report with a zero row for every action tool of the plant.
    fn of(plant: &JournalView) -> Report {
        let mut report = Report {
            rows: Vec::new(),
            plant_tools: 0,
            index: HashMap::new(),
        };
        for (device, action, tool) in &plant.tools {
            let key = (device.clone(), action.clone());
            report.index.insert(key, report.rows.len());
            report.rows.push((tool.clone(), Tally::default()));
        }
        report.plant_tools = report.rows.len();
        report
    }

    /// Counts one command; one of an action the plant does not declare gets a row of its own,
    /// named for what made it (`modbus_write lamp` for a raw write).
    fn add(&mut self, c: &closedloop_journal::CommandRow) {
        let key = (c.device.clone(), c.action.clone());
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let name = match c.action.as_str() {
                    "raw_write" => format!("modbus_write {}", c.device),
                    _ => format!("{}_{} (not in the plant)", c.device, c.action),
                };
                self.index.insert(key, self.rows.len());
                self.rows.push((name, Tally::default()));
                self.rows.len() - 1
            }
        };
        self.rows[i].1.add(c);
    }

    /// The summary line, the table, the codes per tool, the tools likely misread, and what
    /// time to truth counts.
    fn render(&self, file: &str, since_ms: i64) -> String {
        let mut rows: Vec<&(String, Tally)> = self.rows[..self.plant_tools].iter().collect();
        let mut others: Vec<&(String, Tally)> = self.rows[self.plant_tools..].iter().collect();
        others.sort_by(|a, b| a.0.cmp(&b.0));
        rows.extend(others);
        let calls: u32 = rows.iter().map(|(_, t)| t.calls).sum();
        let accepted: u32 = rows.iter().map(|(_, t)| t.accepted()).sum();
        let mut out = format!(
            "{file}: {calls} call(s) since {}, {accepted} accepted, {} rejected\n\n",
            rfc3339(since_ms),
            calls - accepted
        );
        out += &table(&rows);
        out += &codes(&rows);
        out += &confused(&rows);
        out += "\nto truth: the median time from accepted to completed, or to failed on the device's \
                own answer\n(not DEVICE_OFFLINE, CRC_MISMATCH or INTERRUPTED), with how many commands \
                ended so; timeout, sent and cancelled are left out\n";
        out
    }
}

/// The table: per tool, calls, accepted, each outcome, rejected, the share refused
/// `INVALID_PARAMS` and the median time to truth.
fn table(rows: &[&(String, Tally)]) -> String {
    let mut head: Vec<String> = ["tool", "calls", "accepted"].map(String::from).to_vec();
    head.extend(OUTCOMES.map(String::from));
    head.extend(["rejected", "INVALID_PARAMS", "to truth"].map(String::from));
    let mut lines = vec![head];
    for (tool, t) in rows {
        let mut cells = vec![tool.clone(), t.calls.to_string(), t.accepted().to_string()];
        cells.extend(OUTCOMES.iter().map(|o| t.outcome(o).to_string()));
        cells.push((t.calls - t.accepted()).to_string());
        cells.push(match t.calls {
            0 => "-".into(),
            n => format!(
                "{:.0}%",
                f64::from(t.invalid_params()) * 100.0 / f64::from(n)
            ),
        });
        cells.push(match t.median_truth_ms() {
            Some(ms) => format!("{} ({})", duration(ms), t.truth_ms.len()),
            None => "-".into(),
        });
        lines.push(cells);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        let mut line = format!("{:<w$}", l[0], w = widths[0]);
        for (cell, w) in l.iter().zip(&widths).skip(1) {
            let _ = write!(line, "  {cell:>w$}");
        }
        out += &line;
        out.push('\n');
    }
    out
}

/// Each tool's rejections and coded endings, the most frequent first.
fn codes(rows: &[&(String, Tally)]) -> String {
    let mut out = String::new();
    for (tool, t) in rows {
        let mut items: Vec<(u32, String)> = t
            .rejected
            .iter()
            .map(|(code, n)| (*n, format!("rejected {code}")))
            .chain(
                t.ended
                    .iter()
                    .map(|((s, code), n)| (*n, format!("{s} {code}"))),
            )
            .collect();
        if items.is_empty() {
            continue;
        }
        items.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let items: Vec<String> = items
            .iter()
            .map(|(n, what)| format!("{what} {n}"))
            .collect();
        if out.is_empty() {
            out += "\nby code\n";
        }
        let _ = writeln!(out, "  {tool}: {}", items.join(", "));
    }
    out
}

/// The tools refused `INVALID_PARAMS` in at least [`CONFUSED_SHARE`] of their calls.
fn confused(rows: &[&(String, Tally)]) -> String {
    let mut out = String::new();
    for (tool, t) in rows {
        let share = f64::from(t.invalid_params()) / f64::from(t.calls.max(1));
        if t.calls >= CONFUSED_MIN_CALLS && share >= CONFUSED_SHARE {
            let _ = writeln!(
                out,
                "\n{tool}: {} of {} calls ({:.0}%) refused INVALID_PARAMS: its parameters or \
                 description may confuse the model (`closedloop lint` names likely causes)",
                t.invalid_params(),
                t.calls,
                share * 100.0
            );
        }
    }
    out
}

/// `35 ms`, `1.2 s`, `4.5 min`.
fn duration(ms: u32) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", f64::from(ms) / 1_000.0),
        _ => format!("{:.1} min", f64::from(ms) / 60_000.0),
    }
}

#[cfg(test)]
mod tests;
