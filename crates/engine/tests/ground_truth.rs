//! Property-based ground truth: random plants and random command scripts through the engine,
//! every outcome checked against what the simulated devices physically did.
//!
//! A case is 1–3 simulated relays, steppers and heaters (random speeds, travel, pull-in, poll
//! periods 10–100 ms, liveness windows, request timeouts, expect_s consistent or deliberately
//! wrong, plant faults with random `after_ms`, shared exclusive groups, `requires` and
//! `done_when` on other devices, a standing alarm on one device's feedback blocking another) and
//! a script of up to 7 steps at random (virtual) times: submits (concurrent, some waiting),
//! cancels, run-time fault injections and clears, one device's feedback register answering
//! exception 4 while the rest of it answers (`Op::Refuse`), a relay board going silent, deaf,
//! garbled (its reports carry no value) or back (`Op::Board`), and engine restarts on the same
//! journal, with the devices kept running or power-cycled too (`ground_truth/spec.rs`,
//! `strategy.rs`). Two kinds of case are built on purpose besides the random ones: a command
//! waiting in its exclusive group's queue behind a long one while the device its `requires`
//! names turns the precondition false, goes stale or silent, is refused or sends no value
//! (`queue.rs`); and a board whose payloads turn garbled and whole again around commands on it,
//! the alarm on its contact and a `requires` on it (`garbled.rs`). `rig.rs` runs it on a paused
//! clock — `fence.rs`
//! keeps the clock still while SQLite works, so a case replays the same way — and wraps every
//! simulated device in a driver that logs each request with the device's physical state.
//!
//! The properties (`check.rs`; each command's in `check/command.rs`; `physical.rs`), against that
//! physical record:
//! - `completed` + verified: `done_when` held physically on a fresh read after the ack;
//! - `FEEDBACK_MISMATCH`: the feedback never physically moved between the ack and the deadline;
//! - `TIMEOUT` (relays, heaters): no fresh, truthful read the engine had to judge found it done;
//! - `MOTOR_STALL`: the fault output was physically on (after the ack, or when refused);
//! - `device_ack`: the device acknowledged the plan's last write at that very instant;
//! - every command terminal by its deadline + 2 s + its liveness window + a request timeout
//!   (+ the clock skew a restart adds, see `check::Cmd::recovered_skew`), and out of its queue
//!   by `queue_timeout_s` + the same slack;
//! - every write the devices received was a plan write of a command between its `dispatched`
//!   and its terminal event, or a cancel plan after a dispatch;
//! - no two commands of one exclusive group between dispatch and terminal at once;
//! - nothing lost, nothing invented: every submitted command in the journal, terminal, and a
//!   terminal state seen (by a waiting submit, or in the journal at a restart) never changes;
//! - exact outcomes where the plant alone decides them (`expect.rs`);
//! - the standing alarm (`check/alarms.rs`): never cleared on a signal whose register answers
//!   exceptions, each clear resting on a read that showed it physically clear, raised when a
//!   refusal lasts (it fails safe), and never a completion on the device it blocks once raised;
//! - `requires` (`check/requires.rs`): a command dispatched under a precondition on another
//!   device was dispatched on a read of it, answered shortly before the dispatch, that showed it
//!   physically true — never on a refused read or a cached value, however long it waited in its
//!   queue (admission's read counts for nothing); a queued one refused at dispatch because the
//!   precondition "no longer held" rests on a fresh read that showed it physically false;
//! - relays behind a board that reports when it likes (`rig/board.rs`: heartbeats, reports on
//!   change, late reports, silent or garbled from the start; `check/board.rs`): each outcome, a
//!   `requires` on the board and the alarm on it against the relay's state when each report was
//!   taken — a report arrives with no time of its own, so a late one that hides a change is a
//!   limitation;
//! - what is not a value is never a value (`check/no_value.rs`, `check/alarms/no_value.rs`): a
//!   report without a value shows nothing — no completion rests on one (the report judged last
//!   carried a value showing it done), every report after the ack without one ends `NO_FEEDBACK`
//!   saying what came (never completed, `TIMEOUT` or `FEEDBACK_MISMATCH`), `FEEDBACK_MISMATCH`
//!   needs a report with a value after the ack, a `requires` on the board is never dispatched on
//!   one, and the alarm on the board's contact is never cleared on one and is raised once the
//!   last report had none.
//!
//! Findings that do not fail the run, counted in its summary line:
//! - limitations: a relay whose contact reads inverted (`swapped_contacts`) can fool any
//!   feedback rule (expect_s shorter than its pull-in, an inversion that starts mid-command, a
//!   brownout it hides); a change that comes and goes between two polls;
//! - known engine bugs (`check::Findings::known`), each with a regression test in
//!   `ground_truth/regressions*.rs`, ignored while the bug stands — among them two found with
//!   reports without a value (`regressions_no_value.rs`): `FEEDBACK_MISMATCH` after a change the
//!   board reported without a value, and `NO_FEEDBACK` from a board offline at the deadline
//!   after such a report.
//!
//! The summary line also counts what the rarer properties looked at (`covered`): commands that
//! waited in a queue under `requires` (dispatched, refused at dispatch, ended otherwise), board
//! commands with reports without a value, the alarm judged after one.
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000, shared by two processes). Failures
//! shrink and their seeds are kept in `ground_truth.proptest-regressions` beside this file,
//! replayed first on every run. `GROUND_TRUTH_SURVEY=1` prints violations instead of failing
//! (to see every kind at once), `GROUND_TRUTH_VERBOSE=1` prints limitations and known bugs too.

