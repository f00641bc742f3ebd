//! Regression tests for reports without a value (a garbled board): two engine bugs the harness
//! found; both are fixed in `Machine::deadline`, and the checks now count their cases as violations.

use crate::regressions::{one_device, only_outcome};
use crate::spec;

/// A relay (pull-in 40 ms, liveness window `max_silence_s`) behind a board reporting every
/// 20 ms, and `script`: `on` switches it on (expect_s 0.2 s: a 0.72 s deadline), `garbled` and
/// `silent` set the board's mode.
fn board_relay(max_silence_s: f64, script: &[(u64, &str)]) -> spec::Case {
    let mut relay = one_device(spec::Model::Relay { pull_in_ms: 40 }, vec![]);
    relay.max_silence_s = max_silence_s;
    relay.expect = spec::Expect::Fixed { ms: 200 };
    relay.push = Some(spec::Push {
        heartbeat_ms: 20,
        late_ms: 0,
        start: spec::BoardMode::Reports,
    });
    let op = |what: &str| match what {
        "on" => spec::Op::Submit {
            device: 0,
            follow: false,
            arg: spec::Arg::On(true),
            wait_ms: 0,
        },
        "garbled" => spec::Op::Board {
            device: 0,
            mode: spec::BoardMode::Garbled,
        },
        _ => spec::Op::Board {
            device: 0,
            mode: spec::BoardMode::Silent,
        },
    };
    let steps = (script.iter())
        .map(|&(delay_ms, what)| spec::Step {
            delay_ms,
            op: op(what),
        })
        .collect();
    spec::Case {
        devices: vec![relay],
        alarm: None,
        steps,
    }
}

/// Switched on at 100 ms; the board's report at 120 ms still shows the contact open (it closes
/// at 140 ms), and its payloads turn garbled at 125 ms: the 36 reports from 130 ms to the
/// deadline (820 ms) have no value, the change at 140 ms among them. The engine ended the command
/// `failed FEEDBACK_MISMATCH`, "the feedback never moved … its signals kept their values from
/// before the write", evidence `contact = false`, while the contact has been closed since 140 ms.
/// "Never moved" rests on a device that reports changes having reported none; this one reported,
/// without a value, so nothing shows whether it moved: honest is `NO_FEEDBACK` saying what came,
/// as when no report with a value came after the ack at all (`Machine::deadline` keeps what came
/// without a value only while no settled reading was seen). Found by the survey (2,000 cases): a
/// board switched on at 633 ms and garbled at 643 ms, its relay closing at 650 ms.
#[test]
fn a_change_reported_without_a_value_is_no_feedback_not_never_moved() {
    let (status, code, detail) = only_outcome(&board_relay(2.0, &[(100, "on"), (25, "garbled")]));
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("NO_FEEDBACK")),
        "{detail}"
    );
    assert!(
        detail.contains("contact has had no value since"),
        "{detail}"
    );
}

/// The board's payloads turn garbled at 100 ms; the relay is switched on at 120 ms (deadline
/// 840 ms); the reports at 140, 160 and 180 ms have no value; the board goes silent at 200 ms
/// and, its liveness window 0.3 s, is offline from about 480 ms to the deadline. The engine ended
/// the command `failed NO_FEEDBACK` ("relay0 answered after the write was acknowledged, but
/// contact has had no value …"): the code that says the device is online but reported nothing
/// that confirms it. `Machine::deadline` takes the no-value path whether the devices still answer
/// or not. Honest, as for a board gone silent after reports with a value: `DEVICE_OFFLINE`.
/// Found by the survey (800 cases): garbled at 521 ms, silent at 639 ms, deadline 1,835 ms.
#[test]
fn a_board_gone_silent_after_a_report_without_a_value_is_offline_not_no_feedback() {
    let case = board_relay(0.3, &[(100, "garbled"), (20, "on"), (80, "silent")]);
    let (status, code, detail) = only_outcome(&case);
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("DEVICE_OFFLINE")),
        "{detail}"
    );
}
