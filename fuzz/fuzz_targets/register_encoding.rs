//! The register codec (`closedloop_contract::Encoding`): registers a device sends, decoded into
//! engineering values, and values an agent asks for, encoded into registers.
//!
//! Input: `ty, flags, bit, scale (8), offset (8), value (8), words...`. `ty % 9` is the raw type;
//! `flags` bit 0 little word order, bit 1 byte swap, bit 2 `bit = Some(bit % 16)`, bit 3 a scale
//! from the input's 8 bytes instead of `SCALES[scale[0] % len]`, bit 4 the same for the offset.
//!
//! Properties:
//! - decoding any slice (short, long, any bits) never panics and gives a bool exactly for `bool`
//!   and `bit` encodings;
//! - encoding follows the contract: `bit` → `BitWrite`; NaN/∞ → `NotFinite`; scale 0 →
//!   `ZeroScale`; otherwise either registers (exactly `words()` of them) that decode back to the
//!   value within half a scale step (float types: within their precision) — never a saturated or
//!   non-finite stand-in — or `OutOfRange`;
//! - encode→decode is the identity on values the encoding can hold: for the plant file's usual
//!   scales and offsets, a value decoded from registers encodes back to the same registers
//!   (integer types, and unscaled floats other than NaN), or for scaled floats to registers that
//!   decode to it within the float's precision.

#![no_main]

use closedloop_contract::{EncodeError, Encoding, Value, ValueType, WordOrder};
use libfuzzer_sys::fuzz_target;

const TYPES: [ValueType; 9] = [
    ValueType::Bool,
    ValueType::U16,
    ValueType::I16,
    ValueType::U32,
    ValueType::I32,
    ValueType::U64,
    ValueType::I64,
    ValueType::F32,
    ValueType::F64,
];

/// Scales and offsets as plant files write them (docs/plant-file.md, the examples).
const SCALES: [f64; 12] = [
    1.0, 0.1, 0.01, 0.001, 0.5, 0.25, 10.0, 100.0, -1.0, 2.0, 0.05, -0.1,
];
const OFFSETS: [f64; 8] = [0.0, -40.0, 273.15, -273.15, 100.0, 0.5, -1000.0, 32.0];

fn f64_at(data: &[u8], at: usize) -> f64 {
    let mut b = [0u8; 8];
    for (i, x) in b.iter_mut().enumerate() {
        *x = data.get(at + i).copied().unwrap_or(0);
    }
    f64::from_le_bytes(b)
}

fn is_float(ty: ValueType) -> bool {
    matches!(ty, ValueType::F32 | ValueType::F64)
}

/// How far `back` may lie from `v` after an encode→decode of an encoding that accepted `v`.
fn tolerance(e: &Encoding, v: f64) -> f64 {
    let mag = v.abs() + e.offset.abs();
    match e.ty {
        // The nearest f32, plus f64 arithmetic both ways.
        ValueType::F32 => {
            mag * 2f64.powi(-23) + e.scale.abs() * f64::from(f32::MIN_POSITIVE)
        }
        // As for f32: a raw value in the subnormal range has no relative precision left.
        ValueType::F64 => mag * 2f64.powi(-50) + e.scale.abs() * f64::MIN_POSITIVE,
        // The nearest raw step, plus f64 arithmetic both ways, plus the decode's rounding to
        // the decimals the scale and offset carry.
        _ => e.scale.abs() * 0.5 * (1.0 + 1e-9) + mag * 2f64.powi(-50) + tidied(e),
    }
}

/// How far the decode's rounding of `raw × scale + offset` to the decimals the scale and offset
/// carry (`Encoding::engineering`) may move a value: half a unit of the last decimal kept. The
/// decimals are found as the codec finds them, within 1e-15 relative, so a large offset with a
/// small fraction (498216266952.0005) counts as whole and its fraction is rounded away.
fn tidied(e: &Encoding) -> f64 {
    let decimals = |x: f64| {
        (0..=12).find(|d| {
            let m = x * 10f64.powi(*d);
            (m - m.round()).abs() <= 1e-15 * m.abs()
        })
    };
    if e.scale == 1.0 && e.offset == 0.0 {
        return 0.0;
    }
    match (decimals(e.scale), decimals(e.offset)) {
        (Some(ds), Some(doff)) => 0.5 * 10f64.powi(-ds.max(doff)) * (1.0 + 1e-9),
        _ => 0.0,
    }
}

