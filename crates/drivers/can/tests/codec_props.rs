//! Properties of the DBC signal codec (`encode`, `decode`, `decode_signal`) over generated
//! signal layouts — Intel and Motorola, signed and unsigned, 1 to 64 bits, anywhere in an 8-byte
//! frame — factors, offsets and values (issue 14, "proptest round trips for every codec").
//!
//! Guarded:
//! - a raw field value encodes to exactly its bits (two's complement in the field's width) and
//!   nothing else, and decodes back to raw × factor + offset;
//! - a physical value comes back within half a factor step: encoding rounds to the nearest raw
//!   value, ties to even (documented on `encode`, as cantools does);
//! - a value is accepted exactly when its rounded raw value fits the field, and then that raw value
//!   is what the frame holds; NaN and ±∞ are refused; the range a refusal names can be encoded;
//! - signals that share a frame do not disturb each other.
//!
//! Why: a CAN command is confirmed by decoding what comes back through the same layout; a value
//! clamped into the field, or a bit written into a neighbour, would confirm the wrong thing.

use std::collections::BTreeMap;

use closedloop_can::{ByteOrder, EncodeError, Message, Mux, Signal, decode, decode_signal, encode};
use proptest::prelude::*;
use proptest::sample::{Index, select};

const FACTORS: [f64; 9] = [1.0, 0.1, 0.01, 0.5, 0.25, 2.0, 10.0, -1.0, 0.05];
const OFFSETS: [f64; 6] = [0.0, -40.0, 250.0, 0.5, -273.15, 1000.0];

/// A signal of `len` bits whose most significant bit sits `p` bits into a `window`-bit span
/// starting at frame bit `base` (network order for Motorola, so both fit the same span).
fn place(len: u8, big: bool, base: u32, window: u32, at: Index) -> (u16, ByteOrder) {
    let p = base + at.index((window - u32::from(len) + 1) as usize) as u32;
    if big {
        // Network position p back to the DBC's sawtooth start bit.
        ((8 * (p / 8) + 7 - p % 8) as u16, ByteOrder::Big)
    } else {
        (p as u16, ByteOrder::Little)
    }
}

fn signal_in(name: &'static str, base: u32, window: u32) -> impl Strategy<Value = Signal> {
    let len = 1..=window.min(64) as u8;
    (len, any::<bool>(), any::<bool>(), any::<Index>()).prop_map(
        move |(length, big, signed, at)| {
            let (start_bit, byte_order) = place(length, big, base, window, at);
            Signal {
                name: name.into(),
                start_bit,
                byte_order,
                signed,
                ..signal_of(length)
            }
        },
    )
}

/// A signal anywhere in an 8-byte frame, with a usual factor and offset.
fn scaled_signal() -> impl Strategy<Value = Signal> {
    (
        signal_in("s", 0, 64),
        select(FACTORS.to_vec()),
        select(OFFSETS.to_vec()),
    )
        .prop_map(|(s, factor, offset)| Signal {
            factor,
            offset,
            ..s
        })
}

fn message(signals: Vec<Signal>) -> Message {
    Message::new("M", 0x123, false, 8, false, signals).expect("a valid layout")
}

