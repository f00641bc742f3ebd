//! Properties of the register codec ([`Encoding`]) over generated types, layouts, scales and
//! values (issue 14, "proptest round trips for every codec").
//!
//! Guarded:
//! - encode → decode is the identity on every value a register type holds, in every word order
//!   and byte swap, and registers read from a device re-encode to the same registers;
//! - writes round to the nearest raw value (documented in `codec.rs`), so a scaled value comes
//!   back within half a raw step, and a value is accepted exactly when its rounded raw value fits
//!   the type — then it is that raw value that is written, never a bound in its place;
//! - NaN, ±∞, a value beyond the type, or a `bool` register given anything but 0/1 is refused.
//!
//! Why: closedloop confirms an action by reading back what it wrote. A clamped setpoint reads
//! back as "confirmed" while being a silent lie about what was commanded.

use closedloop_contract::{EncodeError, Encoding, Value, ValueType, WordOrder};
use proptest::prelude::*;

/// Scales and offsets as plant files write them (docs/plant-file.md, the examples).
const SCALES: [f64; 10] = [1.0, 0.1, 0.01, 0.001, 0.5, 0.25, 10.0, -1.0, 0.05, -0.1];
const OFFSETS: [f64; 6] = [0.0, -40.0, 273.15, -273.15, 100.0, 0.5];

fn enc(ty: ValueType, (word_order, byte_swap): (WordOrder, bool)) -> Encoding {
    Encoding {
        ty,
        word_order,
        byte_swap,
        ..Encoding::default()
    }
}

fn layout() -> impl Strategy<Value = (WordOrder, bool)> {
    (
        prop_oneof![Just(WordOrder::Big), Just(WordOrder::Little)],
        any::<bool>(),
    )
}

/// A 64-bit integer that f64 holds exactly: at most 53 significant bits, shifted.
fn exact_u64() -> impl Strategy<Value = f64> {
    (0u64..1 << 53, 0u32..=11).prop_map(|(m, e)| (m << e) as f64)
}

fn exact_i64() -> impl Strategy<Value = f64> {
    (-(1i64 << 53)..1 << 53, 0u32..=10).prop_map(|(m, e)| (m << e) as f64)
}

/// An integer type with a raw value it holds.
fn integer() -> impl Strategy<Value = (ValueType, f64)> {
    prop_oneof![
        any::<u16>().prop_map(|r| (ValueType::U16, f64::from(r))),
        any::<i16>().prop_map(|r| (ValueType::I16, f64::from(r))),
        any::<u32>().prop_map(|r| (ValueType::U32, f64::from(r))),
        any::<i32>().prop_map(|r| (ValueType::I32, f64::from(r))),
        exact_u64().prop_map(|r| (ValueType::U64, r)),
        exact_i64().prop_map(|r| (ValueType::I64, r)),
    ]
}

/// The raw values of an integer type as `[lo, hi)`, written from the types themselves rather
/// than from the codec's constants.
fn bounds(ty: ValueType) -> (f64, f64) {
    match ty {
        ValueType::U16 => (0.0, 65536.0),
        ValueType::I16 => (-32768.0, 32768.0),
        ValueType::U32 => (0.0, 2f64.powi(32)),
        ValueType::I32 => (-(2f64.powi(31)), 2f64.powi(31)),
        ValueType::U64 => (0.0, 2f64.powi(64)),
        ValueType::I64 => (-(2f64.powi(63)), 2f64.powi(63)),
        other => unreachable!("{other} is no integer type"),
    }
}

