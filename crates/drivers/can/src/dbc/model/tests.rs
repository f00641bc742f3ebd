//! Tests of the message model: bit layouts, and what `Message::new` refuses. `sig` is shared
//! with the codec tests.

use super::*;

/// A signal with the given layout, factor 1, offset 0, plain.
pub(crate) fn sig(name: &str, start: u16, len: u8, order: ByteOrder, signed: bool) -> Signal {
    Signal {
        name: name.into(),
        start_bit: start,
        length: len,
        byte_order: order,
        signed,
        factor: 1.0,
        offset: 0.0,
        min: 0.0,
        max: 0.0,
        unit: String::new(),
        mux: Mux::Plain,
        not_available: Vec::new(),
    }
}

#[test]
fn little_endian_bits_ascend_from_the_start_bit() {
    let s = sig("a", 6, 4, ByteOrder::Little, false);
    assert_eq!(s.bits(), [6, 7, 8, 9]);
}

#[test]
fn big_endian_bits_follow_the_sawtooth() {
    // 7|16@0: byte 0 is the high byte, byte 1 the low byte.
    let s = sig("a", 7, 16, ByteOrder::Big, false);
    let bits = s.bits();
    assert_eq!(bits[..8], [8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(bits[8..], [0, 1, 2, 3, 4, 5, 6, 7]);
    // 0|12@0 (cantools' motohawk "Temperature" shape): MSB is bit 0 of byte 0, then all of
    // byte 1, then the top three bits of byte 2.
    let s = sig("t", 0, 12, ByteOrder::Big, true);
    assert_eq!(s.bits(), [21, 22, 23, 8, 9, 10, 11, 12, 13, 14, 15, 0]);
}

#[test]
fn a_bit_outside_the_frame_is_refused() {
    let e = Message::new(
        "m",
        1,
        false,
        2,
        false,
        vec![sig("a", 12, 8, ByteOrder::Little, false)],
    )
    .unwrap_err();
    assert_eq!(e.signal.as_deref(), Some("a"));
    assert!(
        e.reason.contains("outside the 2-byte message"),
        "{}",
        e.reason
    );
    // Big endian running off the end: 15|16@0 in 2 bytes needs byte 2.
    assert!(
        Message::new(
            "m",
            1,
            false,
            2,
            false,
            vec![sig("b", 15, 16, ByteOrder::Big, false)]
        )
        .is_err()
    );
    assert!(
        Message::new(
            "m",
            1,
            false,
            2,
            false,
            vec![sig("b", 7, 16, ByteOrder::Big, false)]
        )
        .is_ok()
    );
}

#[test]
fn ids_must_fit_their_format() {
    assert!(Message::new("m", 0x800, false, 8, false, vec![]).is_err());
    assert!(Message::new("m", 0x7FF, false, 8, false, vec![]).is_ok());
    assert!(Message::new("m", 0x2000_0000, true, 8, false, vec![]).is_err());
    assert!(Message::new("m", 0x1FFF_FFFF, true, 8, false, vec![]).is_ok());
}

#[test]
fn overlaps_are_refused_only_within_one_frame_shape() {
    let mut a = sig("a", 8, 8, ByteOrder::Little, false);
    let mut b = sig("b", 12, 8, ByteOrder::Little, false);
    let e = Message::new("m", 1, false, 8, false, vec![a.clone(), b.clone()]).unwrap_err();
    assert_eq!(e.reason, "shares bit 12 with signal a");
    let mut m = sig("m", 0, 8, ByteOrder::Little, false);
    m.mux = Mux::Switch;
    a.mux = Mux::When(1);
    b.mux = Mux::When(2);
    assert!(
        Message::new(
            "m",
            1,
            false,
            8,
            false,
            vec![m.clone(), a.clone(), b.clone()]
        )
        .is_ok()
    );
    b.mux = Mux::When(1);
    assert!(Message::new("m", 1, false, 8, false, vec![m, a, b]).is_err());
}

#[test]
fn multiplexing_needs_exactly_one_unscaled_switch() {
    let mut a = sig("a", 8, 8, ByteOrder::Little, false);
    a.mux = Mux::When(1);
    let e = Message::new("m", 1, false, 8, false, vec![a.clone()]).unwrap_err();
    assert!(e.reason.contains("no multiplexer switch"), "{}", e.reason);
    let mut m = sig("m", 0, 4, ByteOrder::Little, false);
    m.mux = Mux::Switch;
    let mut m2 = sig("m2", 4, 4, ByteOrder::Little, false);
    m2.mux = Mux::Switch;
    assert!(Message::new("m", 1, false, 8, false, vec![m.clone(), m2, a.clone()]).is_err());
    m.factor = 2.0;
    let e = Message::new("m", 1, false, 8, false, vec![m, a]).unwrap_err();
    assert!(e.reason.contains("scaled multiplexer"), "{}", e.reason);
}

#[test]
fn physical_range_follows_sign_and_scale() {
    let mut s = sig("a", 0, 8, ByteOrder::Little, true);
    assert_eq!(s.physical_range(), (-128.0, 127.0));
    s.factor = -0.5;
    s.offset = 10.0;
    assert_eq!(s.physical_range(), (10.0 - 63.5, 74.0));
}