fn values(pairs: &[(&Signal, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(s, v)| (s.name.clone(), *v)).collect()
}

/// A raw value the field holds, below 2^40 in magnitude so raw × factor + offset stays exact
/// enough to round back (wider values: the fuzz target and the unit tests).
fn raw_in(s: &Signal, r: u64) -> i64 {
    let bits = u32::from(s.length).min(40);
    let r = (r % (1u64 << bits)) as i64;
    if s.signed {
        r - (1i64 << (bits - 1))
    } else {
        r
    }
}

/// The frame holding `raw` in `s`'s bits, two's complement in the field's width.
fn frame_of(s: &Signal, raw: i64) -> Vec<u8> {
    let mut data = vec![0u8; 8];
    for (k, bit) in s.bits().into_iter().enumerate() {
        if (raw as u64) >> k & 1 == 1 {
            data[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
    data
}

/// The raw values the field holds, `[lo, hi)`, from its width alone.
fn field(s: &Signal) -> (f64, f64) {
    let n = i32::from(s.length);
    if s.signed {
        (-(2f64.powi(n - 1)), 2f64.powi(n - 1))
    } else {
        (0.0, 2f64.powi(n))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn raw_fields_round_trip_bit_for_bit(s in scaled_signal(), r in any::<u64>()) {
        let m = message(vec![s.clone()]);
        let raw = raw_in(&s, r);
        let v = raw as f64 * s.factor + s.offset;
        let data = encode(&m, &values(&[(&s, v)])).expect("a value the field holds");
        prop_assert_eq!(&data, &frame_of(&s, raw), "{:?} raw {}", s, raw);
        prop_assert_eq!(decode(&m, &data), vec![("s", v)]);
    }

    #[test]
    fn physical_values_come_back_within_half_a_step(
        s in scaled_signal(),
        r in any::<u64>(),
        x in -0.5..0.5f64,
    ) {
        let m = message(vec![s.clone()]);
        let (lo, hi) = field(&s);
        let raw = (raw_in(&s, r) as f64 + x).clamp(lo, hi - 1.0);
        let v = raw * s.factor + s.offset;
        let data = encode(&m, &values(&[(&s, v)])).expect("in range");
        let back = decode_signal(&s, &data).expect("8 bytes hold the signal");
        let tol = s.factor.abs() * 0.5 * (1.0 + 1e-9) + (v.abs() + s.offset.abs()) * 1e-15;
        prop_assert!((back - v).abs() <= tol, "{:?}: {} came back as {}", s, v, back);
    }

    /// Near each bound of the field (and far beyond), in steps f64 can tell apart there.
    #[test]
    fn values_are_accepted_exactly_when_they_fit_never_saturated(
        s in signal_in("s", 0, 64),
        upper in any::<bool>(),
        d in prop_oneof![4 => -3.0..3.0f64, 1 => -1e30..1e30f64],
    ) {
        let m = message(vec![s.clone()]);
        let (lo, hi) = field(&s);
        let step = if s.length > 53 { 2f64.powi(i32::from(s.length) - 52) } else { 1.0 };
        let bound = if upper { hi - step } else { lo };
        let v = bound + d * step;
        let raw = v.round_ties_even();
        match encode(&m, &values(&[(&s, v)])) {
            Ok(data) => {
                prop_assert!(raw >= lo && raw < hi, "{:?} accepted {}", s, v);
                prop_assert_eq!(decode_signal(&s, &data), Some(raw));
            }
            Err(e) => {
                prop_assert!(!(raw >= lo && raw < hi), "{:?} refused {}: {}", s, v, e);
                prop_assert!(matches!(e, EncodeError::OutOfRange { .. }), "{}", e);
            }
        }
    }

    #[test]
    fn not_a_number_and_infinities_are_refused(s in scaled_signal()) {
        let m = message(vec![s.clone()]);
        let nan = encode(&m, &values(&[(&s, f64::NAN)]));
        prop_assert!(matches!(nan, Err(EncodeError::NotANumber { .. })), "{:?}", nan);
        for inf in [f64::INFINITY, f64::NEG_INFINITY] {
            let got = encode(&m, &values(&[(&s, inf)]));
            prop_assert!(matches!(got, Err(EncodeError::OutOfRange { .. })), "{:?}", got);
        }
    }

    /// A refusal names `physical_range()` as what the field can hold: both ends must encode.
    #[test]
    fn the_range_a_refusal_names_can_be_encoded(
        s in prop_oneof![
            signal_in("s", 0, 64),
            // Scaled, the ends of a wider field are not exact in f64.
            scaled_signal().prop_filter("at most 40 bits", |s| s.length <= 40),
        ],
    ) {
        let m = message(vec![s.clone()]);
        let (min, max) = s.physical_range();
        for v in [min, max] {
            let got = encode(&m, &values(&[(&s, v)]));
            prop_assert!(got.is_ok(), "{:?}: {} is in ({}, {}) but {:?}", s, v, min, max, got);
        }
    }

    /// One signal in the first four bytes, one in the last four, any order and sign: each
    /// decodes to its own value.
    #[test]
    fn signals_in_one_frame_do_not_disturb_each_other(
        a in signal_in("a", 0, 32),
        b in signal_in("b", 32, 32),
        ra in any::<u64>(),
        rb in any::<u64>(),
    ) {
        let m = message(vec![a.clone(), b.clone()]);
        let (va, vb) = (raw_in(&a, ra) as f64, raw_in(&b, rb) as f64);
        let data = encode(&m, &values(&[(&a, va), (&b, vb)])).expect("both fit");
        prop_assert_eq!(decode(&m, &data), vec![("a", va), ("b", vb)]);
    }
}

/// The bug the range property found: for fields of 53 bits or more `physical_range()` gave the
/// exclusive bound 2^n as the largest value, so encoding 2^53 into a 53-bit field was refused
/// as "outside what the field can hold (0 to 9007199254740992)" — naming the very value.
#[test]
fn wide_fields_name_a_largest_value_they_can_encode() {
    for (length, signed, max) in [
        (53, false, 2f64.powi(53) - 1.0),
        (54, true, 2f64.powi(53) - 1.0),
        (64, false, 2f64.powi(64) - 2048.0),
        (64, true, 2f64.powi(63) - 1024.0),
    ] {
        let s = Signal {
            signed,
            ..signal_of(length)
        };
        assert_eq!(s.physical_range().1, max, "{length} bits, signed {signed}");
        let m = message(vec![s.clone()]);
        assert!(encode(&m, &values(&[(&s, max)])).is_ok(), "{max}");
        let beyond = encode(&m, &values(&[(&s, max.next_up())]));
        assert!(
            matches!(beyond, Err(EncodeError::OutOfRange { max: m, .. }) if m == max),
            "{beyond:?}"
        );
    }
}

/// An unsigned, unscaled Intel signal `s` of `length` bits from bit 0.
fn signal_of(length: u8) -> Signal {
    Signal {
        name: "s".into(),
        start_bit: 0,
        length,
        byte_order: ByteOrder::Little,
        signed: false,
        factor: 1.0,
        offset: 0.0,
        min: 0.0,
        max: 0.0,
        unit: String::new(),
        mux: Mux::Plain,
        not_available: Vec::new(),
    }
}
