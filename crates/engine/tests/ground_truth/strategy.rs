//! proptest strategies for cases. Generated values are raw (device references are any index,
//! arguments are fractions); [`Case::resolve`] maps them onto the plant they belong to, so that
//! every shrink of a case is still a valid case.

use super::spec::*;
use closedloop_sim::{Fault, FaultKind, FaultSpec};
use proptest::prelude::*;

fn model() -> impl Strategy<Value = Model> {
    prop_oneof![
        4 => prop_oneof![4 => 0..40u64, 1 => 40..160u64].prop_map(|pull_in_ms| Model::Relay { pull_in_ms }),
        3 => (
            prop_oneof![1 => 20.0..100.0f64, 2 => 100.0..1500.0f64],
            prop_oneof![3 => Just(0.0f64), 1 => -50.0..0.0f64],
            50.0..300.0f64,
            prop_oneof![3 => Just(0.0f64), 1 => 1.0..60.0f64],
        )
            .prop_map(|(speed, lo, hi, past)| {
                let (lo, hi) = (lo.round(), hi.round());
                Model::Stepper {
                    speed_mm_s: speed.round(),
                    travel: [lo, hi],
                    param: [lo, hi + past.round()],
                }
            }),
        2 => (10.0..200.0f64, 15.0..30.0f64).prop_map(|(rate, ambient)| Model::Heater {
            rate_c_per_s: rate.round(),
            ambient_c: ambient.round(),
        }),
    ]
}

/// A fault of any kind; [`resolve_fault`] turns one that does not apply to a model into one that
/// does.
pub fn fault() -> impl Strategy<Value = FaultSpec> {
    let fault = prop_oneof![
        2 => Just(Fault::Brownout),
        2 => Just(Fault::SwappedContacts),
        2 => (prop::option::of(0.0..300.0f64)).prop_map(|at| Fault::Stall { at_mm: at.map(f64::round) }),
        1 => Just(Fault::PowerOff),
        1 => Just(Fault::Zombie),
        1 => Just(Fault::Nak),
        1 => (1..400u64).prop_map(|ms| Fault::LatencyMs { ms }),
        1 => (1..=12u32).prop_map(|k| Fault::DropRate { p: f64::from(k) / 20.0 }),
        1 => (10..1500u64).prop_map(|down_ms| Fault::Reboot { down_ms }),
        1 => Just(Fault::CrcError),
    ];
    let after = prop_oneof![1 => Just(None), 1 => (0..700u64).prop_map(Some)];
    (fault, after).prop_map(|(fault, after_ms)| FaultSpec { fault, after_ms })
}

/// A board in front of a relay (kept only for relays, by `Case::resolve`): heartbeats from
/// well inside its liveness window to beyond it, reports on time or late, some boards silent
/// from the start, some sending reports without a value.
pub fn push() -> impl Strategy<Value = Option<Push>> {
    let push = (
        prop_oneof![2 => 20..300u64, 2 => 300..1500u64, 1 => 1500..4000u64],
        prop_oneof![3 => Just(0u64), 1 => 1..150u64, 1 => 150..1500u64],
        prop_oneof![
            17 => Just(BoardMode::Reports),
            3 => Just(BoardMode::Silent),
            2 => Just(BoardMode::Garbled),
        ],
    )
        .prop_map(|(heartbeat_ms, late_ms, start)| Push {
            heartbeat_ms,
            late_ms,
            start,
        });
    prop::option::weighted(0.3, push)
}

/// What `Op::Board` switches a board to.
pub fn board_mode() -> impl Strategy<Value = BoardMode> {
    prop_oneof![
        2 => Just(BoardMode::Reports),
        2 => Just(BoardMode::Silent),
        1 => Just(BoardMode::Deaf),
        2 => Just(BoardMode::Garbled),
    ]
}

fn device() -> impl Strategy<Value = DeviceSpec> {
    (device_base(), push()).prop_map(|(d, push)| DeviceSpec { push, ..d })
}

