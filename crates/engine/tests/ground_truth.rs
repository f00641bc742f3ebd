//! Property-based ground truth: random plants and random command scripts through the engine,
//! every outcome checked against what the simulated devices physically did.
//!
//! A case is 1–3 simulated relays, steppers and heaters (random speeds, travel, pull-in, poll
//! periods 10–100 ms, liveness windows, request timeouts, expect_s consistent or deliberately
//! wrong, plant faults with random `after_ms`, shared exclusive groups, `requires` and
//! `done_when` on other devices, a standing alarm on one device's feedback blocking another) and
//! a script of up to 7 steps at random (virtual) times: submits (concurrent, some waiting),
//! cancels, run-time fault injections and clears, one device's feedback register answering
//! exception 4 while the rest of it answers (`Op::Refuse`), a relay board going silent, deaf or
//! back (`Op::Board`), and engine restarts on the same journal, with the devices kept running or
//! power-cycled too
//! (`ground_truth/spec.rs`, `strategy.rs`). `rig.rs` runs it on a paused clock — `fence.rs`
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
//!   device was dispatched on a read of it, answered shortly before, that showed it physically
//!   true — never on a refused read or a cached value;
//! - relays behind a board that reports when it likes (`rig/board.rs`: heartbeats, reports on
//!   change, late reports, silent from the start; `check/board.rs`): each outcome, a `requires`
//!   on the board and the alarm on it against the relay's state when each report was taken — a
//!   report arrives with no time of its own, so a late one that hides a change is a limitation.
//!
//! Findings that do not fail the run, counted in its summary line:
//! - limitations: a relay whose contact reads inverted (`swapped_contacts`) can fool any
//!   feedback rule (expect_s shorter than its pull-in, an inversion that starts mid-command, a
//!   brownout it hides); a change that comes and goes between two polls;
//! - two engine bugs, each pinned by an ignored regression test below.
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
#[path = "ground_truth/physical.rs"]
mod physical;
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
}

