//! Tests of decoding and encoding, byte by byte against layouts cantools agrees with.

use super::*;
use crate::dbc::ByteOrder::{Big, Little};
use crate::dbc::model::tests::sig;

fn values(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn msg(signals: Vec<Signal>) -> Message {
    Message::new("M", 0x100, false, 8, false, signals).unwrap()
}

#[test]
fn little_endian_fields_cross_bytes_upwards() {
    let m = msg(vec![sig("a", 4, 12, Little, false)]);
    // a = 0xABC: low nibble in the top of byte 0, then byte 1 = 0xAB.
    let data = [0xC0, 0xAB, 0, 0, 0, 0, 0, 0];
    assert_eq!(decode(&m, &data), [("a", 2748.0)]);
    assert_eq!(encode(&m, &values(&[("a", 2748.0)])).unwrap(), data);
}

#[test]
fn big_endian_fields_follow_dbc_start_bits() {
    // 7|16@0+: a big-endian u16 in bytes 0–1.
    let m = msg(vec![sig("a", 7, 16, Big, false)]);
    let data = [0x12, 0x34, 0, 0, 0, 0, 0, 0];
    assert_eq!(decode(&m, &data), [("a", 4660.0)]);
    assert_eq!(encode(&m, &values(&[("a", 4660.0)])).unwrap(), data);
    // 0|12@0-: MSB is bit 0 of byte 0, then byte 1, then the top nibble of byte 2 (cantools'
    // motohawk Temperature). 0x9A5 is negative in 12 bits: 0x9A5 − 0x1000 = −1627.
    let m = msg(vec![sig("t", 0, 12, Big, true)]);
    let data = [0x01, 0x34, 0xA0, 0, 0, 0, 0, 0];
    assert_eq!(decode(&m, &data), [("t", -1627.0)]);
    assert_eq!(encode(&m, &values(&[("t", -1627.0)])).unwrap(), data);
}

#[test]
fn signed_fields_sign_extend() {
    let m = msg(vec![
        sig("a", 0, 8, Little, true),
        sig("b", 8, 64 - 8, Little, true),
    ]);
    let data = [0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
    assert_eq!(decode(&m, &data), [("a", -1.0), ("b", -2.0)]);
    assert_eq!(
        encode(&m, &values(&[("a", -1.0), ("b", -2.0)])).unwrap(),
        data
    );
    let m = msg(vec![sig("w", 0, 64, Little, true)]);
    assert_eq!(
        decode(&m, &[0, 0, 0, 0, 0, 0, 0, 0x80]),
        [("w", i64::MIN as f64)]
    );
    let m = msg(vec![sig("u", 0, 64, Little, false)]);
    assert_eq!(decode(&m, &[0xFF; 8]), [("u", u64::MAX as f64)]);
}

#[test]
fn scale_and_offset_apply_both_ways() {
    let mut s = sig("t", 0, 12, Big, true);
    s.factor = 0.01;
    s.offset = 250.0;
    let m = msg(vec![s]);
    let data = encode(&m, &values(&[("t", 244.52)])).unwrap();
    // raw = (244.52 − 250) / 0.01 = −548 → 0xDDC in 12 bits: MSB in byte 0, bits 10–3 are
    // byte 1, bits 2–0 the top of byte 2.
    assert_eq!(data[..3], [0x01, 0xBB, 0x80]);
    let decoded = decode(&m, &data)[0].1;
    assert!((decoded - 244.52).abs() < 1e-9, "{decoded}");
    assert_eq!(decoded, -548.0 * 0.01 + 250.0);
}

#[test]
fn rounding_is_to_nearest_ties_to_even() {
    let mut s = sig("a", 0, 8, Little, false);
    s.factor = 0.5;
    let m = msg(vec![s]);
    // 1.25 / 0.5 = 2.5 → 2; 1.75 / 0.5 = 3.5 → 4; 1.3 / 0.5 = 2.6 → 3.
    for (v, raw) in [(1.25, 2u8), (1.75, 4), (1.3, 3)] {
        assert_eq!(encode(&m, &values(&[("a", v)])).unwrap()[0], raw, "{v}");
    }
}

#[test]
fn values_the_field_cannot_hold_are_refused_never_saturated() {
    let mut s = sig("a", 0, 8, Little, true);
    s.factor = 0.5;
    let m = msg(vec![s]);
    assert_eq!(encode(&m, &values(&[("a", 63.5)])).unwrap()[0], 127);
    assert_eq!(encode(&m, &values(&[("a", -64.0)])).unwrap()[0], 0x80);
    let e = encode(&m, &values(&[("a", 64.0)])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "message M, signal a: 64 is outside what the field can hold (-64 to 63.5)"
    );
    // −64.25 / 0.5 = −128.5 rounds (to even) to −128: still fits.
    assert!(encode(&m, &values(&[("a", -64.25)])).is_ok());
    assert!(encode(&m, &values(&[("a", -64.3)])).is_err());
    assert!(matches!(
        encode(&m, &values(&[("a", f64::INFINITY)])),
        Err(EncodeError::OutOfRange { .. })
    ));
    assert_eq!(
        encode(&m, &values(&[("a", f64::NAN)]))
            .unwrap_err()
            .to_string(),
        "message M, signal a: NaN cannot be encoded"
    );
    let u = msg(vec![sig("u", 0, 4, Little, false)]);
    assert!(encode(&u, &values(&[("u", -1.0)])).is_err());
    assert!(encode(&u, &values(&[("u", 16.0)])).is_err());
    assert!(encode(&u, &values(&[("u", 15.4)])).is_ok());
    let w = msg(vec![sig("w", 0, 64, Little, false)]);
    assert!(encode(&w, &values(&[("w", 2f64.powi(64))])).is_err());
    assert_eq!(
        encode(&w, &values(&[("w", 2f64.powi(63))])).unwrap()[7],
        0x80
    );
}

#[test]
fn missing_and_unknown_signals_are_errors() {
    let m = msg(vec![
        sig("a", 0, 8, Little, false),
        sig("b", 8, 8, Little, false),
    ]);
    assert_eq!(
        encode(&m, &values(&[("a", 1.0)])).unwrap_err().to_string(),
        "message M: no value for signal b"
    );
    assert_eq!(
        encode(&m, &values(&[("a", 1.0), ("b", 1.0), ("c", 1.0)]))
            .unwrap_err()
            .to_string(),
        "message M has no signal c"
    );
}

fn muxed() -> Message {
    let mut sw = sig("sw", 0, 8, Little, false);
    sw.mux = Mux::Switch;
    let mut a = sig("a", 8, 16, Little, false);
    a.mux = Mux::When(1);
    let mut b = sig("b", 8, 8, Little, true);
    b.mux = Mux::When(2);
    msg(vec![sw, sig("p", 56, 8, Little, false), a, b])
}

#[test]
fn multiplexed_signals_appear_only_when_selected() {
    let m = muxed();
    let d1 = [1, 0x34, 0x12, 0, 0, 0, 0, 7];
    assert_eq!(decode(&m, &d1), [("sw", 1.0), ("p", 7.0), ("a", 4660.0)]);
    let d2 = [2, 0xFF, 0x12, 0, 0, 0, 0, 7];
    assert_eq!(decode(&m, &d2), [("sw", 2.0), ("p", 7.0), ("b", -1.0)]);
    let d9 = [9, 0xFF, 0x12, 0, 0, 0, 0, 7];
    assert_eq!(decode(&m, &d9), [("sw", 9.0), ("p", 7.0)]);
}

#[test]
fn multiplexed_encoding_takes_exactly_the_selected_signals() {
    let m = muxed();
    let data = encode(&m, &values(&[("sw", 2.0), ("p", 7.0), ("b", -1.0)])).unwrap();
    assert_eq!(data, [2, 0xFF, 0, 0, 0, 0, 0, 7]);
    let e = encode(
        &m,
        &values(&[("sw", 2.0), ("p", 7.0), ("b", -1.0), ("a", 5.0)]),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "message M: signal a is sent only when sw = 1, but sw = 2"
    );
    let e = encode(&m, &values(&[("sw", 1.0), ("p", 7.0)]));
    assert_eq!(
        e.unwrap_err().to_string(),
        "message M: no value for signal a"
    );
    let e = encode(&m, &values(&[("sw", 3.0), ("p", 7.0)]));
    assert_eq!(
        e.unwrap_err().to_string(),
        "message M: sw = 3 selects no multiplexed signals (the file defines 1, 2)"
    );
    let e = encode(&m, &values(&[("p", 7.0)]));
    assert_eq!(
        e.unwrap_err().to_string(),
        "message M: no value for signal sw"
    );
}

#[test]
fn a_switch_without_multiplexed_signals_takes_any_value() {
    let mut sw = sig("sw", 0, 8, Little, false);
    sw.mux = Mux::Switch;
    let m = msg(vec![sw, sig("p", 8, 8, Little, false)]);
    let data = encode(&m, &values(&[("sw", 7.0), ("p", 1.0)])).unwrap();
    assert_eq!(data[..2], [7, 1]);
    assert_eq!(decode(&m, &data), [("sw", 7.0), ("p", 1.0)]);
}

#[test]
fn short_frames_decode_only_the_signals_they_hold() {
    let m = msg(vec![
        sig("a", 0, 8, Little, false),
        sig("b", 8, 8, Little, false),
    ]);
    assert_eq!(decode(&m, &[5]), [("a", 5.0)]);
    assert_eq!(
        decode(&m, &[5, 6, 7, 8, 9, 10, 11, 12, 13]),
        [("a", 5.0), ("b", 6.0)]
    );
}

#[test]
fn every_bit_pattern_round_trips() {
    // Each signal shape against a walking pattern: decode ∘ encode is the identity on raw.
    let shapes = [
        sig("x", 3, 13, Little, false),
        sig("x", 3, 13, Big, true),
        sig("x", 7, 64, Big, false),
        sig("x", 0, 64, Little, true),
        sig("x", 37, 1, Big, false),
    ];
    for s in shapes {
        let m = msg(vec![s.clone()]);
        for seed in 0u64..64 {
            let data: Vec<u8> = (0..8u64)
                .map(|i| (seed.wrapping_mul(0x9E37_79B9).rotate_left(i as u32 * 8) >> 3) as u8)
                .collect();
            let Some(v) = decode_signal(&s, &data) else {
                panic!("{s:?}")
            };
            if v.abs() >= 2f64.powi(53) {
                continue; // not exact in f64; covered by the 64-bit tests above
            }
            let back = encode(&m, &values(&[("x", v)])).unwrap();
            assert_eq!(decode_signal(&s, &back), Some(v), "{s:?} {data:02x?}");
            let mask: Vec<u8> = {
                let mut mk = vec![0u8; 8];
                for b in s.bits() {
                    mk[(b / 8) as usize] |= 1 << (b % 8);
                }
                mk
            };
            let masked: Vec<u8> = data.iter().zip(&mask).map(|(d, m)| d & m).collect();
            assert_eq!(back, masked, "{s:?}");
        }
    }
}