pub fn device_base() -> impl Strategy<Value = DeviceSpec> {
    (
        (
            model(),
            10..=100u64,
            3..=30u64,
            prop_oneof![3 => 20..=500u64, 1 => Just(500u64)],
            0..1000u64,
            prop_oneof![5 => Just(0usize), 4 => Just(1usize), 1 => Just(2usize)],
            prop::collection::vec(fault(), 2),
        ),
        (
            prop_oneof![
                3 => (0..120u64).prop_map(|margin_ms| Expect::Consistent { margin_ms }),
                1 => (0..2500u64).prop_map(|ms| Expect::Fixed { ms }),
            ],
            prop_oneof![1 => Just(100u64), 1 => 0..400u64],
            prop::bool::weighted(0.85),
            prop_oneof![1 => 0.0..0.5f64, 2 => 0.5..6.0f64],
            prop_oneof![3 => Just(None), 1 => (0..2u8).prop_map(Some)],
            prop::option::weighted(0.25, (0..3usize, any::<bool>())),
            any::<bool>(),
            prop::option::weighted(0.25, 0..3usize),
        ),
    )
        .prop_map(
            |(
                (model, poll_ms, silence_polls, timeout_ms, seed, nfaults, faults),
                (expect, floor_ms, queue, queue_timeout_s, group, requires, idempotent, follow),
            )| DeviceSpec {
                model,
                poll_ms,
                // At least three polls (and 0.1 s) of silence before a device counts as offline.
                max_silence_s: ((poll_ms * silence_polls) as f64 / 1000.0).max(0.1),
                timeout_ms,
                seed,
                faults: faults.into_iter().take(nfaults).collect(),
                expect,
                floor_ms,
                queue,
                queue_timeout_s: (queue_timeout_s * 100.0).round() / 100.0,
                group,
                requires: requires.map(|(device, off)| Requires { device, off }),
                idempotent,
                follow,
                push: None,
            },
        )
}

fn submit() -> impl Strategy<Value = Op> {
    (
        0..3usize,
        prop::bool::weighted(0.2),
        any::<bool>(),
        0.0..1.0f64,
        prop_oneof![6 => Just(0u64), 1 => 1..3000u64],
    )
        .prop_map(|(device, follow, on, x, wait_ms)| Op::Submit {
            device,
            follow,
            // Resolved per model: `on` for relays, `x` scaled for steppers and heaters.
            arg: if on {
                Arg::Number(-1.0 - x)
            } else {
                Arg::Number(x)
            },
            wait_ms,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => submit(),
        2 => (0..8usize).prop_map(|nth| Op::Cancel { nth }),
        2 => (0..3usize, fault()).prop_map(|(device, fault)| Op::Inject { device, fault }),
        1 => (0..3usize, 0..FaultKind::ALL.len()).prop_map(|(device, k)| Op::Clear {
            device,
            kind: FaultKind::ALL[k],
        }),
        1 => any::<bool>().prop_map(|fresh| Op::Restart { fresh }),
        2 => (0..3usize, prop::bool::weighted(0.6)).prop_map(|(device, on)| Op::Refuse { device, on }),
        4 => (0..3usize, board_mode()).prop_map(|(device, mode)| Op::Board { device, mode }),
    ]
}

/// A standing alarm on one device's feedback blocking another (resolved by `Case::resolve`).
fn alarm() -> impl Strategy<Value = Option<super::alarm::AlarmSpec>> {
    let spec = (0..3usize, 0..3usize, 0.0..1.0f64).prop_map(|(device, blocks, level)| {
        super::alarm::AlarmSpec {
            device,
            blocks,
            level,
        }
    });
    prop::option::weighted(0.35, spec)
}

pub fn delay() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..40u64, 2 => 40..400u64, 1 => 400..2500u64]
}

fn step() -> impl Strategy<Value = Step> {
    (delay(), op()).prop_map(|(delay_ms, op)| Step { delay_ms, op })
}

/// Only submissions: the plant alone decides most outcomes (see `expect.rs`).
fn quiet_step() -> impl Strategy<Value = Step> {
    (delay(), submit()).prop_map(|(delay_ms, op)| Step { delay_ms, op })
}

/// A whole case, resolved: a random plant and script, or one built around a queue wait
/// (`queue.rs`) or a board whose reports may carry no value (`garbled.rs`).
pub fn case() -> impl Strategy<Value = Case> {
    let random = (
        prop::collection::vec(device(), 1..=3),
        prop_oneof![
            1 => prop::collection::vec(quiet_step(), 1..=3),
            2 => prop::collection::vec(step(), 1..=7),
        ],
        alarm(),
    )
        .prop_map(|(devices, steps, alarm)| {
            Case {
                devices,
                steps,
                alarm,
            }
            .resolve()
        });
    // Boxed: their nested types made one value tree deep enough to overflow a test thread's stack.
    prop_oneof![
        7 => random.boxed(),
        1 => super::queue::case().boxed(),
        1 => super::garbled::case().boxed(),
    ]
}