fn check_encode(e: &Encoding, v: f64) {
    let got = e.encode(Value::Number(v));
    if e.bit.is_some() {
        assert_eq!(got, Err(EncodeError::BitWrite), "{e:?} {v}");
        return;
    }
    if e.ty == ValueType::Bool {
        // Only 0 and 1 stand for a bool; anything else is refused, never clamped to 1.
        if v == 0.0 || v == 1.0 {
            let regs = got.unwrap_or_else(|err| panic!("{e:?} {v}: 0 and 1 encode: {err}"));
            assert_eq!(regs.len(), 1);
            assert_eq!(e.decode(&regs), Value::Bool(v == 1.0), "{e:?} {v}");
        } else {
            assert!(
                matches!(got, Err(EncodeError::NotFinite(_) | EncodeError::OutOfRange { .. })),
                "{e:?} {v}: a bool register takes only 0 and 1, got {got:?}"
            );
        }
        return;
    }
    if !v.is_finite() {
        assert!(
            matches!(got, Err(EncodeError::NotFinite(_))),
            "{e:?} {v}: {got:?}"
        );
        return;
    }
    if e.scale == 0.0 {
        assert_eq!(got, Err(EncodeError::ZeroScale), "{e:?} {v}");
        return;
    }
    if e.ty == ValueType::F64 && !((v - e.offset) / e.scale).is_finite() {
        assert!(
            matches!(got, Err(EncodeError::OutOfRange { .. })),
            "{e:?} {v}: an overflow must be refused, got {got:?}"
        );
        return;
    }
    // Out of any plant's reach: with scales or offsets beyond 1e100 (or values beyond 1e300),
    // raw × scale + offset can overflow f64 on the way back although the value it stands for is
    // finite, so decoding cannot give values back whatever encode does. Only "no panic" holds.
    if e.scale.abs() > 1e100 || e.offset.abs() > 1e100 || v.abs() > 1e300 {
        return;
    }
    match got {
        Ok(regs) => {
            assert_eq!(regs.len(), usize::from(e.words()), "{e:?} {v}");
            let Value::Number(back) = e.decode(&regs) else {
                panic!("{e:?} {v}: a number decodes as a bool");
            };
            let tol = tolerance(e, v);
            assert!(
                (back - v).abs() <= tol,
                "{e:?}: {v} was written as {regs:04x?}, which reads {back} (allowed: ±{tol})"
            );
        }
        Err(EncodeError::OutOfRange { .. }) => {}
        Err(err) => panic!("{e:?} {v}: {err}"),
    }
}

/// encode(decode(words)) for the usual scales and offsets.
fn check_identity(e: &Encoding, words: &[u16], usual: bool) {
    if e.bit.is_some() || e.ty == ValueType::Bool {
        return;
    }
    let Value::Number(v) = e.decode(words) else {
        panic!("{e:?} {words:04x?}: a number decodes as a bool");
    };
    let n = usize::from(e.words());
    let raw_words: Vec<u16> = (0..n).map(|i| words.get(i).copied().unwrap_or(0)).collect();
    if !v.is_finite() || !usual {
        return;
    }
    // A scaled float register: (raw × scale + offset − offset) / scale is raw only up to
    // rounding, so the value comes back within the float's precision, not bit for bit.
    if is_float(e.ty) && (e.scale != 1.0 || e.offset != 0.0) {
        check_encode(e, v);
        return;
    }
    // Integers above 2^50 (as raw × scale) have no exact double; they are the 64-bit tests' job.
    if !is_float(e.ty) && ((v - e.offset) / e.scale).abs() >= 2f64.powi(50) {
        return;
    }
    let again = e.encode(Value::Number(v)).unwrap_or_else(|err| {
        panic!("{e:?}: {v}, read from {raw_words:04x?}, does not encode: {err}")
    });
    let back = e.decode(&again);
    assert_eq!(
        back,
        Value::Number(v),
        "{e:?}: {raw_words:04x?} reads {v}, written back as {again:04x?}"
    );
    if !is_float(e.ty) {
        assert_eq!(again, raw_words, "{e:?}: {v}");
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let (ty, flags, bit) = (data[0], data[1], data[2]);
    let scale_in = f64_at(data, 3);
    let offset_in = f64_at(data, 11);
    let value = f64_at(data, 19);
    let words: Vec<u16> = data
        .get(27..)
        .unwrap_or(&[])
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
        .collect();
    let e = Encoding {
        ty: TYPES[usize::from(ty) % TYPES.len()],
        word_order: if flags & 1 != 0 {
            WordOrder::Little
        } else {
            WordOrder::Big
        },
        byte_swap: flags & 2 != 0,
        bit: (flags & 4 != 0).then_some(bit % 16),
        scale: if flags & 8 != 0 {
            scale_in
        } else {
            SCALES[usize::from(data.get(3).copied().unwrap_or(0)) % SCALES.len()]
        },
        offset: if flags & 16 != 0 {
            offset_in
        } else {
            OFFSETS[usize::from(data.get(11).copied().unwrap_or(0)) % OFFSETS.len()]
        },
    };
    // The plant loader refuses scales that are not finite and non-zero, and non-finite offsets;
    // the codec must still not panic on them.
    let loadable = e.scale.is_finite() && e.scale != 0.0 && e.offset.is_finite();
    let usual = flags & 24 == 0;

    let decoded = e.decode(&words);
    let is_bool = matches!(decoded, Value::Bool(_));
    assert_eq!(is_bool, e.bit.is_some() || e.ty == ValueType::Bool, "{e:?}");
    e.decode(&[]);

    if loadable {
        check_encode(&e, value);
        check_identity(&e, &words, usual);
    } else {
        let _ = e.encode(Value::Number(value));
    }
});