#[path = "ground_truth/alarm.rs"]
mod alarm;
#[path = "ground_truth/check.rs"]
mod check;
#[path = "ground_truth/expect.rs"]
mod expect;
#[path = "ground_truth/fence.rs"]
mod fence;
#[path = "ground_truth/garbled.rs"]
mod garbled;
#[path = "ground_truth/physical.rs"]
mod physical;
#[path = "ground_truth/queue.rs"]
mod queue;
#[path = "ground_truth/regressions.rs"]
mod regressions;
#[path = "ground_truth/regressions_no_value.rs"]
mod regressions_no_value;
#[path = "ground_truth/regressions_queue.rs"]
mod regressions_queue;
#[path = "ground_truth/report.rs"]
mod report;
#[path = "ground_truth/rig.rs"]
mod rig;
#[path = "ground_truth/spec.rs"]
mod spec;
#[path = "ground_truth/strategy.rs"]
mod strategy;

use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Cases per run when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 2000;

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        max_shrink_iters: 4000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/ground_truth.proptest-regressions"
        )))),
        source_file: Some(file!()),
        ..Config::default()
    }
}

/// What the cases covered, and the findings that do not fail the run.
#[derive(Default)]
struct Tally {
    limited: AtomicUsize,
    known: AtomicUsize,
    exact: AtomicUsize,
    recovered: AtomicUsize,
    restarts: AtomicUsize,
    outcomes: std::sync::Mutex<std::collections::BTreeMap<String, usize>>,
    /// `check::Findings::covered`, summed.
    covered: std::sync::Mutex<std::collections::BTreeMap<&'static str, usize>>,
}

impl Tally {
    fn summary(&self) -> String {
        let outcomes = self.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = outcomes.values().sum();
        let list: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let covered = self.covered.lock().unwrap_or_else(|p| p.into_inner());
        let covered: Vec<String> = covered.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        format!(
            "{total} commands ({}); covered: {}; {} with an exact expected outcome; {} cases with a restart, {} commands recovered across one; {} cases with a known limitation, {} with a known engine bug",
            list.join(", "),
            covered.join(", "),
            self.exact.load(Ordering::Relaxed),
            self.restarts.load(Ordering::Relaxed),
            self.recovered.load(Ordering::Relaxed),
            self.limited.load(Ordering::Relaxed),
            self.known.load(Ordering::Relaxed)
        )
    }
}

