//! Regression tests for queue waits: a command admitted on a precondition that held, waiting in
//! its exclusive group's queue while the device the precondition names changes, must be judged
//! again when the group frees — on what is read then, not on what admission read.

use crate::regressions::one_device;
use crate::{check, spec};

/// A heater that requires relay 2 open waits (from 20 ms) behind a 2 s move of an axis in its
/// exclusive group; `change` happens to relay 2 at 500 ms, while it waits. Relay 2 (liveness
/// window 0.3 s) is polled, or behind a board (`push`) reporting every 50 ms.
fn queued_behind_a_long_move(change: spec::Op, push: Option<spec::Push>) -> spec::Case {
    let axis = spec::Model::Stepper {
        speed_mm_s: 100.0,
        travel: [0.0, 300.0],
        param: [0.0, 300.0],
    };
    let mut stepper = one_device(axis, vec![]);
    stepper.group = Some(0);
    let heater = spec::Model::Heater {
        rate_c_per_s: 50.0,
        ambient_c: 20.0,
    };
    let mut heater = one_device(heater, vec![]);
    heater.group = Some(0);
    heater.queue_timeout_s = 5.0;
    heater.requires = Some(spec::Requires {
        device: 2,
        off: true,
    });
    let mut relay = one_device(spec::Model::Relay { pull_in_ms: 10 }, vec![]);
    relay.max_silence_s = 0.3;
    relay.push = push;
    let submit = |device, x| spec::Op::Submit {
        device,
        follow: false,
        arg: spec::Arg::Number(x),
        wait_ms: 0,
    };
    let step = |delay_ms, op| spec::Step { delay_ms, op };
    spec::Case {
        devices: vec![stepper, heater, relay],
        alarm: None,
        steps: vec![
            step(0, submit(0, 200.0)),
            step(20, submit(1, 30.0)),
            step(480, change),
        ],
    }
}

/// The command on device `dev` (the only one there): when it was dispatched, status, code and
/// detail as journaled, after the checks found nothing wrong.
fn outcome_on(case: &spec::Case, dev: usize) -> (Option<i64>, String, Option<String>, String) {
    let out = crate::regressions::run_checked(case);
    let cmds = check::commands(case, &out);
    let c = cmds.iter().find(|c| c.dev == dev).expect("a command there");
    let detail = c.j.row.detail.clone().unwrap_or_default();
    let dispatched = c.dispatched.map(|(t, _)| t);
    (dispatched, c.status.into(), c.code.map(Into::into), detail)
}

/// Relay 2 goes silent (zombie) while the heater waits: by the time the axis is done (2 s) its
/// last read is 1.5 s old, five times its window. Admission found it open; dispatch must not go
/// by that: the heater ends `failed INTERLOCK` (nothing written), the precondition "cannot be
/// judged" because relay 2 is offline. A dispatch that trusted admission's judgement would heat.
#[test]
fn a_queued_command_whose_requires_went_stale_in_the_queue_is_refused_at_dispatch() {
    let zombie = spec::Op::Inject {
        device: 2,
        fault: closedloop_sim::FaultSpec::now(closedloop_sim::Fault::Zombie),
    };
    let (dispatched, status, code, detail) =
        outcome_on(&queued_behind_a_long_move(zombie, None), 1);
    assert_eq!(dispatched, None, "nothing was written: {detail}");
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("INTERLOCK")),
        "{detail}"
    );
    assert!(
        detail.starts_with(
            "The precondition `!devices.relay2.contact` cannot be judged: relay2 is offline"
        ),
        "{detail}"
    );
}

/// Relay 2 sits behind a board whose reports turn garbled (no value) while the heater waits:
/// the board is still heard, but its contact has had no value since 500 ms. Dispatch refuses:
/// `failed INTERLOCK`, saying the signal has had no value, nothing written.
#[test]
fn a_queued_command_whose_requires_board_sent_no_value_is_refused_at_dispatch() {
    let push = spec::Push {
        heartbeat_ms: 50,
        late_ms: 0,
        start: spec::BoardMode::Reports,
    };
    let garbled = spec::Op::Board {
        device: 2,
        mode: spec::BoardMode::Garbled,
    };
    let case = queued_behind_a_long_move(garbled, Some(push));
    let (dispatched, status, code, detail) = outcome_on(&case, 1);
    assert_eq!(dispatched, None, "nothing was written: {detail}");
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("INTERLOCK")),
        "{detail}"
    );
    assert!(
        detail.contains("devices.relay2.contact has had no value since"),
        "{detail}"
    );
}