/// A fault that applies to `model` (faults of another model become `nak`/`latency`).
fn resolve_fault(model: &Model, f: FaultSpec) -> FaultSpec {
    let fault = match (model, f.fault) {
        (Model::Relay { .. }, Fault::Stall { .. }) => Fault::LatencyMs { ms: 5 },
        (Model::Stepper { travel, .. }, Fault::Stall { at_mm: Some(at) }) => Fault::Stall {
            at_mm: Some(at.clamp(travel[0], travel[1])),
        },
        (Model::Stepper { .. } | Model::Heater { .. }, Fault::Brownout) => Fault::Nak,
        (Model::Stepper { .. } | Model::Heater { .. }, Fault::SwappedContacts) => {
            Fault::DropRate { p: 0.3 }
        }
        (Model::Heater { .. }, Fault::Stall { .. }) => Fault::Reboot { down_ms: 200 },
        (_, other) => other,
    };
    // The plant file takes a stall at a position or at a time, not both.
    let after_ms = match fault {
        Fault::Stall { at_mm: Some(_) } => None,
        _ => f.after_ms,
    };
    FaultSpec { fault, after_ms }
}

impl Case {
    /// Maps every reference onto this case's devices and every argument onto its model.
    pub fn resolve(mut self) -> Case {
        let n = self.devices.len();
        let models: Vec<Model> = self.devices.iter().map(|d| d.model.clone()).collect();
        for (i, d) in self.devices.iter_mut().enumerate() {
            resolve_device(d, i, &models);
        }
        if let Some(a) = &mut self.alarm {
            a.device %= n;
            // Another device when there is one; with one device it blocks itself.
            a.blocks = (a.device + 1 + a.blocks % n.max(2)) % n;
        }
        let mut restarts = 0;
        self.steps
            .retain_mut(|s| resolve_op(&self.devices, &mut s.op, &mut restarts));
        if self.steps.is_empty() {
            self.steps.push(Step {
                delay_ms: 0,
                op: Op::Cancel { nth: 0 },
            });
        }
        self
    }
}

/// Device `d` (the `i`th of devices of `models`): its push only on a relay, one fault per
/// kind (each applying to its model), its `requires` and `follow` onto other devices.
fn resolve_device(d: &mut DeviceSpec, i: usize, models: &[Model]) {
    let n = models.len();
    d.push = d.push.filter(|_| matches!(d.model, Model::Relay { .. }));
    // Plant faults: one per kind.
    let mut seen = Vec::new();
    d.faults = std::mem::take(&mut d.faults)
        .into_iter()
        .map(|f| resolve_fault(&d.model, f))
        .filter(|f| {
            let k = f.fault.kind();
            let new = !seen.contains(&k);
            seen.push(k);
            new
        })
        .collect();
    d.requires = d.requires.and_then(|r| {
        (n > 1).then(|| Requires {
            device: (i + 1 + r.device % (n - 1)) % n,
            off: r.off,
        })
    });
    d.follow = d.follow.and_then(|k| {
        let k = (i + 1 + k % n.max(2)) % n;
        (k != i
            && matches!(d.model, Model::Relay { .. })
            && matches!(models[k], Model::Relay { .. }))
        .then_some(k)
    });
}

/// A step's operation onto `devices`; whether the step is kept (a board step only on a board,
/// at most two restarts, counted in `restarts`).
fn resolve_op(devices: &[DeviceSpec], op: &mut Op, restarts: &mut usize) -> bool {
    let n = devices.len();
    match op {
        Op::Submit {
            device,
            follow,
            arg,
            ..
        } => {
            *device %= n;
            let d = &devices[*device];
            *follow &= d.follow.is_some();
            let Arg::Number(raw) = *arg else {
                return true;
            };
            *arg = resolve_arg(&d.model, raw);
        }
        Op::Inject { device, fault } => {
            *device %= n;
            *fault = resolve_fault(&devices[*device].model, *fault);
        }
        Op::Clear { device, .. } | Op::Refuse { device, .. } => *device %= n,
        Op::Board { device, .. } => {
            *device %= n;
            return devices[*device].push.is_some();
        }
        Op::Restart { .. } => {
            *restarts += 1;
            return *restarts <= 2;
        }
        Op::Cancel { .. } => {}
    }
    true
}

/// A generated number as an argument of `model`: a relay's `on` (negative: true), a stepper's
/// target within its range, a heater's temperature from 5 °C under ambient.
fn resolve_arg(model: &Model, raw: f64) -> Arg {
    let (on, x) = if raw < 0.0 {
        (true, -raw - 1.0)
    } else {
        (false, raw)
    };
    match model {
        Model::Relay { .. } => Arg::On(on),
        Model::Stepper { param, .. } => Arg::Number((param[0] + x * (param[1] - param[0])).round()),
        Model::Heater { ambient_c, .. } => Arg::Number((ambient_c - 5.0 + x * 45.0).round()),
    }
}
