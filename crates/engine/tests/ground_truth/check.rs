//! The properties: what the journal says against what the simulator physically did.

#[path = "check/across.rs"]
mod across;
#[path = "check/alarms.rs"]
mod alarms;
#[path = "check/board.rs"]
mod board;
#[path = "check/cmd.rs"]
mod cmd;
#[path = "check/command.rs"]
mod command;
#[path = "check/no_value.rs"]
mod no_value;
#[path = "check/replayed.rs"]
mod replayed;
#[path = "check/requires.rs"]
mod requires;

pub use cmd::{Cmd, commands};

use super::physical::cycle_starts;
use super::rig::Outcome;
use super::spec::Case;
use across::{check_groups, check_writes};
use cmd::TERMINAL;
use command::Judge;

/// What the checks found: violations fail the case; limitations are false outcomes the engine
/// cannot avoid (a sensor that reads inverted), counted and reported.
#[derive(Debug, Default)]
pub struct Findings {
    pub violations: Vec<String>,
    pub limitations: Vec<String>,
    /// False outcomes of an engine bug that has its own (ignored) regression test.
    pub known: Vec<String>,
    /// Every command's `status CODE`, for the coverage summary.
    pub outcomes: Vec<String>,
    /// Commands whose exact outcome the plant decided (and was checked).
    pub exact: usize,
    /// Commands supervised across a restart.
    pub recovered: usize,
    /// How many times each rarer situation a property looks at came up (for the summary).
    pub covered: std::collections::BTreeMap<&'static str, usize>,
}

impl Findings {
    /// Counts one more `what` for the coverage summary.
    pub fn cover(&mut self, what: &'static str) {
        *self.covered.entry(what).or_default() += 1;
    }
}

/// Every property of a case's outcome: nothing lost or invented, then each command, then the
/// writes and the exclusive groups across commands.
pub fn check(case: &Case, out: &Outcome) -> Findings {
    let cmds = commands(case, out);
    let mut f = Findings::default();
    answers_match_the_journal(out, &mut f.violations);
    restarts_keep_what_they_held(out, &mut f.violations);
    the_journal_holds_only_submissions(out, &cmds, &mut f.violations);
    let judge = Judge {
        case,
        out,
        cmds: &cmds,
        cycles: cycle_starts(&out.obs),
    };
    for c in &cmds {
        judge.command(c, &mut f);
    }
    check_writes(case, out, &cmds, &mut f.violations);
    check_groups(case, &cmds, &mut f.violations);
    alarms::check_alarm(case, out, &cmds, &mut f);
    requires::check_requires(case, out, &cmds, &mut f);
    let toml = super::spec::case_toml(case);
    let plant = closedloop_plant::parse(&toml, "case.toml", std::path::Path::new("."));
    replayed::check_replay(&plant.expect("the case's plant"), &cmds, &mut f);
    f
}

/// Every command settled, and each terminal answer of a submission is what the journal holds.
fn answers_match_the_journal(out: &Outcome, v: &mut Vec<String>) {
    for id in &out.unsettled {
        v.push(format!("command {id} never reached a terminal status"));
    }
    for s in &out.submitted {
        let r = match &s.result {
            Err(e) => {
                v.push(format!("step {}: submit failed: {e}", s.step));
                continue;
            }
            Ok(r) => r,
        };
        let Some(j) = out.journal.get(&r.command_id) else {
            v.push(format!(
                "step {}: command {} ({}) is not in the journal",
                s.step, r.command_id, r.status
            ));
            continue;
        };
        if !r.status.is_terminal() {
            continue;
        }
        let said = (
            r.status.as_str(),
            r.error_code.as_ref().map(|c| c.as_str().to_string()),
            r.verified,
        );
        let now = (
            j.row.status.as_str(),
            j.row.error_code.clone(),
            j.row.verified,
        );
        if said != now {
            v.push(format!(
                "step {}: submit answered {said:?}, the journal says {now:?}",
                s.step
            ));
        }
    }
}

/// What the journal held at each restart is still there, and a terminal state never changed.
fn restarts_keep_what_they_held(out: &Outcome, v: &mut Vec<String>) {
    for (i, held) in out.at_restart.iter().enumerate() {
        for (id, (status, code, verified)) in held {
            match out.journal.get(id) {
                None => v.push(format!(
                    "command {id} was in the journal at restart {i} and is gone"
                )),
                Some(j) if TERMINAL.contains(&status.as_str()) => {
                    let now = (&j.row.status, &j.row.error_code, j.row.verified);
                    if now != (status, code, *verified) {
                        v.push(format!(
                            "command {id} was {status} {code:?} (verified {verified}) at restart {i}, ends {now:?}"
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }
}

/// Every command in the journal was submitted, and ends in a terminal status.
fn the_journal_holds_only_submissions(out: &Outcome, cmds: &[Cmd], v: &mut Vec<String>) {
    let submitted_ids: Vec<&str> = out
        .submitted
        .iter()
        .filter_map(|s| s.result.as_ref().ok().map(|r| r.command_id.as_str()))
        .collect();
    for c in cmds {
        if !submitted_ids.contains(&c.id) {
            v.push(format!(
                "command {} in the journal was never submitted",
                c.id
            ));
        }
        if !TERMINAL.contains(&c.status) {
            v.push(format!("command {} ends {} in the journal", c.id, c.status));
        }
    }
}
