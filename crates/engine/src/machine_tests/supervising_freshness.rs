//! Supervising edges of the one freshness rule: a device that answers but never reports on the
//! criterion (`NO_FEEDBACK`), a criterion signal that cannot be read (its own code), and a
//! device that was already in the state asked for (`already`).

use super::*;

fn read(done: bool, moved: bool, already: bool) -> Event {
    match reading(500, done, moved) {
        Event::Reading(r) => Event::Reading(Reading { already, ..r }),
        _ => unreachable!(),
    }
}

#[test]
fn supervising_deadline_without_a_fresh_read_of_an_answering_device_is_no_feedback() {
    // An MQTT board online by its heartbeats that never reported the relay after the command.
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::Deadline { answering: true });
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::NoFeedback),
            Reason::NoFreshRead { answering: true },
            false
        )
    );
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
}

#[test]
fn supervising_deadline_of_an_answering_device_that_reported_is_judged_on_its_reports() {
    // Reports that showed nothing moving: FEEDBACK_MISMATCH, whatever the liveness says.
    let mut m = supervising(profile());
    m.on(read(false, false, false));
    let o = finish(&m.on(Event::Deadline { answering: true })).clone();
    assert_eq!(o.code, Some(ErrorCode::FeedbackMismatch));
}

#[test]
fn supervising_unreadable_criterion_fails_with_its_code_and_stops() {
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let fx = m.on(Event::Unreadable {
        code: ErrorCode::BusNak,
        detail: "temp_c cannot be read".into(),
    });
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::BusNak),
            Reason::Unreadable("temp_c cannot be read".into()),
            false
        )
    );
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
    assert!(m.is_done());
}

#[test]
fn supervising_already_so_completes_saying_so() {
    let mut m = supervising(profile());
    let o = finish(&m.on(read(true, false, true))).clone();
    assert_eq!(
        (o.status, o.reason, o.verified),
        (Status::Completed, Reason::AlreadySo, true)
    );
}

#[test]
fn supervising_already_so_that_moved_in_between_is_a_confirmed_action() {
    // Off at dispatch, on for a moment, off again: the device acted.
    let mut m = supervising(profile());
    m.on(read(false, true, true));
    let o = finish(&m.on(read(true, false, true))).clone();
    assert_eq!((o.status, o.reason), (Status::Completed, Reason::Confirmed));
}

#[test]
fn writing_and_queued_ignore_an_unreadable_signal() {
    let unreadable = Event::Unreadable {
        code: ErrorCode::RegisterInvalid,
        detail: "x".into(),
    };
    let mut m = writing(profile());
    assert_eq!(m.on(unreadable.clone()), vec![]);
    let mut m = queued(profile());
    assert_eq!(m.on(unreadable), vec![]);
}

/// A board already in the state asked for reported it only sooner than the expected duration,
/// then nothing: at the deadline `done_when` had held, so "the feedback never moved, did not
/// hold" (`FEEDBACK_MISMATCH`) would be false. Found by the ground-truth harness (a relay board
/// that lost its relay's answers after reporting it already off). Regression test.
#[test]
fn supervising_deadline_after_already_so_reads_came_only_early_is_unconfirmed_not_never_moved() {
    for (answering, code) in [
        (false, ErrorCode::DeviceOffline),
        (true, ErrorCode::NoFeedback),
    ] {
        let mut m = supervising(profile());
        let early = match read(true, false, true) {
            Event::Reading(r) => Event::Reading(Reading {
                early: true,
                settled: true,
                ..r
            }),
            _ => unreachable!(),
        };
        assert!(m.on(early).is_empty(), "an early read confirms nothing");
        let o = finish(&m.on(Event::Deadline { answering })).clone();
        assert_eq!(
            (o.status, o.code, o.reason, o.verified),
            (
                Status::Failed,
                Some(code),
                Reason::AlreadyUnconfirmed { answering },
                false
            )
        );
    }
}

#[test]
fn supervising_deadline_after_a_payload_that_is_no_value_is_no_feedback_saying_what_came() {
    // A switch's state topic said `None` (Home Assistant's unknown) after the command: not
    // false, not silence — and not a verdict before the deadline.
    let mut m = supervising(Profile {
        has_cancel: true,
        ..profile()
    });
    let what = "heater has had no value since t (\"None\")".to_string();
    assert_eq!(
        m.on(Event::NoValue {
            detail: what.clone()
        }),
        vec![]
    );
    assert_eq!(m.status(), Status::Running, "the judge waits for a value");
    let fx = m.on(Event::Deadline { answering: true });
    let o = finish(&fx).clone();
    assert_eq!(
        (o.status, o.code, o.reason, o.verified),
        (
            Status::Failed,
            Some(ErrorCode::NoFeedback),
            Reason::Unreadable(what),
            false
        )
    );
    assert_eq!(fx[0], Effect::SafeState { write_cancel: true });
}

#[test]
fn supervising_deadline_after_no_value_from_a_device_no_longer_answering_is_offline() {
    // NO_FEEDBACK says the device is online: one gone silent after its payloads without a
    // value is offline at the deadline (found by the ground-truth harness).
    let mut m = supervising(profile());
    m.on(Event::NoValue {
        detail: "contact has had no value since t".into(),
    });
    let o = finish(&m.on(Event::Deadline { answering: false })).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::DeviceOffline),
            Reason::NoFreshRead { answering: false }
        )
    );
}

#[test]
fn supervising_deadline_after_a_value_then_only_no_value_is_no_feedback_not_never_moved() {
    // A settled report showed it not done; every report after it had no value (the change may
    // be among them): nothing shows it never moved (found by the ground-truth harness).
    let mut m = supervising(profile());
    m.on(reading(10, false, false));
    let what = "contact has had no value since t".to_string();
    m.on(Event::NoValue {
        detail: what.clone(),
    });
    let o = finish(&m.on(Event::Deadline { answering: true })).clone();
    assert_eq!(
        (o.status, o.code, o.reason),
        (
            Status::Failed,
            Some(ErrorCode::NoFeedback),
            Reason::Unreadable(what)
        )
    );
}

#[test]
fn supervising_a_value_after_no_value_decides_as_a_value_does() {
    let mut m = supervising(profile());
    m.on(Event::NoValue {
        detail: "None".into(),
    });
    m.on(read(false, false, false));
    let o = finish(&m.on(Event::Deadline { answering: true })).clone();
    assert_eq!(
        o.code,
        Some(ErrorCode::FeedbackMismatch),
        "judged on the value"
    );
    let mut m = supervising(profile());
    m.on(Event::NoValue {
        detail: "None".into(),
    });
    let o = finish(&m.on(read(true, true, false))).clone();
    assert_eq!(o.status, Status::Completed);
}
