//! DBC files (`closedloop_can::Dbc`) and the signals of the frames they describe
//! (`closedloop_can::{decode, decode_signal, encode}`).
//!
//! Input: `n, frame (n % 65 bytes), dbc text...`. Text that is UTF-8 (without a BOM) goes through
//! `Dbc::parse`; anything else through `Dbc::load` from a file, which strips a UTF-8 BOM and reads
//! non-UTF-8 as Windows-1252.
//!
//! Properties, for every message closedloop accepts:
//! - no panic while loading, decoding or encoding;
//! - every signal's bits (`Signal::bits`, the whole layout) lie inside the message;
//! - `decode_signal` is raw × factor + offset, with the raw value read here independently from
//!   those bits (sign-extended for signed signals), and `None` exactly when the frame is too short;
//! - `decode` returns the plain signals, the switch, and the multiplexed signals its value selects;
//! - round trip: when the frame is long enough, the switch selects a defined group (or none is
//!   defined) and each value's raw number comes back exactly from (value − offset) / factor,
//!   `encode(decode(frame))` succeeds and equals the frame with every bit outside those signals
//!   cleared.

#![no_main]

use std::collections::BTreeMap;

use closedloop_can::{Dbc, Message, Mux, Signal, decode, decode_signal, encode};
use libfuzzer_sys::fuzz_target;

/// The raw field value, read bit by bit from `Signal::bits`.
fn raw(s: &Signal, data: &[u8]) -> Option<i128> {
    let mut v: u64 = 0;
    for (k, bit) in s.bits().into_iter().enumerate() {
        let byte = *data.get(usize::try_from(bit / 8).ok()?)?;
        if byte >> (bit % 8) & 1 == 1 {
            v |= 1u64 << k;
        }
    }
    let n = u32::from(s.length);
    Some(if s.signed && n < 64 && v >> (n - 1) & 1 == 1 {
        i128::from(v) - (1i128 << n)
    } else if s.signed {
        i128::from(v as i64)
    } else {
        i128::from(v)
    })
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// Every property above, for one accepted message and one frame.
fn check(m: &Message, frame: &[u8]) {
    layout(m, frame);
    let selected = m.switch().and_then(|s| raw(s, frame));
    let decoded = decode(m, frame);
    let want: Vec<&Signal> = m
        .signals()
        .iter()
        .filter(|s| match s.mux {
            Mux::Plain | Mux::Switch => true,
            Mux::When(v) => selected == Some(i128::from(v)),
        })
        .filter(|s| raw(s, frame).is_some())
        .collect();
    let names: Vec<&str> = decoded.iter().map(|(n, _)| *n).collect();
    let want_names: Vec<&str> = want.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, want_names, "{}", m.name());

    // The round trip, where it is exact.
    if frame.len() < m.size() {
        return;
    }
    round_trip(m, frame, selected, &decoded, &want);
}

/// Each signal's bits lie inside the message, and `decode_signal` reads what `raw` reads.
fn layout(m: &Message, frame: &[u8]) {
    assert!(m.size() <= closedloop_can::dbc::MAX_SIZE);
    for s in m.signals() {
        assert!((1..=64).contains(&s.length), "{s:?}");
        for b in s.bits() {
            assert!(
                b < 8 * m.size() as u32,
                "{}: {s:?} bit {b} outside",
                m.name()
            );
        }
        let expected = raw(s, frame).map(|r| r as f64 * s.factor + s.offset);
        match (decode_signal(s, frame), expected) {
            (Some(a), Some(b)) => assert!(same(a, b), "{}: {s:?}: {a} != {b}", m.name()),
            (a, b) => assert_eq!(a.is_some(), b.is_some(), "{}: {s:?}", m.name()),
        }
    }
}

/// `encode(decode(frame))` on a frame long enough for `m`: refused for an undefined switch
/// value, else (when every value's raw number is exact) the frame with the other bits cleared.
fn round_trip(
    m: &Message,
    frame: &[u8],
    selected: Option<i128>,
    decoded: &[(&str, f64)],
    want: &[&Signal],
) {
    let defined: Vec<u64> = m
        .signals()
        .iter()
        .filter_map(|s| match s.mux {
            Mux::When(v) => Some(v),
            _ => None,
        })
        .collect();
    if let Some(sel) = selected
        && !defined.is_empty()
        && !defined.iter().any(|&d| i128::from(d) == sel)
    {
        let values: BTreeMap<String, f64> =
            decoded.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        assert!(
            encode(m, &values).is_err(),
            "{}: an undefined switch value was encoded",
            m.name()
        );
        return;
    }
    for s in want {
        let r = raw(s, frame).expect("checked above");
        let v = r as f64 * s.factor + s.offset;
        let exact = r.unsigned_abs() < 1 << 53
            && v.is_finite()
            && ((v - s.offset) / s.factor).round_ties_even() == r as f64;
        if !exact {
            return;
        }
    }
    let values: BTreeMap<String, f64> = decoded.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    let encoded = encode(m, &values).unwrap_or_else(|e| {
        panic!(
            "{}: {values:?} from {frame:02x?} does not encode: {e}",
            m.name()
        )
    });
    let mut masked = vec![0u8; m.size()];
    for s in want {
        for b in s.bits() {
            masked[(b / 8) as usize] |= frame[(b / 8) as usize] & (1 << (b % 8));
        }
    }
    assert_eq!(encoded, masked, "{}: {values:?}", m.name());
    assert_eq!(decode(m, &encoded), decoded, "{}", m.name());
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 65).min(rest.len());
    let (frame, text) = rest.split_at(n);
    let dbc = match std::str::from_utf8(text) {
        Ok(t) if !t.starts_with('\u{feff}') => Dbc::parse("fuzz.dbc", t),
        _ => {
            let path =
                std::env::temp_dir().join(format!("closedloop-fuzz-{}.dbc", std::process::id()));
            std::fs::write(&path, text).expect("a temporary DBC file");
            let dbc = Dbc::load(&path);
            let _ = std::fs::remove_file(&path);
            dbc
        }
    };
    let Ok(dbc) = dbc else {
        return;
    };
    for m in dbc.messages() {
        assert!(std::ptr::eq(
            dbc.message(m.name()).expect("an accepted message"),
            m
        ));
        check(m, frame);
    }
    for (name, e) in dbc.refused() {
        assert!(
            dbc.message(name).is_err(),
            "{name} is both accepted and refused: {e}"
        );
    }
});
