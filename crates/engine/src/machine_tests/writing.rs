//! Transitions out of `writing`: the acknowledgement, write failures and retries, cancel,
//! shutdown.

use super::*;

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
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
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
