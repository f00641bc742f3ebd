//! The register codec against hand-computed words: every type, word order, byte swap, bit, scale and offset, and every refusal.

use super::*;

fn enc(ty: ValueType) -> Encoding {
    Encoding {
        ty,
        ..Encoding::default()
    }
}

#[test]
fn i32_is_high_word_first_by_default() {
    let e = enc(ValueType::I32);
    assert_eq!(
        e.encode(Value::Number(15000.0)).unwrap(),
        vec![0x0000, 0x3A98]
    );
    assert_eq!(e.encode(Value::Number(-2.0)).unwrap(), vec![0xFFFF, 0xFFFE]);
    assert_eq!(e.decode(&[0xFFFF, 0xFFFE]), Value::Number(-2.0));
}

#[test]
fn little_word_order_puts_low_word_first() {
    let e = Encoding {
        word_order: WordOrder::Little,
        ..enc(ValueType::U32)
    };
    assert_eq!(
        e.encode(Value::Number(65536.0 + 2.0)).unwrap(),
        vec![0x0002, 0x0001]
    );
    assert_eq!(e.decode(&[0x0002, 0x0001]), Value::Number(65538.0));
}

#[test]
fn byte_swap_swaps_inside_each_register() {
    let e = Encoding {
        byte_swap: true,
        ..enc(ValueType::U16)
    };
    assert_eq!(
        e.encode(Value::Number(0x1234 as f64)).unwrap(),
        vec![0x3412]
    );
    assert_eq!(e.decode(&[0x3412]), Value::Number(0x1234 as f64));
}

#[test]
fn scale_and_offset_apply_both_ways_with_rounding() {
    let e = Encoding {
        scale: 0.1,
        offset: 0.0,
        ..enc(ValueType::I16)
    };
    assert_eq!(e.decode(&[420]), Value::Number(42.0));
    // 42.04 / 0.1 = 420.4 -> 420
    assert_eq!(e.encode(Value::Number(42.04)).unwrap(), vec![420]);
    let e = Encoding {
        scale: 1.0,
        offset: -40.0,
        ..enc(ValueType::U16)
    };
    assert_eq!(e.decode(&[65]), Value::Number(25.0));
    assert_eq!(e.encode(Value::Number(25.0)).unwrap(), vec![65]);
}

#[test]
fn scaled_values_carry_no_float_noise() {
    let e = Encoding {
        scale: 0.1,
        ..enc(ValueType::I16)
    };
    assert_eq!(e.decode(&[252]), Value::Number(25.2));
    let e = Encoding {
        scale: 0.01,
        ..enc(ValueType::I32)
    };
    assert_eq!(e.decode(&[0, 6985]), Value::Number(69.85));
    let e = Encoding {
        scale: 0.25,
        ..enc(ValueType::U16)
    };
    assert_eq!(e.decode(&[3]), Value::Number(0.75));
}

#[test]
fn out_of_range_is_refused_never_saturated() {
    let e = enc(ValueType::U16);
    assert!(matches!(
        e.encode(Value::Number(65536.0)),
        Err(EncodeError::OutOfRange { .. })
    ));
    assert!(matches!(
        e.encode(Value::Number(-1.0)),
        Err(EncodeError::OutOfRange { .. })
    ));
    assert!(matches!(
        e.encode(Value::Number(f64::NAN)),
        Err(EncodeError::NotFinite(_))
    ));
    let e = enc(ValueType::I16);
    assert!(e.encode(Value::Number(32767.0)).is_ok());
    assert!(e.encode(Value::Number(32768.0)).is_err());
    // 65535.4 rounds to 65535: representable.
    assert_eq!(
        enc(ValueType::U16).encode(Value::Number(65535.4)).unwrap(),
        vec![65535]
    );
}

#[test]
fn floats_round_trip() {
    let e = enc(ValueType::F32);
    let w = e.encode(Value::Number(1.5)).unwrap();
    assert_eq!(w, vec![0x3FC0, 0x0000]);
    assert_eq!(e.decode(&w), Value::Number(1.5));
    let e = enc(ValueType::F64);
    let w = e.encode(Value::Number(-0.25)).unwrap();
    assert_eq!(w.len(), 4);
    assert_eq!(e.decode(&w), Value::Number(-0.25));
    assert!(enc(ValueType::F32).encode(Value::Number(1e300)).is_err());
}

#[test]
fn sixty_four_bit_integers() {
    let e = enc(ValueType::I64);
    let w = e.encode(Value::Number(-1.0)).unwrap();
    assert_eq!(w, vec![0xFFFF; 4]);
    assert_eq!(e.decode(&w), Value::Number(-1.0));
    let e = enc(ValueType::U64);
    assert_eq!(e.encode(Value::Number(65536.0)).unwrap(), vec![0, 0, 1, 0]);
    assert!(e.encode(Value::Number(1.9e19)).is_err());
}

#[test]
fn bit_extracts_one_bit_and_cannot_be_written() {
    let e = Encoding {
        bit: Some(3),
        ..enc(ValueType::U16)
    };
    assert_eq!(e.decode(&[0b1000]), Value::Bool(true));
    assert_eq!(e.decode(&[0b0111]), Value::Bool(false));
    assert_eq!(e.encode(Value::Bool(true)), Err(EncodeError::BitWrite));
}
