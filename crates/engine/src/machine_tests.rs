//! Every transition of the lifecycle, legal and illegal.

use super::*;

fn profile() -> Profile {
    Profile {
        check: Check::Feedback,
        idempotent: true,
        has_cancel: false,
        has_started_when: false,
        hold_ms: 0,
        max_attempts: 3,
    }
}

fn reading(at_ms: u64, done: bool, moved: bool) -> Event {
    Event::Reading(Reading {
        at_ms,
        done,
        failed: None,
        started: false,
        moved,
        early: false,
        stopped: false,
        settled: true,
        baseline_known: true,
    })
}

fn finish(fx: &[Effect]) -> &Outcome {
    match fx.last() {
        Some(Effect::Finish(o)) => o,
        other => panic!("expected Finish, got {other:?}"),
    }
}

fn queued(p: Profile) -> Machine {
    let mut m = Machine::new(p);
    assert_eq!(m.on(Event::Accept), vec![Effect::Journal(Status::Accepted)]);
    assert!(m.is_queued());
    m
}

fn writing(p: Profile) -> Machine {
    let mut m = queued(p);
    assert_eq!(m.on(Event::Dispatch), vec![Effect::Write { attempt: 1 }]);
    m
}

fn supervising(p: Profile) -> Machine {
    let mut m = writing(p);
    assert_eq!(
        m.on(Event::WriteAcked),
        vec![Effect::Journal(Status::Running), Effect::PollNow]
    );
    assert_eq!(m.status(), Status::Running);
    m
}

fn write_failed(transient: bool, maybe_applied: bool) -> Event {
    Event::WriteFailed {
        code: ErrorCode::DeviceOffline,
        detail: "no answer".into(),
        transient,
        maybe_applied,
    }
}

/// Every event, for the illegal-transition sweeps.
fn all_events() -> Vec<Event> {
    vec![
        Event::Accept,
        Event::Reject {
            code: ErrorCode::Interlock,
            detail: "x".into(),
        },
        Event::Dispatch,
        Event::QueueExpired,
        Event::WriteAcked,
        write_failed(true, true),
        reading(1, true, true),
        Event::Offline {
            detail: "silent".into(),
        },
        Event::Deadline,
        Event::CancelRequested,
        Event::CancelWritten,
        Event::CancelFailed {
            code: ErrorCode::BusNak,
            detail: "x".into(),
        },
        Event::Shutdown,
    ]
}

// --- received ---

#[test]
fn received_accept_goes_to_queued() {
    queued(profile());
}

#[test]
fn received_reject_is_terminal_rejected() {
    let mut m = Machine::new(profile());
    let fx = m.on(Event::Reject {
        code: ErrorCode::InvalidParams,
        detail: "on: expected a bool".into(),
    });
    let o = finish(&fx);
    assert_eq!(
        (o.status, o.code.clone(), o.verified),
        (Status::Rejected, Some(ErrorCode::InvalidParams), false)
    );
    assert!(m.is_done());
}

#[test]
fn received_ignores_everything_but_accept_and_reject() {
    for e in all_events()
        .into_iter()
        .filter(|e| !matches!(e, Event::Accept | Event::Reject { .. }))
    {
        let mut m = Machine::new(profile());
        assert_eq!(m.on(e.clone()), vec![], "{e:?}");
        assert!(!m.is_done());
    }
}

// --- queued ---

#[test]
fn queued_dispatch_writes_the_plan() {
    writing(profile());
}

#[test]
fn queued_expiry_is_timeout_and_nothing_written() {
    let mut m = queued(profile());
    let fx = m.on(Event::QueueExpired);
    assert_eq!(fx.len(), 1);
    let o = finish(&fx);
    assert_eq!(
        (o.status, o.code.clone()),
        (Status::Timeout, Some(ErrorCode::Timeout))
    );
    assert_eq!(o.reason, Reason::QueueExpired);
}

#[test]
fn queued_cancel_is_cancelled_without_a_stop() {
    let mut m = queued(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::CancelRequested);
    assert_eq!(fx.len(), 1, "nothing to stop: nothing was written");
    assert_eq!(
        finish(&fx).reason,
        Reason::Cancelled {
            stop_written: false,
            shutdown: false
        }
    );
}

#[test]
fn queued_offline_fails_device_offline() {
    let mut m = queued(profile());
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
fn queued_shutdown_is_never_sent_late() {
    let mut m = queued(profile());
    let o = finish(&m.on(Event::Shutdown)).clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::Interrupted))
    );
}

