//! Cases built around a board whose reports may carry no value. Relay 0 is behind a board
//! (garbled from the start in some cases); the script switches it and the devices beside it,
//! and turns its payloads garbled and whole again (`Op::Board`), so that reports without a value
//! fall after acknowledgements, before deadlines, under the standing alarm on its contact (which
//! blocks device 1, often) and under device 1's `requires` on it (often). The properties are in
//! `check/no_value.rs` and `check/alarms/no_value.rs`.

use super::alarm::AlarmSpec;
use super::spec::*;
use super::strategy::{board_mode, delay, device_base, push};
use proptest::prelude::*;

/// A step of such a case: mostly submissions and board switches.
fn step() -> impl Strategy<Value = Step> {
    let submit = (
        0..3usize,
        any::<bool>(),
        0.0..1.0f64,
        prop_oneof![5 => Just(0u64), 1 => 1..2000u64],
    )
        .prop_map(|(device, on, x, wait_ms)| Op::Submit {
            device,
            follow: false,
            // Raw, as `strategy::submit` makes them: negative for `on`, resolved per model.
            arg: Arg::Number(if on { -1.0 - x } else { x }),
            wait_ms,
        });
    let board = board_mode().prop_map(|mode| Op::Board { device: 0, mode });
    let garble = Just(Op::Board {
        device: 0,
        mode: BoardMode::Garbled,
    });
    let op = prop_oneof![5 => submit, 2 => board, 2 => garble, 1 => (0..8usize).prop_map(|nth| Op::Cancel { nth })];
    (delay(), op).prop_map(|(delay_ms, op)| Step { delay_ms, op })
}

/// The devices: relay 0 behind a board, one or two others; device 1 requires relay 0 off or
/// on, often.
fn devices() -> impl Strategy<Value = Vec<DeviceSpec>> {
    (
        (device_base(), 0..60u64, push(), prop::bool::weighted(0.3)),
        prop::collection::vec(device_base(), 1..=2),
        prop::option::weighted(0.5, any::<bool>()),
    )
        .prop_map(
            |((board, pull_in_ms, push, garbled), mut others, requires)| {
                let mut push = push.unwrap_or(Push {
                    heartbeat_ms: 200,
                    late_ms: 0,
                    start: BoardMode::Reports,
                });
                if garbled {
                    push.start = BoardMode::Garbled;
                }
                let board = DeviceSpec {
                    model: Model::Relay { pull_in_ms },
                    push: Some(push),
                    requires: None,
                    ..board
                };
                // Raw: `Case::resolve` maps device 1's reference 1 onto device 0, with two devices
                // or three.
                others[0].requires = requires.map(|off| Requires { device: 1, off });
                std::iter::once(board).chain(others).collect()
            },
        )
}

/// A case around a board that may send reports without a value, resolved.
pub fn case() -> impl Strategy<Value = Case> {
    let alarm = prop::option::weighted(
        0.6,
        (0.0..1.0f64).prop_map(|level| AlarmSpec {
            device: 0,
            // Raw: resolved onto device 1.
            blocks: 0,
            level,
        }),
    );
    (devices(), prop::collection::vec(step(), 2..=7), alarm).prop_map(|(devices, steps, alarm)| {
        Case {
            devices,
            steps,
            alarm,
        }
        .resolve()
    })
}
