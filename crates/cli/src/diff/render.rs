//! The report of `closedloop diff` for a person: the surface table, the behaviour lines, the
//! journal's moved verdicts, and the summary.

use super::behaviour::{Class, Shift};
use super::journal::{AlarmMove, KEPT, Moved, Totals};
use super::{Change, FailOn, Files, Found, Verdict};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;

/// The whole report: the surface table and its summary, the behaviour lines, the journal's
/// moved verdicts, and which rule decided the exit code.
pub(crate) fn text(found: &Found, (old, new): &Files, rule: FailOn, fails: bool) -> String {
    let mut out = render(&found.surface, old, new);
    out.push('\n');
    out.push_str(&behaviour(&found.behaviour));
    if let Some((totals, moved, alarms)) = &found.journal {
        out.push('\n');
        out.push_str(&journal(totals, moved, alarms));
    }
    let rule = match rule {
        FailOn::Surface => "surface",
        FailOn::Behaviour => "behaviour",
        FailOn::Looser => "looser",
    };
    let verdict = if fails { "exit 1" } else { "exit 0" };
    let _ = writeln!(out, "\n{verdict} (--fail-on {rule})");
    out
}

/// The behaviour lines, classes and places aligned, under a count of each class.
pub(crate) fn behaviour(shifts: &[Shift]) -> String {
    let mut out = String::new();
    if shifts.is_empty() {
        let _ = writeln!(out, "no change to behaviour");
        return out;
    }
    let count = |c: Class| shifts.iter().filter(|s| s.class == c).count();
    let _ = writeln!(
        out,
        "behaviour: {} looser, {} stricter, {} changed",
        count(Class::Looser),
        count(Class::Stricter),
        count(Class::Changed)
    );
    let place_w = shifts
        .iter()
        .map(|s| width(&s.place))
        .max()
        .unwrap_or(0)
        .max(5);
    let key_w = shifts
        .iter()
        .map(|s| width(&s.key))
        .max()
        .unwrap_or(0)
        .max(3);
    let _ = writeln!(
        out,
        "class     where{}  key{}  change",
        pad("where", place_w),
        pad("key", key_w)
    );
    for s in shifts {
        let class = s.class.as_str();
        let _ = writeln!(
            out,
            "{class}{}  {}{}  {}{}  {} → {}: {}",
            pad(class, 8),
            s.place,
            pad(&s.place, place_w),
            s.key,
            pad(&s.key, key_w),
            s.old,
            s.new,
            s.meaning
        );
    }
    out
}

/// The journal judged again: its totals, then each moved command and alarm.
pub(crate) fn journal(t: &Totals, moved: &[Moved], alarms: &[AlarmMove]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "journal: {} command(s), {} decided by their readings and judged again, {} would change; {} reading(s) replayed through the alarms, from {} of them an alarm would stand otherwise",
        t.commands, t.judged, t.moved, t.readings, t.alarm_moves
    );
    if t.unjudged > 0 {
        let _ = writeln!(
            out,
            "{} command(s) confirmed otherwise than by feedback (readback, none) in one of the files: nothing journaled to judge them on",
            t.unjudged
        );
    }
    if t.gone > 0 {
        let _ = writeln!(
            out,
            "{} command(s) ran an action the new file no longer has",
            t.gone
        );
    }
    if !t.unjournaled.is_empty() {
        let n: u64 = t.unjournaled.values().sum();
        let names: Vec<String> = (t.unjournaled.iter())
            .map(|(name, k)| format!("`{name}` is not journaled ({k})"))
            .collect();
        let _ = writeln!(
            out,
            "could not judge {n} command(s): {}; the journal keeps only the signals the old criteria read",
            names.join(", ")
        );
    }
    if !t.unreplayable.is_empty() {
        let n: u64 = t.unreplayable.values().sum();
        let why: Vec<String> = (t.unreplayable.iter())
            .map(|(why, k)| format!("{why} ({k})"))
            .collect();
        let _ = writeln!(
            out,
            "could not judge {n} command(s) again by the engine's rules: {}",
            why.join("; ")
        );
    }
    for m in moved {
        let _ = writeln!(
            out,
            "command {} ({}, accepted {}): {} → {}; reading: {}",
            m.command_id, m.action, m.at, m.old, m.new, m.reading
        );
    }
    for a in alarms {
        let _ = writeln!(
            out,
            "alarm {} from {}: {} under the old file, {} under the new; reading {}",
            a.alarm, a.at, a.old, a.new, a.reading
        );
    }
    for (kept, all, what) in [
        (moved.len(), t.moved, "command"),
        (alarms.len(), t.alarm_moves, "alarm move"),
    ] {
        if (kept as u64) < all {
            let _ = writeln!(
                out,
                "… and {} more {what}(s) (the first {KEPT} are listed)",
                all - kept as u64
            );
        }
    }
    out
}

/// The report as one JSON document, for tools.
pub(crate) fn json(found: &Found, rule: FailOn, fails: bool) -> serde_json::Value {
    let surface: Vec<_> = (found.surface.iter())
        .map(|c| json!({"tool": c.tool, "change": c.what, "verdict": c.verdict.as_str()}))
        .collect();
    let behaviour: Vec<_> = found.behaviour.iter().map(Shift::to_json).collect();
    let journal = found.journal.as_ref().map(|(t, moved, alarms)| {
        let commands: Vec<_> = (moved.iter())
            .map(|m| json!({"command_id": m.command_id, "action": m.action, "accepted_at": m.at, "old": m.old.to_string(), "new": m.new.to_string(), "reading": m.reading}))
            .collect();
        let alarms: Vec<_> = (alarms.iter())
            .map(|a| json!({"alarm": a.alarm, "at": a.at, "old": a.old, "new": a.new, "reading": a.reading}))
            .collect();
        let mut totals = json!({"commands": t.commands, "judged": t.judged, "unjudged": t.unjudged, "moved": t.moved, "gone": t.gone, "readings": t.readings, "alarm_moves": t.alarm_moves, "looser": t.looser, "unjournaled": t.unjournaled});
        if !t.unreplayable.is_empty() {
            // Named only when there are some: the rules' replay said why it could not judge.
            totals["unreplayable"] = json!(t.unreplayable);
        }
        json!({"commands": commands, "alarms": alarms, "totals": totals})
    });
    json!({
        "surface": surface,
        "behaviour": behaviour,
        "journal": journal,
        "fail_on": format!("{rule:?}").to_lowercase(),
        "fails": fails,
    })
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