#[test]
fn queued_ignores_device_events() {
    for e in [
        Event::WriteAcked,
        write_failed(true, true),
        reading(1, true, true),
        Event::Deadline,
        Event::CancelWritten,
        Event::Accept,
    ] {
        let mut m = queued(profile());
        assert_eq!(m.on(e.clone()), vec![], "{e:?}");
        assert!(m.is_queued());
    }
}

// --- writing ---

#[test]
fn writing_ack_starts_supervision() {
    supervising(profile());
}

#[test]
fn writing_ack_without_verification_is_sent() {
    let mut m = writing(Profile {
        check: Check::None,
        ..profile()
    });
    let o = finish(&m.on(Event::WriteAcked)).clone();
    assert_eq!((o.status, o.verified, o.code), (Status::Sent, false, None));
}

#[test]
fn writing_transient_failure_retries_idempotent_actions_within_attempts() {
    let mut m = writing(profile());
    assert_eq!(
        m.on(write_failed(true, true)),
        vec![Effect::Write { attempt: 2 }]
    );
    assert_eq!(
        m.on(write_failed(true, true)),
        vec![Effect::Write { attempt: 3 }]
    );
    let o = finish(&m.on(write_failed(true, true))).clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::DeviceOffline))
    );
}

#[test]
fn writing_never_resends_a_non_idempotent_action() {
    let mut m = writing(Profile {
        idempotent: false,
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(write_failed(true, true));
    assert_eq!(
        fx[0],
        Effect::SafeState { write_cancel: true },
        "it may have moved: stop it"
    );
    assert_eq!(finish(&fx).status, Status::Failed);
}

#[test]
fn writing_refusal_fails_without_retry_or_safe_state() {
    let mut m = writing(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::WriteFailed {
        code: ErrorCode::BusNak,
        detail: "exception 4".into(),
        transient: false,
        maybe_applied: false,
    });
    assert_eq!(fx.len(), 1);
    assert_eq!(finish(&fx).code, Some(ErrorCode::BusNak));
}

#[test]
fn writing_deadline_reports_the_last_write_error() {
    let mut m = writing(profile());
    m.on(write_failed(true, true));
    let o = finish(&m.on(Event::Deadline)).clone();
    assert_eq!(o.code, Some(ErrorCode::DeviceOffline));
}

#[test]
fn writing_offline_fails_and_stops_motion() {
    let mut m = writing(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::Offline {
        detail: "silent".into(),
    });
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    assert_eq!(finish(&fx).code, Some(ErrorCode::DeviceOffline));
}

#[test]
fn writing_cancel_is_honoured_after_the_ack() {
    let mut m = writing(Profile {
        has_cancel: true,
        ..profile()
    });
    assert_eq!(m.on(Event::CancelRequested), vec![]);
    assert_eq!(
        m.on(Event::WriteAcked),
        vec![
            Effect::Journal(Status::Running),
            Effect::PollNow,
            Effect::WriteCancel
        ]
    );
    let o = finish(&m.on(Event::CancelWritten)).clone();
    assert_eq!(
        o.reason,
        Reason::Cancelled {
            stop_written: true,
            shutdown: false
        }
    );
}

#[test]
fn writing_shutdown_without_cancel_plan_leaves_it_running_for_recovery() {
    let mut m = writing(profile());
    assert_eq!(m.on(Event::Shutdown), vec![]);
    assert_eq!(
        m.on(Event::WriteAcked),
        vec![Effect::Journal(Status::Running), Effect::PollNow]
    );
    assert_eq!(m.status(), Status::Running);
}

#[test]
fn writing_ignores_readings_and_queue_events() {
    for e in [
        reading(1, true, true),
        Event::Dispatch,
        Event::QueueExpired,
        Event::CancelWritten,
        Event::Accept,
    ] {
        let mut m = writing(profile());
        assert_eq!(m.on(e.clone()), vec![], "{e:?}");
    }
}

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
    let o = finish(&m.on(Event::Deadline)).clone();
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
    let fx = m.on(Event::Deadline);
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::DeviceOffline),
            Reason::NoFreshRead,
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
        ..match reading(500, false, false) {
            Event::Reading(r) => r,
            _ => unreachable!(),
        }
    }));
    let o = finish(&m.on(Event::Deadline)).clone();
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
        }));
    }
    let o = finish(&m.on(Event::Deadline)).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::DeviceOffline),
            Reason::NoFreshRead
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
    }));
    assert_eq!(
        finish(&m.on(Event::Deadline)).code,
        Some(ErrorCode::Timeout)
    );
}

