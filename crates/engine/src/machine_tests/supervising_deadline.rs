//! Transitions out of `supervising` at the deadline and after: which code a missed deadline
//! gets, offline, cancel.

use super::*;

#[test]
fn supervising_deadline_after_movement_is_timeout() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    m.on(reading(1, false, true));
    m.on(reading(2, false, false));
    let fx = m.on(Event::Deadline { answering: false });
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    let o = finish(&fx);
    assert_eq!(
        (o.status, o.code.clone()),
        (Status::Timeout, Some(ErrorCode::Timeout))
    );
}

#[test]
fn supervising_readback_deadline_is_mismatch() {
    let mut m = supervising(Profile {
        check: Check::Readback,
        ..profile()
    });
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.code, o.readback_matched),
        (Some(ErrorCode::FeedbackMismatch), Some(false))
    );
}

#[test]
fn supervising_offline_fails() {
    let mut m = supervising(profile());
    let o = finish(&m.on(Event::Offline {
        detail: "silent".into(),
    }))
    .clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::DeviceOffline))
    );
}

#[test]
fn supervising_cancel_writes_the_stop_then_cancels() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    assert_eq!(m.on(Event::CancelRequested), vec![Effect::WriteCancel]);
    assert_eq!(
        m.on(reading(1, true, true)),
        vec![],
        "no completion while cancelling"
    );
    assert_eq!(m.on(Event::Deadline { answering: false }), vec![]);
    let o = finish(&m.on(Event::CancelWritten)).clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Cancelled, Some(ErrorCode::Cancelled))
    );
}

#[test]
fn supervising_cancel_without_plan_says_nothing_was_stopped() {
    let mut m = supervising(profile());
    let o = finish(&m.on(Event::CancelRequested)).clone();
    assert_eq!(
        o.reason,
        Reason::Cancelled {
            stop_written: false,
            shutdown: false
        }
    );
}

#[test]
fn cancelling_stop_refused_is_failed_not_cancelled() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    m.on(Event::CancelRequested);
    let o = finish(&m.on(Event::CancelFailed {
        code: ErrorCode::BusNak,
        detail: "exception 4".into(),
    }))
    .clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::BusNak))
    );
}

#[test]
fn supervising_shutdown_stops_motion_or_leaves_it_for_recovery() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    assert_eq!(m.on(Event::Shutdown), vec![Effect::WriteCancel]);
    let o = finish(&m.on(Event::CancelWritten)).clone();
    assert_eq!(
        o.reason,
        Reason::Cancelled {
            stop_written: true,
            shutdown: true
        }
    );

    let mut m = supervising(profile());
    assert_eq!(m.on(Event::Shutdown), vec![]);
    assert_eq!(m.status(), Status::Running);
}

#[test]
fn supervising_ignores_queue_and_write_events() {
    for e in [
        Event::Accept,
        Event::Dispatch,
        Event::QueueExpired,
        Event::WriteAcked,
        write_failed(true, true),
        Event::CancelWritten,
    ] {
        let mut m = supervising(profile());
        assert_eq!(m.on(e.clone()), vec![], "{e:?}");
        assert!(m.is_supervising());
    }
}

#[test]
fn recovered_command_completes_on_fresh_reads_or_ends_interrupted() {
    let mut m = Machine::recovered(profile());
    assert_eq!(
        finish(&m.on(reading(1, true, true))).status,
        Status::Completed
    );
    let mut m = Machine::recovered(profile());
    m.on(reading(1, false, true));
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::Interrupted))
    );
}

#[test]
fn recovered_command_that_reads_stopped_short_ends_interrupted_at_once() {
    let stopped = |done: bool| {
        Event::Reading(Reading {
            at_ms: 1,
            done,
            failed: None,
            started: true,
            moved: false,
            early: false,
            stopped: true,
            settled: true,
            baseline_known: true,
            already: false,
        })
    };
    let mut m = Machine::recovered(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(stopped(false));
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::Interrupted),
            Reason::StoppedShort
        )
    );
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    // Stopped at the target is done, not interrupted.
    let mut m = Machine::recovered(profile());
    assert_eq!(finish(&m.on(stopped(true))).status, Status::Completed);
    // A command of this run that reads "stopped" simply keeps waiting for done_when.
    let mut m = supervising(profile());
    assert_eq!(m.on(stopped(false)), vec![]);
}

#[test]
fn a_lapsed_keepalive_writes_the_stop_and_ends_deadman() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    assert_eq!(m.on(Event::KeepaliveLapsed), vec![Effect::WriteCancel]);
    let o = finish(&m.on(Event::CancelWritten)).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Cancelled,
            Some(ErrorCode::Deadman),
            Reason::Deadman { stop_written: true }
        )
    );
    // Without a cancel plan (the loader refuses it, but the machine stays total).
    let mut m = supervising(profile());
    let o = finish(&m.on(Event::KeepaliveLapsed)).clone();
    assert_eq!(o.code, Some(ErrorCode::Deadman));
    // Only a supervised command can lapse.
    let mut m = queued(profile());
    assert_eq!(m.on(Event::KeepaliveLapsed), vec![]);
}

#[test]
fn a_standing_alarm_raised_while_supervising_stops_and_fails_with_its_name() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::AlarmRaised {
        name: "GUARD_DOOR_OPEN".into(),
        detail: "the guard door is open".into(),
    });
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::Signal("GUARD_DOOR_OPEN".into())),
            false
        )
    );
}
