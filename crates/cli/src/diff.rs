//! `closedloop diff OLD.toml NEW.toml`: what a new version of a plant file changes for the
//! clients written against the old one.
//!
//! An agent's prompts, a script's calls and a client's cached tool list are written against a
//! tool surface. A plant repository's CI runs this command on each change: every difference is
//! listed as `breaking` (a call that worked may now be refused, or mean something else) or
//! `compatible` (only added or loosened), and the exit code is 1 when anything breaks. The
//! comparison itself ([`rules::compare`]) is a pure function over two loaded plants; this file
//! loads, prints and decides the exit code.

#[cfg(test)]
mod command_tests;
#[cfg(test)]
mod person_tests;
mod rules;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use rules::compare;

/// Whether a change can break a client written against the old plant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A call that worked may now be refused, wait for someone, or mean something else.
    Breaking,
    /// Only added or loosened: every call that worked still works as it did.
    Compatible,
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Breaking => "breaking",
            Verdict::Compatible => "compatible",
        }
    }
}

/// One difference between the two tool surfaces: one row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The tool it concerns (`slide_move_to`), or `(plant)` for the plant-wide settings that
    /// shape every action tool.
    pub tool: String,
    /// What changed, in words a plant's reviewer reads (`parameter target_mm: maximum 300 →
    /// 250 mm`).
    pub what: String,
    /// Whether it can break a client.
    pub verdict: Verdict,
}

impl Change {
    /// A row: `tool`, what changed, and the verdict.
    pub(crate) fn new(tool: &str, what: impl Into<String>, verdict: Verdict) -> Change {
        Change {
            tool: tool.to_string(),
            what: what.into(),
            verdict,
        }
    }
}

/// `closedloop diff OLD NEW`: loads both plant files, prints the table and a summary line;
/// exit 1 when a change is breaking or a file does not load, 0 otherwise.
pub fn run(old: &Path, new: &Path) -> ExitCode {
    let load = |which: &str, path: &Path| {
        closedloop_plant::load(path).map_err(|e| {
            eprintln!(
                "error: the {which} plant file {} does not load:\n{e}",
                path.display()
            )
        })
    };
    let (Ok(old_plant), Ok(new_plant)) = (load("old", old), load("new", new)) else {
        return ExitCode::from(1);
    };
    let changes = compare(&old_plant, &new_plant);
    print!("{}", render(&changes, old, new));
    if changes.iter().any(|c| c.verdict == Verdict::Breaking) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The table (`tool`, `change`, `verdict`, columns aligned) and the summary line; without
/// changes, the summary line alone.
pub(crate) fn render(changes: &[Change], old: &Path, new: &Path) -> String {
    let mut out = String::new();
    let breaking = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Breaking)
        .count();
    let compatible = changes.len() - breaking;
    if changes.is_empty() {
        let _ = writeln!(out, "no change to the tool surface");
        return out;
    }
    let tool_w = changes.iter().map(|c| width(&c.tool)).max().unwrap_or(0);
    let what_w = changes.iter().map(|c| width(&c.what)).max().unwrap_or(0);
    let (tool_w, what_w) = (tool_w.max(4), what_w.max(6));
    let mut row = |tool: &str, what: &str, verdict: &str| {
        let _ = writeln!(
            out,
            "{tool}{}  {what}{}  {verdict}",
            pad(tool, tool_w),
            pad(what, what_w)
        );
    };
    row("tool", "change", "verdict");
    for c in changes {
        row(&c.tool, &c.what, c.verdict.as_str());
    }
    let _ = writeln!(
        out,
        "\n{breaking} breaking, {compatible} compatible: {}",
        if breaking > 0 {
            format!(
                "a client written against {} may fail with {}",
                old.display(),
                new.display()
            )
        } else {
            format!(
                "a client written against {} works with {} as before",
                old.display(),
                new.display()
            )
        }
    );
    out
}

/// Width in characters (units such as `°C` and arrows are one column each, not their bytes).
fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, w: usize) -> String {
    " ".repeat(w.saturating_sub(width(s)))
}

#[cfg(test)]
mod render_tests {
    use super::*;

    #[test]
    fn the_table_aligns_its_columns_and_the_summary_counts_each_verdict() {
        let changes = [
            Change::new("lamp_switch", "removed", Verdict::Breaking),
            Change::new(
                "oven_heat",
                "parameter setpoint_c: maximum 90 → 120 °C (widened)",
                Verdict::Compatible,
            ),
        ];
        let out = render(&changes, Path::new("a.toml"), Path::new("b.toml"));
        assert_eq!(
            out,
            "tool         change                                               verdict\n\
             lamp_switch  removed                                              breaking\n\
             oven_heat    parameter setpoint_c: maximum 90 → 120 °C (widened)  compatible\n\
             \n1 breaking, 1 compatible: a client written against a.toml may fail with b.toml\n"
        );
        let out = render(&changes[1..], Path::new("a.toml"), Path::new("b.toml"));
        assert!(
            out.ends_with("0 breaking, 1 compatible: a client written against a.toml works with b.toml as before\n"),
            "{out}"
        );
        assert_eq!(
            render(&[], Path::new("a"), Path::new("b")),
            "no change to the tool surface\n"
        );
    }
}