/// Runs one case and checks it. With `GROUND_TRUTH_SURVEY` set, violations are printed and the
/// run goes on (to see every kind of failure at once) instead of failing and shrinking; with
/// `GROUND_TRUTH_VERBOSE`, limitations and known bugs are printed too.
fn run_case(case: &spec::Case, tally: &Tally) -> Result<(), TestCaseError> {
    let out = fence::runtime().block_on(rig::run(case));
    let found = check::check(case, &out);
    for (list, count) in [
        (&found.limitations, &tally.limited),
        (&found.known, &tally.known),
    ] {
        if !list.is_empty() {
            count.fetch_add(1, Ordering::Relaxed);
            if std::env::var_os("GROUND_TRUTH_VERBOSE").is_some() {
                eprintln!("{}", list.join("\n"));
            }
        }
    }
    tally.exact.fetch_add(found.exact, Ordering::Relaxed);
    tally
        .recovered
        .fetch_add(found.recovered, Ordering::Relaxed);
    if !out.at_restart.is_empty() {
        tally.restarts.fetch_add(1, Ordering::Relaxed);
    }
    {
        let mut outcomes = tally.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        for o in &found.outcomes {
            *outcomes.entry(o.clone()).or_default() += 1;
        }
        let mut covered = tally.covered.lock().unwrap_or_else(|p| p.into_inner());
        for (k, n) in &found.covered {
            *covered.entry(k).or_default() += n;
        }
    }
    if found.violations.is_empty() {
        return Ok(());
    }
    if std::env::var_os("GROUND_TRUTH_SURVEY").is_some() {
        eprintln!(
            "VIOLATION {}\n{}",
            found.violations.join("\n"),
            report::report(case, &out)
        );
        return Ok(());
    }
    Err(TestCaseError::fail(format!(
        "{}\n{}",
        found.violations.join("\n"),
        report::report(case, &out)
    )))
}

/// Processes sharing the cases: a case spends much of its real time waiting for SQLite on
/// another thread, so two run side by side on two cores. Separate processes, not threads: the
/// journal fence watches every sqlx thread of its process, and would wait for the other
/// runner's journal too.
const RUNNERS: u32 = 2;

/// Set in a child process: which share of the cases it runs (`i/n`).
const SHARE: &str = "GROUND_TRUTH_SHARE";

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the journal fence reads /proc: without it the paused clock races during journal writes"
)]
fn outcomes_match_the_physical_record() {
    let started = std::time::Instant::now();
    let cases = config().cases;
    let (me, of) = match std::env::var(SHARE) {
        Ok(s) => {
            let (i, n) = s.split_once('/').expect("GROUND_TRUTH_SHARE is i/n");
            (i.parse().expect("i"), n.parse().expect("n"))
        }
        Err(_) => (0, RUNNERS),
    };
    // The parent starts the other shares as children running this same test.
    let children: Vec<_> = (1..of)
        .filter(|_| me == 0 && std::env::var_os(SHARE).is_none())
        .map(|i| {
            std::process::Command::new(std::env::current_exe().expect("the test binary"))
                .args([
                    "--exact",
                    "outcomes_match_the_physical_record",
                    "--nocapture",
                ])
                .args(["--test-threads", "1"])
                .env(SHARE, format!("{i}/{of}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("a runner process")
        })
        .collect();
    let tally = Tally::default();
    let mut config = config();
    // Every share replays the persisted failures first, then runs its part of the cases.
    config.cases = cases / of + u32::from(me < cases % of);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy::case(), |case| run_case(&case, &tally));
    let mut failures: Vec<String> = result.err().map(|e| e.to_string()).into_iter().collect();
    for child in children {
        let out = child.wait_with_output().expect("a runner process ends");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        let all = std::env::var_os("GROUND_TRUTH_SURVEY").is_some()
            || std::env::var_os("GROUND_TRUTH_VERBOSE").is_some();
        for line in text
            .lines()
            .filter(|l| all || l.starts_with("ground truth"))
        {
            eprintln!("{line}");
        }
        if !out.status.success() {
            failures.push(text);
        }
    }
    eprintln!(
        "ground truth share {me}/{of}: {} cases in {:.1} s: {}",
        runner.config().cases,
        started.elapsed().as_secs_f64(),
        tally.summary()
    );
    if let Some(f) = failures.first() {
        panic!("{f}");
    }
}
