//! Transitions out of `supervising`: fresh readings, readback, `fail_when`, `started_when`,
//! "already so", `hold_ms`.

use super::*;

// --- supervising ---

#[test]
fn supervising_fresh_done_reading_completes_verified() {
    let mut m = supervising(profile());
    assert_eq!(m.on(reading(1, false, false)), vec![]);
    let o = finish(&m.on(reading(2, true, true))).clone();
    assert_eq!(
        (o.status, o.verified, o.code),
        (Status::Completed, true, None)
    );
}

#[test]
fn supervising_readback_completion_is_not_verified() {
    let mut m = supervising(Profile {
        check: Check::Readback,
        ..profile()
    });
    let o = finish(&m.on(reading(1, true, false))).clone();
    assert_eq!(
        (o.status, o.verified, o.readback_matched),
        (Status::Completed, false, Some(true))
    );
}

#[test]
fn supervising_fail_when_fails_verified_and_enters_safe_state() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::Reading(Reading {
        at_ms: 5,
        done: true,
        failed: Some("MOTOR_STALL".into()),
        started: true,
        moved: true,
        early: false,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    }));
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    let o = finish(&fx);
    assert_eq!((o.status, o.verified), (Status::Failed, true));
    assert_eq!(o.code, Some(ErrorCode::Signal("MOTOR_STALL".into())));
}

#[test]
fn supervising_started_when_must_be_seen_before_done_counts() {
    let mut m = supervising(Profile {
        has_started_when: true,
        ..profile()
    });
    let done_not_started = Event::Reading(Reading {
        at_ms: 1,
        done: true,
        failed: None,
        started: false,
        moved: false,
        early: false,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    });
    assert_eq!(
        m.on(done_not_started),
        vec![],
        "a stale 'done' before the PLC scan must not count"
    );
    let started = Event::Reading(Reading {
        at_ms: 2,
        done: false,
        failed: None,
        started: true,
        moved: true,
        early: false,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    });
    assert_eq!(m.on(started), vec![]);
    assert_eq!(
        finish(&m.on(reading(3, true, true))).status,
        Status::Completed
    );
}

#[test]
fn supervising_early_done_on_an_unchanged_value_does_not_count() {
    let mut m = supervising(profile());
    let early = Event::Reading(Reading {
        at_ms: 1,
        done: true,
        failed: None,
        started: false,
        moved: false,
        early: true,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    });
    assert_eq!(m.on(early), vec![], "the relay has not had time to pull in");
    let failing = Event::Reading(Reading {
        at_ms: 2,
        done: true,
        failed: Some("MOTOR_STALL".into()),
        started: false,
        moved: false,
        early: true,
        stopped: false,
        settled: true,
        baseline_known: true,
        already: false,
    });
    assert_eq!(
        finish(&m.on(failing)).status,
        Status::Failed,
        "fail_when counts even early"
    );
    let mut m = supervising(profile());
    assert_eq!(
        finish(&m.on(reading(30, true, false))).status,
        Status::Completed,
        "settled: already so"
    );
}

#[test]
fn supervising_hold_ms_needs_done_to_stay_true() {
    let mut m = supervising(Profile {
        hold_ms: 100,
        ..profile()
    });
    assert_eq!(m.on(reading(0, true, true)), vec![]);
    assert_eq!(m.on(reading(60, true, true)), vec![]);
    assert_eq!(
        m.on(reading(80, false, true)),
        vec![],
        "chatter resets the hold"
    );
    assert_eq!(m.on(reading(100, true, true)), vec![]);
    assert_eq!(m.on(reading(150, true, true)), vec![]);
    assert_eq!(
        finish(&m.on(reading(200, true, true))).status,
        Status::Completed
    );
}

#[test]
fn supervising_deadline_without_movement_is_feedback_mismatch() {
    let mut m = supervising(profile());
    m.on(reading(1, false, false));
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.status, o.code, o.verified),
        (Status::Failed, Some(ErrorCode::FeedbackMismatch), false)
    );
}

#[test]
fn supervising_deadline_without_a_single_fresh_read_is_device_offline_not_feedback_mismatch() {
    // A slow device whose reads after the ack never arrived: nothing shows the feedback unmoved.
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::Deadline { answering: false });
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::DeviceOffline),
            Reason::NoFreshRead { answering: false },
            false
        )
    );
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
}

#[test]
fn supervising_deadline_without_a_value_before_the_write_is_timeout_not_never_moved() {
    // The heater's temperature register never answered before the write: a settled read that
    // shows no change from a baseline that does not exist proves nothing about movement.
    let mut m = supervising(profile());
    m.on(Event::Reading(Reading {
        baseline_known: false,
        already: false,
        ..match reading(500, false, false) {
            Event::Reading(r) => r,
            _ => unreachable!(),
        }
    }));
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Timeout,
            Some(ErrorCode::Timeout),
            Reason::NoBaseline
        )
    );
}

#[test]
fn supervising_deadline_with_only_reads_from_before_the_expected_duration_is_device_offline() {
    // The relay answered at 0, 20 and 40 ms, then fell silent; its pull-in takes 100 ms. Reads
    // from before the feedback could move cannot show that it never moved.
    let mut m = supervising(profile());
    for at in [0, 20, 40] {
        m.on(Event::Reading(Reading {
            at_ms: at,
            done: false,
            failed: None,
            started: true,
            moved: false,
            early: false,
            stopped: false,
            settled: false,
            baseline_known: true,
            already: false,
        }));
    }
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::DeviceOffline),
            Reason::NoFreshRead { answering: false }
        )
    );
    // An early read that already shows movement is movement: TIMEOUT.
    let mut m = supervising(profile());
    m.on(Event::Reading(Reading {
        at_ms: 10,
        done: false,
        failed: None,
        started: true,
        moved: true,
        early: false,
        stopped: false,
        settled: false,
        baseline_known: true,
        already: false,
    }));
    assert_eq!(
        finish(&m.on(Event::Deadline { answering: false })).code,
        Some(ErrorCode::Timeout)
    );
}