fn number(v: Value) -> f64 {
    match v {
        Value::Number(n) => n,
        Value::Bool(b) => panic!("a number register decoded as the bool {b}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn integers_round_trip_exactly_in_every_layout((ty, raw) in integer(), l in layout()) {
        let e = enc(ty, l);
        let words = e.encode(Value::Number(raw)).expect("a value the type holds");
        prop_assert_eq!(words.len(), usize::from(ty.words()));
        prop_assert_eq!(e.decode(&words), Value::Number(raw));
        prop_assert_eq!(e.encode(e.decode(&words)), Ok(words));
    }

    /// Any registers of a 16- or 32-bit integer type (every bit pattern, the sign bit included)
    /// decode to a value that encodes back to the same registers.
    #[test]
    fn any_registers_re_encode_to_themselves(
        ty in prop::sample::select(vec![
            ValueType::U16, ValueType::I16, ValueType::U32, ValueType::I32,
        ]),
        words in prop::collection::vec(any::<u16>(), 2),
        l in layout(),
    ) {
        let e = enc(ty, l);
        let words = &words[..usize::from(ty.words())];
        prop_assert_eq!(e.encode(e.decode(words)), Ok(words.to_vec()));
    }

    #[test]
    fn word_order_and_byte_swap_only_permute((ty, raw) in integer()) {
        let v = Value::Number(raw);
        let big = enc(ty, (WordOrder::Big, false)).encode(v).expect("fits");
        let little = enc(ty, (WordOrder::Little, false)).encode(v).expect("fits");
        let swapped = enc(ty, (WordOrder::Big, true)).encode(v).expect("fits");
        prop_assert_eq!(little, big.iter().rev().copied().collect::<Vec<_>>());
        prop_assert_eq!(swapped, big.iter().map(|w| w.swap_bytes()).collect::<Vec<_>>());
    }

    #[test]
    fn floats_round_trip_exactly(
        x in prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL | prop::num::f32::ZERO,
        y in prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        l in layout(),
    ) {
        let e = enc(ValueType::F32, l);
        let words = e.encode(Value::Number(f64::from(x))).expect("an f32 fits an f32");
        prop_assert_eq!(e.decode(&words), Value::Number(f64::from(x)));
        let e = enc(ValueType::F64, l);
        let words = e.encode(Value::Number(y)).expect("an f64 fits an f64");
        prop_assert_eq!(e.decode(&words), Value::Number(y));
    }

    /// An f64 written to an f32 register becomes the nearest f32 (rounding, documented); one
    /// beyond the largest f32 is refused, never written as ±f32::MAX or ±∞.
    #[test]
    fn f32_registers_round_to_nearest_and_refuse_beyond(
        v in prop::num::f64::NORMAL | prop::num::f64::ZERO,
        l in layout(),
    ) {
        let e = enc(ValueType::F32, l);
        let nearest = v as f32;
        match e.encode(Value::Number(v)) {
            Ok(words) => {
                prop_assert!(nearest.is_finite(), "{v} was accepted");
                prop_assert_eq!(e.decode(&words), Value::Number(f64::from(nearest)));
            }
            Err(err) => {
                prop_assert!(!nearest.is_finite(), "{v} was refused: {err}");
                let is_out_of_range = matches!(err, EncodeError::OutOfRange { .. });
                prop_assert!(is_out_of_range, "{}", err);
            }
        }
    }
}

/// A value near (or far from) a bound of an integer type, in steps that f64 can tell apart there.
fn near_a_bound() -> impl Strategy<Value = (ValueType, f64)> {
    let ty = prop::sample::select(vec![
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::U64,
        ValueType::I64,
    ]);
    let delta = prop_oneof![4 => -3.0..3.0f64, 1 => -1e30..1e30f64];
    (ty, any::<bool>(), delta).prop_map(|(ty, upper, d)| {
        let (lo, hi) = bounds(ty);
        // Above 2^53 neighbouring doubles are 2^(e-52) apart: step in those units.
        let step = if ty.words() == 4 { 4096.0 } else { 1.0 };
        let bound = if upper { hi - 1.0 } else { lo };
        (ty, bound + d * step)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Accepted exactly when the rounded raw value fits; then that value is what the registers
    /// hold. Covers 70000 or −1 for a u16, 65535.5 (rounds to 65536), and every 64-bit edge.
    #[test]
    fn integers_are_accepted_exactly_when_they_fit_never_saturated(
        (ty, v) in near_a_bound(),
        l in layout(),
    ) {
        let e = enc(ty, l);
        let (lo, hi) = bounds(ty);
        let raw = v.round();
        match e.encode(Value::Number(v)) {
            Ok(words) => {
                prop_assert!(raw >= lo && raw < hi, "{ty} accepted {v}");
                prop_assert_eq!(number(e.decode(&words)), raw);
            }
            Err(err) => {
                prop_assert!(!(raw >= lo && raw < hi), "{ty} refused {v}: {err}");
                let is_out_of_range = matches!(err, EncodeError::OutOfRange { .. });
                prop_assert!(is_out_of_range, "{}", err);
            }
        }
    }

    /// With the plant's usual scales and offsets: registers → value → registers is the
    /// identity, and a value written comes back within half a raw step of itself.
    #[test]
    fn scaled_values_round_trip_within_half_a_step(
        // Below 2^40, raw × scale + offset keeps the raw value exact (above, see the fuzz target).
        (ty, raw) in integer().prop_map(|(ty, r)| (ty, r % 2f64.powi(40))),
        scale in prop::sample::select(SCALES.to_vec()),
        offset in prop::sample::select(OFFSETS.to_vec()),
        x in 0.0..1.0f64,
        l in layout(),
    ) {
        let e = Encoding { scale, offset, ..enc(ty, l) };
        let words = enc(ty, l).encode(Value::Number(raw)).expect("fits");
        let read = number(e.decode(&words));
        prop_assert_eq!(e.encode(Value::Number(read)), Ok(words));
        // Any value between two raw steps of this one.
        let (lo, hi) = bounds(ty);
        let between = (raw + x - 0.5).clamp(lo, hi - 1.0);
        let v = between * scale + offset;
        let back = number(e.decode(&e.encode(Value::Number(v)).expect("in range")));
        let tol = scale.abs() * 0.5 * (1.0 + 1e-9) + (v.abs() + offset.abs()) * 2f64.powi(-50);
        prop_assert!((back - v).abs() <= tol, "{v} came back as {back}");
    }

    #[test]
    fn non_finite_values_are_refused_by_every_type(
        ty in prop::sample::select(vec![
            ValueType::Bool, ValueType::U16, ValueType::I16, ValueType::U32, ValueType::I32,
            ValueType::U64, ValueType::I64, ValueType::F32, ValueType::F64,
        ]),
        v in prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY]),
        scale in prop::sample::select(SCALES.to_vec()),
        l in layout(),
    ) {
        let e = Encoding { scale, ..enc(ty, l) };
        let got = e.encode(Value::Number(v));
        prop_assert!(matches!(got, Err(EncodeError::NotFinite(_))), "{ty} {v}: {got:?}");
    }

    /// A bool register holds 0 or 1: bools and the numbers 0 and 1 round trip, any other
    /// number is refused rather than written as 1.
    #[test]
    fn bool_registers_take_only_bools_zero_and_one(
        b in any::<bool>(),
        n in prop::num::f64::ANY,
        l in layout(),
    ) {
        let e = enc(ValueType::Bool, l);
        prop_assert_eq!(e.encode(Value::Bool(b)).map(|w| e.decode(&w)), Ok(Value::Bool(b)));
        let one_or_zero = Value::Number(f64::from(u8::from(b)));
        prop_assert_eq!(e.encode(one_or_zero).map(|w| e.decode(&w)), Ok(Value::Bool(b)));
        if n != 0.0 && n != 1.0 {
            prop_assert!(e.encode(Value::Number(n)).is_err(), "{n} was written to a bool");
        }
    }

    /// `bit = N` reads bit N of the (possibly byte-swapped) register and is never written.
    #[test]
    fn bits_read_one_bit_and_refuse_writes(
        w in any::<u16>(),
        bit in 0u8..16,
        swap in any::<bool>(),
    ) {
        let e = Encoding { bit: Some(bit), byte_swap: swap, ..Encoding::default() };
        let reg = if swap { w.swap_bytes() } else { w };
        prop_assert_eq!(e.decode(&[reg]), Value::Bool(w >> bit & 1 == 1));
        prop_assert_eq!(e.encode(Value::Bool(true)), Err(EncodeError::BitWrite));
    }
}

/// The bug the bool property found: `encode` wrote `value.as_bool()`, so 2, 0.3, −1 and NaN
/// reached a `type = "bool"` holding register as 1, while a coil and an OPC UA Boolean refuse
/// them.
#[test]
fn bool_register_refuses_numbers_other_than_0_and_1_not_clamped() {
    let e = enc(ValueType::Bool, (WordOrder::Big, false));
    for n in [2.0, 0.3, -1.0, 65535.0] {
        let got = e.encode(Value::Number(n));
        assert!(
            matches!(got, Err(EncodeError::OutOfRange { .. })),
            "{n}: {got:?}"
        );
    }
    assert_eq!(
        e.encode(Value::Number(f64::NAN))
            .map_err(|err| err.to_string()),
        Err("the value NaN is not a finite number".to_string())
    );
    assert_eq!(e.encode(Value::Number(1.0)), Ok(vec![1]));
    assert_eq!(e.encode(Value::Number(-0.0)), Ok(vec![0]));
}