impl Tally {
    fn summary(&self) -> String {
        let outcomes = self.outcomes.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = outcomes.values().sum();
        let list: Vec<String> = outcomes.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        format!(
            "{total} commands ({}); {} with an exact expected outcome; {} cases with a restart, {} commands recovered across one; {} cases with a known limitation, {} with a known engine bug",
            list.join(", "),
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

/// A one-device case for the regression tests below.
fn one_device(model: spec::Model, faults: Vec<closedloop_sim::FaultSpec>) -> spec::DeviceSpec {
    spec::DeviceSpec {
        model,
        poll_ms: 20,
        max_silence_s: 2.0,
        timeout_ms: 100,
        seed: 0,
        faults,
        expect: spec::Expect::Consistent { margin_ms: 20 },
        floor_ms: 100,
        queue: true,
        queue_timeout_s: 1.0,
        group: None,
        requires: None,
        idempotent: true,
        follow: None,
        push: None,
    }
}

/// Runs a hand-written case and returns what the checks found, every finding as a line.
fn findings(case: &spec::Case) -> Vec<String> {
    let out = fence::runtime().block_on(rig::run(case));
    let found = check::check(case, &out);
    if !(found.violations.is_empty() && found.known.is_empty())
        || std::env::var_os("GROUND_TRUTH_VERBOSE").is_some()
    {
        eprintln!("{}", report::report(case, &out));
    }
    found.violations.into_iter().chain(found.known).collect()
}

/// A relay acknowledges "on", then goes silent (zombie: it keeps running, answers nothing)
/// 50 ms later; its contact closes at 100 ms. Its liveness window is 2 s, its deadline 0.48 s
/// (expect_s 0.12 = pull-in + 20 ms). The only fresh reads of the contact are at 0, 20 and 40 ms,
/// all before the pull-in; at the deadline the engine ends the command `failed
/// FEEDBACK_MISMATCH` ("the feedback never moved ... within its 0.48 s deadline"), telling the
/// caller the relay did not respond, while the contact has been physically closed since 100 ms.
/// Honest is an outcome that says the feedback was not read after 40 ms: `DEVICE_OFFLINE`
/// ("no read taken after the action's expected duration"). Regression test: it failed before.
#[test]
fn feedback_mismatch_needs_reads_up_to_the_deadline() {
    let zombie = closedloop_sim::FaultSpec::after(closedloop_sim::Fault::Zombie, 50);
    let relay = one_device(spec::Model::Relay { pull_in_ms: 100 }, vec![zombie]);
    let case = spec::Case {
        devices: vec![relay],
        alarm: None,
        steps: vec![spec::Step {
            delay_ms: 0,
            op: spec::Op::Submit {
                device: 0,
                follow: false,
                arg: spec::Arg::On(true),
                wait_ms: 0,
            },
        }],
    };
    let found = findings(&case);
    assert!(found.is_empty(), "{found:#?}");
}

/// A stepper (answers delayed 20 ms) moving 200 mm at 100 mm/s is cancelled at 300 ms; it
/// acknowledges the stop at 320 ms and is silent from 321 ms (zombie), so no read after the
/// stop ever comes back and it goes offline at 0.5 s of silence. The engine keeps the command
/// open (status `running`, `cancel_sent` journaled) until `stopped_when` holds on a fresh read
/// or its 30 s safe-state limit runs out: the command turns `cancelled` 30 s after the stop,
/// 24 s past its deadline (6.3 s) and long after the device was known to be offline.
#[test]
fn a_cancel_ends_within_the_deadline_when_the_device_goes_silent() {
    let axis = spec::Model::Stepper {
        speed_mm_s: 100.0,
        travel: [0.0, 300.0],
        param: [0.0, 300.0],
    };
    let latency = closedloop_sim::FaultSpec::now(closedloop_sim::Fault::LatencyMs { ms: 20 });
    let mut stepper = one_device(axis, vec![latency]);
    stepper.max_silence_s = 0.5;
    let step = |delay_ms, op| spec::Step { delay_ms, op };
    let zombie = closedloop_sim::FaultSpec::after(closedloop_sim::Fault::Zombie, 21);
    let case = spec::Case {
        devices: vec![stepper],
        alarm: None,
        steps: vec![
            step(
                0,
                spec::Op::Submit {
                    device: 0,
                    follow: false,
                    arg: spec::Arg::Number(200.0),
                    wait_ms: 0,
                },
            ),
            step(
                300,
                spec::Op::Inject {
                    device: 0,
                    fault: zombie,
                },
            ),
            step(0, spec::Op::Cancel { nth: 0 }),
        ],
    };
    let found = findings(&case);
    assert!(found.is_empty(), "{found:#?}");
}

/// A heater at 35 °C (reached at 350 ms) is asked for 10 °C: `done_when` (`temperature_c >=
/// to_c - 0.5`) already holds, so only a temperature read `expect_s` (0.154 s) after the
/// acknowledgement may confirm it. From 381 ms every answer takes 113 ms, so a poll cycle
/// (coil, holding, input) spans 340 ms: the input register read at 616 ms is late enough, but
/// the coil `stopped_when` reads was read at 390 ms in the same cycle. The engine judged the
/// whole cycle early and ended the command `timeout` ("`done_when` never held") at its deadline
/// while the read at 616 ms showed it held. Only the feedback's age counts now. Regression
/// test: it failed before (CI 2026-12-01).
#[test]
fn only_the_feedback_read_needs_to_be_late_enough_to_confirm_a_criterion_that_already_held() {
    let latency =
        closedloop_sim::FaultSpec::after(closedloop_sim::Fault::LatencyMs { ms: 113 }, 381);
    let heater = spec::Model::Heater {
        rate_c_per_s: 57.0,
        ambient_c: 15.0,
    };
    let mut dev = one_device(heater, vec![latency]);
    dev.poll_ms = 10;
    dev.max_silence_s = 0.1;
    dev.timeout_ms = 500;
    dev.expect = spec::Expect::Fixed { ms: 154 };
    dev.queue_timeout_s = 0.5;
    dev.idempotent = false;
    let heat = |to_c| spec::Step {
        delay_ms: 0,
        op: spec::Op::Submit {
            device: 0,
            follow: false,
            arg: spec::Arg::Number(to_c),
            wait_ms: 0,
        },
    };
    let case = spec::Case {
        devices: vec![dev],
        steps: vec![heat(35.0), heat(10.0)],
        alarm: None,
    };
    let found = findings(&case);
    assert!(found.is_empty(), "{found:#?}");
}

/// A relay board in front of a relay that is already off (liveness window 0.504 s).
fn board_already_off(push: spec::Push, silent_at_ms: Option<u64>) -> spec::Case {
    let mut relay = one_device(spec::Model::Relay { pull_in_ms: 41 }, vec![]);
    relay.max_silence_s = 0.504;
    relay.expect = spec::Expect::Fixed { ms: 1399 };
    relay.push = Some(push);
    let off = spec::Op::Submit {
        device: 0,
        follow: false,
        arg: spec::Arg::On(false),
        wait_ms: 0,
    };
    let mut steps = vec![spec::Step {
        delay_ms: 12,
        op: off,
    }];
    steps.extend(silent_at_ms.map(|ms| spec::Step {
        delay_ms: ms - 12,
        op: spec::Op::Board {
            device: 0,
            mode: spec::BoardMode::Silent,
        },
    }));
    spec::Case {
        devices: vec![relay],
        alarm: None,
        steps,
    }
}

/// The one command of a case: status, code and detail as journaled, after the checks.
fn only_outcome(case: &spec::Case) -> (String, Option<String>, String) {
    let out = fence::runtime().block_on(rig::run(case));
    let found = check::check(case, &out);
    assert!(
        found.violations.is_empty(),
        "{:#?}\n{}",
        found.violations,
        report::report(case, &out)
    );
    if std::env::var_os("GROUND_TRUTH_VERBOSE").is_some() {
        eprintln!("{}", report::report(case, &out));
    }
    let j = out.journal.values().next().expect("one command");
    let detail = j.row.detail.clone().unwrap_or_default();
    (j.row.status.clone(), j.row.error_code.clone(), detail)
}

/// A board reports its relay already off (every 60 ms), is asked to switch it off (expect_s
/// 1.399 s), and goes silent at 300 ms: no report after the expected duration ever comes. The
/// engine ended it `failed FEEDBACK_MISMATCH`, "the feedback never moved: `contact ==
/// params.on` did not hold", while every report showed it holding. Honest: DEVICE_OFFLINE,
/// saying it already held and nothing confirms it still does. Regression test: failed before.
#[test]
fn a_silent_board_that_was_already_in_the_state_is_unconfirmed_not_never_moved() {
    let push = spec::Push {
        heartbeat_ms: 60,
        late_ms: 0,
        start: spec::BoardMode::Reports,
    };
    let (status, code, detail) = only_outcome(&board_already_off(push, Some(300)));
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("DEVICE_OFFLINE"))
    );
    assert!(
        detail.starts_with("`contact == params.on` already held when the write was sent (relay0 was already in that state), but no read taken after the action's expected duration came back"),
        "{detail}"
    );
}

/// A heater requires a relay board's contact open; the board reports it open (every 50 ms,
/// liveness window 0.3 s) and goes silent at 100 ms. A heat command at 1 s must not be
/// dispatched on the last report, 0.9 s old from a board that is offline: the checks find a
/// dispatch on a report older than the board's window a violation, and the command is refused
/// `INTERLOCK` ("cannot be judged").
#[test]
fn requires_on_a_board_that_went_silent_is_not_judged_on_its_last_report() {
    let mut board = one_device(spec::Model::Relay { pull_in_ms: 10 }, vec![]);
    board.max_silence_s = 0.3;
    board.push = Some(spec::Push {
        heartbeat_ms: 50,
        late_ms: 0,
        start: spec::BoardMode::Reports,
    });
    let heater = spec::Model::Heater {
        rate_c_per_s: 50.0,
        ambient_c: 20.0,
    };
    let mut heater = one_device(heater, vec![]);
    heater.requires = Some(spec::Requires {
        device: 0,
        off: true,
    });
    let step = |delay_ms, op| spec::Step { delay_ms, op };
    let case = spec::Case {
        devices: vec![board, heater],
        alarm: None,
        steps: vec![
            step(
                100,
                spec::Op::Board {
                    device: 0,
                    mode: spec::BoardMode::Silent,
                },
            ),
            step(
                900,
                spec::Op::Submit {
                    device: 1,
                    follow: false,
                    arg: spec::Arg::Number(30.0),
                    wait_ms: 0,
                },
            ),
        ],
    };
    let (status, code, detail) = only_outcome(&case);
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("rejected", Some("INTERLOCK")),
        "{detail}"
    );
}