#[test]
fn supervising_deadline_after_movement_is_timeout() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    m.on(reading(1, false, true));
    m.on(reading(2, false, false));
    let fx = m.on(Event::Deadline);
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
    let o = finish(&m.on(Event::Deadline)).clone();
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
    assert_eq!(m.on(Event::Deadline), vec![]);
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
    let o = finish(&m.on(Event::Deadline)).clone();
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

// --- terminal ---

#[test]
fn terminal_states_never_change() {
    let terminals: Vec<Machine> = {
        let mut v = vec![];
        let mut m = Machine::new(profile());
        m.on(Event::Reject {
            code: ErrorCode::Interlock,
            detail: "x".into(),
        });
        v.push(m);
        let mut m = supervising(profile());
        m.on(reading(1, true, true));
        v.push(m);
        let mut m = supervising(profile());
        m.on(Event::Deadline);
        v.push(m);
        let mut m = writing(Profile {
            check: Check::None,
            ..profile()
        });
        m.on(Event::WriteAcked);
        v.push(m);
        let mut m = queued(profile());
        m.on(Event::CancelRequested);
        v.push(m);
        v
    };
    for m in terminals {
        let before = m.status();
        for e in all_events() {
            let mut m2 = m.clone();
            assert_eq!(m2.on(e.clone()), vec![], "{before:?} + {e:?}");
            assert_eq!(m2.status(), before);
        }
    }
}

#[test]
fn writing_cancel_during_failing_retries_stops_resending() {
    let mut m = writing(Profile {
        has_cancel: true,
        ..profile()
    });
    assert_eq!(
        m.on(write_failed(true, true)),
        vec![Effect::Write { attempt: 2 }]
    );
    assert_eq!(m.on(Event::CancelRequested), vec![]);
    let fx = m.on(write_failed(true, true));
    assert_eq!(
        fx[0],
        Effect::SafeState { write_cancel: true },
        "it may have arrived: stop it"
    );
    let o = finish(&fx);
    assert_eq!(
        (o.status, o.code.clone()),
        (Status::Cancelled, Some(ErrorCode::Cancelled))
    );
    assert!(
        !fx.iter().any(|f| matches!(f, Effect::Write { .. })),
        "never re-sent after a cancel"
    );
}

#[test]
fn writing_shutdown_during_failing_retries_is_interrupted() {
    let mut m = writing(profile());
    m.on(write_failed(true, false));
    m.on(Event::Shutdown);
    let o = finish(&m.on(write_failed(true, false))).clone();
    assert_eq!(
        (o.status, o.code),
        (Status::Failed, Some(ErrorCode::Interrupted))
    );
}

#[test]
fn restarted_acknowledged_is_supervised_to_its_deadline() {
    let mut m = Machine::new(profile());
    assert_eq!(m.on(Event::Restarted(Found::Acknowledged)), vec![]);
    assert!(m.is_supervising());
    assert_eq!(m.status(), Status::Running);
}

#[test]
fn restarted_in_flight_with_a_cancel_plan_writes_the_stop_and_ends_interrupted() {
    let stoppable = Profile {
        has_cancel: true,
        ..profile()
    };
    let mut m = Machine::new(stoppable);
    assert_eq!(
        m.on(Event::Restarted(Found::InFlight)),
        vec![Effect::WriteCancel]
    );
    let o = finish(&m.on(Event::CancelWritten)).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::Interrupted),
            Reason::RestartStop { failed: None }
        )
    );
    let mut m = Machine::new(stoppable);
    m.on(Event::Restarted(Found::InFlight));
    let o = finish(&m.on(Event::CancelFailed {
        code: ErrorCode::DeviceOffline,
        detail: "no answer".into(),
    }))
    .clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::Interrupted),
            Reason::RestartStop {
                failed: Some("no answer".into())
            }
        )
    );
}

#[test]
fn restarted_without_a_way_to_confirm_or_stop_ends_interrupted_at_once() {
    for found in [Found::InFlight, Found::NotSent, Found::Undeclared] {
        let mut m = Machine::new(profile());
        let o = finish(&m.on(Event::Restarted(found))).clone();
        assert_eq!(
            (o.status, o.code, o.reason, o.verified),
            (
                Status::Failed,
                Some(ErrorCode::Interrupted),
                Reason::Restart(found),
                false
            ),
            "{found:?}"
        );
    }
}
