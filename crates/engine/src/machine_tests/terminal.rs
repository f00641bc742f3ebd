//! Terminal states take no further event.

use super::*;

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
        m.on(Event::Deadline { answering: false });
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