/// A board whose relay answers in 6 ms reports at 12 ms, then not again until 1,420 ms
/// (heartbeat 1.399 s, liveness window 1.008 s): a switch at 31 ms reaches its deadline at 1,420 ms
/// with the board offline since about 1,020 ms, and ends `DEVICE_OFFLINE` — while the board's
/// next report arrives in that same millisecond, after the verdict. The checks counted that
/// report as "heard within the window" and failed a truthful outcome (CI 2026-12-06).
/// Regression test: it failed before.
#[test]
fn a_report_arriving_with_the_offline_verdict_does_not_contradict_it() {
    let latency = closedloop_sim::FaultSpec::now(closedloop_sim::Fault::LatencyMs { ms: 6 });
    let mut relay = one_device(spec::Model::Relay { pull_in_ms: 7 }, vec![latency]);
    relay.poll_ms = 42;
    relay.max_silence_s = 1.008;
    relay.timeout_ms = 20;
    relay.expect = spec::Expect::Consistent { margin_ms: 59 };
    relay.floor_ms = 315;
    relay.queue = false;
    relay.queue_timeout_s = 0.0;
    relay.idempotent = false;
    relay.push = Some(spec::Push {
        heartbeat_ms: 1399,
        late_ms: 0,
        start: spec::BoardMode::Reports,
    });
    let case = spec::Case {
        devices: vec![relay],
        alarm: None,
        steps: vec![spec::Step {
            delay_ms: 31,
            op: spec::Op::Submit {
                device: 0,
                follow: false,
                arg: spec::Arg::On(false),
                wait_ms: 0,
            },
        }],
    };
    let found = findings(&case);
    assert!(found.is_empty(), "{found:#?}");
}
