//! What fuzzing the register codec found (`fuzz/fuzz_targets/register_encoding.rs`), one test per
//! bug, minimised to the plant-file terms that reach it. All fixed: each test failed before its
//! fix, and the fuzz target holds the codec to the fixed behaviour.

use closedloop_contract::{EncodeError, Encoding, Value, ValueType};

fn enc(ty: ValueType, scale: f64, offset: f64) -> Encoding {
    Encoding {
        ty,
        scale,
        offset,
        ..Encoding::default()
    }
}

fn number(v: Value) -> f64 {
    match v {
        Value::Number(n) => n,
        Value::Bool(b) => panic!("a number register decoded as the bool {b}"),
    }
}

fn f32_words(x: f32) -> [u16; 2] {
    let b = x.to_bits();
    [(b >> 16) as u16, b as u16]
}

/// `Encoding::encode` refuses what a register cannot hold, never saturates: for f64 registers it
/// wrote (value − offset) / scale without checking that it is finite, so an overflow went to the
/// device as +∞.
///
/// Fixed in crates/contract/src/codec.rs, `encode`'s f64 arm: it refuses a
/// non-finite `scaled` with `OutOfRange` as the f32 arm does.
#[test]
fn f64_values_the_register_cannot_hold_are_refused() {
    // `scale = 1e-300` is finite and non-zero: the plant loader accepts it.
    let e = enc(ValueType::F64, 1e-300, 0.0);
    let got = e.encode(Value::Number(1e10));
    assert!(
        matches!(got, Err(EncodeError::OutOfRange { .. })),
        "1e10 at scale 1e-300 was encoded as {got:04x?}, which reads {:?}",
        got.as_ref().map(|w| e.decode(w))
    );
    // Value and offset of opposite signs: the difference overflows.
    let e = enc(ValueType::F64, 1.0, -1e308);
    let got = e.encode(Value::Number(1e308));
    assert!(
        matches!(got, Err(EncodeError::OutOfRange { .. })),
        "{got:04x?}"
    );
}

/// `decode` rounds to the decimals the scale carries, but the private `decimals` counts a scale
/// below 1e-9 as having none (its tolerance `1e-9 * m.abs().max(1.0)` is absolute below 1), so
/// every value is rounded to a whole number.
#[test]
fn tiny_scales_do_not_round_values_away() {
    let e = enc(ValueType::U32, 1e-10, 0.0);
    // 3e9 = 0xB2D0_5E00: 3e9 × 1e-10 = 0.3.
    let read = number(e.decode(&[0xB2D0, 0x5E00]));
    assert!((read - 0.3).abs() < 1e-12, "3e9 × 1e-10 reads {read}");
    let words = e.encode(Value::Number(0.3)).expect("0.3 fits");
    assert_eq!(words, [0xB2D0, 0x5E00]);
    let back = number(e.decode(&words));
    assert!(
        (back - 0.3).abs() < 1e-12,
        "0.3 written and read back is {back}"
    );
}

/// The same misjudgement for large numbers: `decimals` ignores a fraction beyond the ninth
/// significant digit (its tolerance is relative), so an offset of 1e9 + 0.125 counts as a whole
/// number and the reading loses its fraction.
#[test]
fn large_offsets_keep_their_decimals() {
    let e = enc(ValueType::U16, 1.0, 1_000_000_000.125);
    assert_eq!(e.decode(&[0]), Value::Number(1_000_000_000.125));
    assert_eq!(e.decode(&[3]), Value::Number(1_000_000_003.125));
}

/// The decimal rounding in `decode` (meant to turn 252 × 0.1 into 25.2, not 25.200000000000003)
/// also applies to f32 and f64 registers, whose raw value is not an integer: it cuts their
/// precision to the decimals of the scale and offset.
#[test]
fn float_registers_keep_their_precision_under_scale_and_offset() {
    // A meter's power as an f32 in W, read in kW.
    let kw = enc(ValueType::F32, 0.001, 0.0);
    let read = number(kw.decode(&f32_words(1234.5678)));
    assert!(
        (read - 1.2345678).abs() < 1e-6,
        "1234.5678 W at scale 0.001 reads {read} kW"
    );
    // A temperature as an f32 in K, read in °C.
    let celsius = enc(ValueType::F32, 1.0, -273.15);
    let words = celsius.encode(Value::Number(21.4567)).expect("fits");
    let back = number(celsius.decode(&words));
    assert!(
        (back - 21.4567).abs() < 1e-4,
        "21.4567 °C written and read back is {back}"
    );
    // What the fuzzer found: an f64 at scale 0.001 with offset 273.15.
    let e = enc(ValueType::F64, 0.001, 273.15);
    let words = e.encode(Value::Number(-0.2578125)).expect("fits");
    let back = number(e.decode(&words));
    assert!(
        (back + 0.2578125).abs() < 1e-9,
        "-0.2578125 written and read back is {back}"
    );
}

/// Found by the fuzzer once the decimals were fixed: a scale finer than 12 decimals (here a
/// subnormal, which the loader accepts as finite and non-zero) was rounded to 12 decimals, so
/// every value read 0.
#[test]
fn scales_finer_than_twelve_decimals_are_not_rounded_away() {
    let e = enc(ValueType::U32, 1.1383e-320, 0.0);
    let words = e.encode(Value::Number(2.1e-314)).expect("fits a u32");
    let back = number(e.decode(&words));
    assert!(back > 0.0, "2.1e-314 written and read back is {back}");
    let e = enc(ValueType::U16, 1e-13, 0.0);
    let read = number(e.decode(&[3]));
    assert!((read - 3e-13).abs() < 1e-25, "3 × 1e-13 reads {read}");
}

/// Found by the fuzzer after the first fix: an offset with five decimals at a magnitude of 1e11
/// counted as having one (the tolerance was a relative 1e-12, an absolute 0.15 there), so a
/// value came back rounded beyond half a raw step.
#[test]
fn large_offsets_with_many_decimals_round_trip_within_half_a_step() {
    let e = enc(ValueType::I64, 0.05, 156_842_196_990.242_68);
    let v = 156_842_099_844.517_64;
    let back = number(e.decode(&e.encode(Value::Number(v)).expect("fits")));
    assert!(
        (back - v).abs() <= 0.025 + 1e-6,
        "{v} written and read back is {back}"
    );
}
