//! Every transition of the lifecycle, legal and illegal: the helpers and the first states here,
//! one file for each later state.

mod supervising;
mod supervising_deadline;
mod supervising_freshness;
mod terminal;
mod writing;

use super::*;

fn profile() -> Profile {
    Profile {
        check: Check::Feedback,
        idempotent: true,
        has_cancel: false,
        has_started_when: false,
        hold_ms: 0,
        max_attempts: 3,
        readback_only: false,
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
        already: false,
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
        Event::Unreadable {
            code: ErrorCode::BusNak,
            detail: "x".into(),
        },
        Event::NoValue { detail: "x".into() },
        Event::Deadline { answering: false },
        Event::Deadline { answering: true },
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
fn queued_reject_fails_with_its_code_and_nothing_written() {
    let mut m = queued(profile());
    let fx = m.on(Event::Reject {
        code: ErrorCode::Interlock,
        detail: "door open".into(),
    });
    assert_eq!(fx.len(), 1, "only the finish: no write, no stop");
    let o = finish(&fx);
    assert_eq!(
        (o.status, o.code.clone(), o.verified),
        (Status::Failed, Some(ErrorCode::Interlock), false)
    );
    assert_eq!(o.reason, Reason::Rejected("door open".into()));
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
        Event::Deadline { answering: false },
        Event::CancelWritten,
        Event::Accept,
    ] {
        let mut m = queued(profile());
        assert_eq!(m.on(e.clone()), vec![], "{e:?}");
        assert!(m.is_queued());
    }
}
