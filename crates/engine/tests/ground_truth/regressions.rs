//! Regression tests: hand-written cases, each once found by the harness (or pinning an engine
//! bug, ignored until it is fixed), and the helpers that run one.

use crate::{check, fence, report, rig, spec};

/// A one-device case for the regression tests.
pub fn one_device(model: spec::Model, faults: Vec<closedloop_sim::FaultSpec>) -> spec::DeviceSpec {
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
pub fn findings(case: &spec::Case) -> Vec<String> {
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

/// Runs `case` and asserts the checks found nothing wrong (the report printed with
/// `GROUND_TRUTH_VERBOSE`).
pub fn run_checked(case: &spec::Case) -> rig::Outcome {
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
    out
}

/// The one command of a case: status, code and detail as journaled, after the checks.
pub fn only_outcome(case: &spec::Case) -> (String, Option<String>, String) {
    let out = run_checked(case);
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
