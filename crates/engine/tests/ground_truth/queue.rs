//! Cases built around a queue wait. A long command (a slow axis or heater, device 0) holds an
//! exclusive group; a command on device 1, in the same group and with a `requires` on relay 2,
//! waits in the queue behind it while relay 2 changes under it: switched so the precondition
//! turns false, silent (its value goes stale), refused (exception 4), or — behind a board —
//! silent or garbled (reports without a value); and maybe back before the wait ends. Admission
//! judged the precondition on what it read then: only dispatch, judging it again on what it
//! reads when the group frees, can tell (`check/requires.rs` checks each dispatch against the
//! physical record, and counts these commands).

use super::spec::*;
use super::strategy::{delay, device_base, push};
use closedloop_sim::{Fault, FaultSpec};
use proptest::prelude::*;

/// The command that holds the group: a slow axis or heater, 0.3–2.5 s of work (longer cases
/// cost the run more time than they add).
fn long_model() -> impl Strategy<Value = Model> {
    prop_oneof![
        (80.0..200.0f64, 100.0..200.0f64).prop_map(|(speed, hi)| Model::Stepper {
            speed_mm_s: speed.round(),
            travel: [0.0, hi.round()],
            param: [0.0, hi.round()],
        }),
        (15.0..50.0f64, 15.0..30.0f64).prop_map(|(rate, ambient)| Model::Heater {
            rate_c_per_s: rate.round(),
            ambient_c: ambient.round(),
        }),
    ]
}

/// What happens to relay 2 while the command waits: `turn` the precondition false, or make its
/// value unusable.
#[derive(Debug, Clone, Copy)]
enum Change {
    Turn,
    Fault(Fault),
    Refuse,
    Board(BoardMode),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => Just(Change::Turn),
        1 => Just(Change::Fault(Fault::Zombie)),
        1 => Just(Change::Fault(Fault::PowerOff)),
        1 => (501..900u64).prop_map(|ms| Change::Fault(Fault::LatencyMs { ms })),
        1 => Just(Change::Refuse),
        1 => Just(Change::Board(BoardMode::Silent)),
        2 => Just(Change::Board(BoardMode::Garbled)),
    ]
}

impl Change {
    /// The step making the change on relay 2, and the one undoing it; `Board` steps are dropped
    /// by `Case::resolve` when relay 2 has no board.
    fn ops(self, off: bool) -> (Op, Op) {
        let switch = |on| Op::Submit {
            device: 2,
            follow: false,
            arg: Arg::On(on),
            wait_ms: 0,
        };
        match self {
            Change::Turn => (switch(off), switch(!off)),
            Change::Fault(fault) => (
                Op::Inject {
                    device: 2,
                    fault: FaultSpec::now(fault),
                },
                Op::Clear {
                    device: 2,
                    kind: fault.kind(),
                },
            ),
            Change::Refuse => (
                Op::Refuse {
                    device: 2,
                    on: true,
                },
                Op::Refuse {
                    device: 2,
                    on: false,
                },
            ),
            Change::Board(mode) => (
                Op::Board { device: 2, mode },
                Op::Board {
                    device: 2,
                    mode: BoardMode::Reports,
                },
            ),
        }
    }
}

/// The three devices: the long one, the waiting one (its `requires` on relay 2), relay 2.
fn devices() -> impl Strategy<Value = Vec<DeviceSpec>> {
    (
        (device_base(), long_model()),
        (device_base(), 1.0..6.0f64, any::<bool>()),
        (device_base(), 0..60u64, push()),
    )
        .prop_map(|((a, model), (b, queue_s, off), (c, pull_in_ms, push))| {
            let calm = |d: DeviceSpec| DeviceSpec {
                faults: vec![],
                group: None,
                requires: None,
                follow: None,
                push: None,
                ..d
            };
            let long = DeviceSpec {
                model,
                group: Some(0),
                queue: true,
                expect: Expect::Consistent { margin_ms: 50 },
                ..calm(a)
            };
            let waiting = DeviceSpec {
                group: Some(0),
                queue: true,
                queue_timeout_s: (queue_s * 10.0).round() / 10.0,
                // Raw: `Case::resolve` maps device 1's reference 0 onto device 2.
                requires: Some(Requires { device: 0, off }),
                ..calm(b)
            };
            let relay = DeviceSpec {
                model: Model::Relay { pull_in_ms },
                push,
                ..calm(c)
            };
            vec![long, waiting, relay]
        })
}

/// A queue-wait case, resolved.
pub fn case() -> impl Strategy<Value = Case> {
    (
        devices(),
        (0.6..1.0f64, 1..60u64, 20..1000u64, change()),
        (
            prop::option::weighted(0.4, delay()),
            (any::<bool>(), 0.0..1.0f64),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(devices, (x, queued_after, change_after, change), (undo, (on, y), twice))| {
                let off = devices[1].requires.is_some_and(|r| r.off);
                let step = |delay_ms, op| Step { delay_ms, op };
                let submit = |device, arg| Op::Submit {
                    device,
                    follow: false,
                    arg,
                    wait_ms: 0,
                };
                let mut steps = Vec::new();
                if !off {
                    // Every relay starts open: close it first, so that admission finds it holding.
                    steps.push(step(0, submit(2, Arg::On(true))));
                }
                steps.push(step(if off { 0 } else { 300 }, submit(0, Arg::Number(x))));
                // Raw, as `strategy::submit` makes them: negative for `on`, resolved per model.
                let arg = |on: bool, y: f64| Arg::Number(if on { -1.0 - y } else { y });
                steps.push(step(queued_after, submit(1, arg(on, y))));
                if twice {
                    steps.push(step(1, submit(1, arg(!on, 1.0 - y))));
                }
                let (make, unmake) = change.ops(off);
                steps.push(step(change_after, make));
                steps.extend(undo.map(|ms| step(ms, unmake)));
                Case {
                    devices,
                    steps,
                    alarm: None,
                }
                .resolve()
            },
        )
}
