//! `closedloop diff OLD.toml NEW.toml`: what a new version of a plant file changes, for the
//! clients written against the old one and for the people next to the machine.
//!
//! An agent's prompts, a script's calls and a client's cached tool list are written against a
//! tool surface: every difference there is `breaking` (a call that worked may now be refused,
//! or mean something else) or `compatible` ([`surface::compare`]). A plant change can keep that
//! surface identical and still change what the hardware must show before closedloop says
//! `completed`, what it writes, or what stops it: every such difference is a [`behaviour`]
//! line, classed looser, stricter or changed. With `--journal`, the commands and readings a
//! journal recorded are judged again under the new file ([`journal`]).
//!
//! A plant repository's CI runs this command on each change; `--fail-on` chooses what exits 1.
//! This file loads, runs the comparisons and decides the exit code; [`render`] prints.

pub(crate) mod behaviour;
#[cfg(test)]
mod behaviour_tests;
#[cfg(test)]
mod command_tests;
pub(crate) mod exprs;
mod journal;
#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod person_tests;
mod render;
mod surface;
#[cfg(test)]
mod tests;

use behaviour::{Class, Shift};
use journal::{AlarmMove, Moved, Totals};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use surface::compare;

/// What makes `closedloop diff` exit 1 (besides a file that does not load).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FailOn {
    /// Only a surface change that can break a client.
    Surface,
    /// That, or any behaviour change, or a recorded verdict that would move (the default: a
    /// change of what `completed` means is reviewed like a broken call).
    #[default]
    Behaviour,
    /// That, or a change that lets more through: a looser line, a recorded command that would
    /// now complete, an alarm active under OLD and not under NEW.
    Looser,
}

/// The options of `closedloop diff`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// What exits 1.
    pub fail_on: FailOn,
    /// One JSON document instead of the tables.
    pub json: bool,
    /// A plant file or journal URL whose recorded commands and readings are judged again.
    pub journal: Option<String>,
}

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

/// Everything the comparison found.
pub(crate) struct Found {
    pub surface: Vec<Change>,
    pub behaviour: Vec<Shift>,
    /// With `--journal`: the totals, and the moved commands and alarms (in journal order).
    pub journal: Option<(Totals, Vec<Moved>, Vec<AlarmMove>)>,
}

/// `closedloop diff OLD NEW`: loads both plant files, compares them (and re-judges the journal
/// when asked), prints the report; exit 1 when `--fail-on` says so or a file does not load.
pub fn run(old: &Path, new: &Path, opts: &Options) -> ExitCode {
    let load = |which: &str, path: &Path| {
        crate::instance::load_noted(path).map_err(|e| {
            eprintln!(
                "error: the {which} plant file {} does not load:\n{e}",
                path.display()
            )
        })
    };
    let (Ok(old_plant), Ok(new_plant)) = (load("old", old), load("new", new)) else {
        return ExitCode::from(1);
    };
    let journal = match &opts.journal {
        None => None,
        Some(arg) => match rejudge(arg, (&old_plant, &new_plant)) {
            Ok(j) => Some(j),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(1);
            }
        },
    };
    let recorded = journal
        .as_ref()
        .map(|(t, ..)| t.recorded.clone())
        .unwrap_or_default();
    let found = Found {
        surface: compare(&old_plant, &new_plant),
        behaviour: behaviour::compare(&old_plant, &new_plant, &recorded),
        journal,
    };
    let files = (old.to_path_buf(), new.to_path_buf());
    let fails = fails(&found, opts.fail_on);
    if opts.json {
        println!("{}", render::json(&found, opts.fail_on, fails));
    } else {
        print!("{}", render::text(&found, &files, opts.fail_on, fails));
    }
    if fails {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Whether `found` fails the `--fail-on` rule.
pub(crate) fn fails(found: &Found, rule: FailOn) -> bool {
    let breaking = found.surface.iter().any(|c| c.verdict == Verdict::Breaking);
    let (moves, looser) = match &found.journal {
        Some((t, ..)) => (t.moved + t.alarm_moves, t.looser),
        None => (0, 0),
    };
    breaking
        || match rule {
            FailOn::Surface => false,
            FailOn::Behaviour => !found.behaviour.is_empty() || moves > 0,
            FailOn::Looser => {
                found.behaviour.iter().any(|s| s.class == Class::Looser) || looser > 0
            }
        }
}

/// Opens the journal and judges it again; moved commands and alarms are kept up to
/// [`journal::KEPT`] each (the totals count them all).
fn rejudge(
    arg: &str,
    plants: (&closedloop_plant::Plant, &closedloop_plant::Plant),
) -> anyhow::Result<(Totals, Vec<Moved>, Vec<AlarmMove>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let j = journal::open(arg).await?;
        let mut totals = Totals::default();
        let (mut moved, mut alarms) = (Vec::new(), Vec::new());
        journal::commands(&j, plants, &mut totals, |m| {
            if moved.len() < journal::KEPT {
                moved.push(m);
            }
        })
        .await?;
        journal::replay_alarms(&j, plants, &mut totals, |a| {
            if alarms.len() < journal::KEPT {
                alarms.push(a);
            }
        })
        .await?;
        j.close().await;
        Ok((totals, moved, alarms))
    })
}

/// The two plant files as the command line named them: the report's words say which is which.
pub(crate) type Files = (PathBuf, PathBuf);
