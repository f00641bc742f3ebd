//! Properties of the MQTT payload codec (`decode`) and message expiry (`expiry_secs`) over
//! generated values (issue 14, "proptest round trips for every codec").
//!
//! The codec has no encode side — payloads go out as the engine rendered them — so the round
//! trip guarded here is the device's: a number a device publishes, as plain text or JSON the way
//! Rust, serde_json or Python write doubles, decodes to exactly that number; a number no double
//! holds (1e400, NaN, inf) is no value, never saturated to ±f64::MAX. Booleans come back as
//! themselves. An expiry is rounded up to whole seconds, so a message never expires before its
//! deadline.
//!
//! Why: a value read from a payload is what confirms an MQTT action; one that comes back an
//! ulp off, or clamped, would confirm a value the device never reported.

use std::time::Duration;

use closedloop_contract::{Value, ValueType};
use closedloop_mqtt::{Words, decode, expiry_secs};
use proptest::prelude::*;

fn finite() -> impl Strategy<Value = f64> {
    prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn numbers_decode_exactly_as_text_and_json(v in finite(), pad in "[ \t\r\n]{0,3}") {
        let want = Some(Value::Number(v));
        let number = |payload: &str, json| decode(payload.as_bytes(), json, Words::PLAIN, ValueType::F64).ok();
        let doc = format!(r#"{{"v": {}}}"#, serde_json::to_string(&v).expect("finite"));
        prop_assert_eq!(number(&doc, Some("/v")), want, "{}", doc);
        for text in [format!("{v}"), format!("{v:e}"), format!("{v:?}")] {
            let payload = format!("{pad}{text}{pad}");
            prop_assert_eq!(number(&payload, None), want, "{}", payload);
            let quoted = format!(r#"{{"v": "{text}"}}"#);
            prop_assert_eq!(number(&quoted, Some("/v")), want, "{}", quoted);
        }
    }

    /// Beyond f64 (an exponent past 308) or not a number at all: no value, not ±f64::MAX.
    #[test]
    fn numbers_no_double_holds_are_no_value(
        mantissa in 1u32..=9,
        exponent in 309u32..=400,
        negative in any::<bool>(),
        word in prop::sample::select(vec!["NaN", "inf", "-inf", "infinity", "-Infinity"]),
    ) {
        let sign = if negative { "-" } else { "" };
        let big = format!("{sign}{mantissa}e{exponent}");
        prop_assert_eq!(decode(big.as_bytes(), None, Words::PLAIN, ValueType::F64).ok(), None);
        let doc = format!(r#"{{"v": {big}}}"#);
        prop_assert_eq!(decode(doc.as_bytes(), Some("/v"), Words::PLAIN, ValueType::F64).ok(), None);
        prop_assert_eq!(decode(word.as_bytes(), None, Words::PLAIN, ValueType::F64).ok(), None);
        prop_assert_eq!(decode(word.as_bytes(), None, Words::PLAIN, ValueType::Bool).ok(), None);
    }

    #[test]
    fn bools_decode_as_themselves(b in any::<bool>(), v in finite()) {
        let want = Some(Value::Bool(b));
        prop_assert_eq!(decode(b.to_string().as_bytes(), None, Words::PLAIN, ValueType::Bool).ok(), want);
        let doc = format!(r#"{{"on": {b}}}"#);
        prop_assert_eq!(decode(doc.as_bytes(), Some("/on"), Words::PLAIN, ValueType::Bool).ok(), want);
        let (on, off) = (["ON".to_string()], ["OFF".to_string()]);
        let words = Words { on: &on, off: &off };
        let word = if b { "ON" } else { "OFF" };
        prop_assert_eq!(decode(word.as_bytes(), None, words, ValueType::Bool).ok(), want);
        // A number as a bool: non-zero is true (docs/plant-file.md).
        let n = decode(format!("{v}").as_bytes(), None, Words::PLAIN, ValueType::Bool).ok();
        prop_assert_eq!(n, Some(Value::Bool(v != 0.0)));
    }

    #[test]
    fn expiry_rounds_up_to_whole_seconds(
        secs in 0u64..u64::from(u32::MAX),
        nanos in 0u32..1_000_000_000,
    ) {
        let d = Duration::new(secs, nanos);
        match expiry_secs(d) {
            None => prop_assert!(d.is_zero()),
            Some(s) => {
                prop_assert!(Duration::from_secs(u64::from(s)) >= d, "{d:?} became {s} s");
                prop_assert!(Duration::from_secs(u64::from(s)) < d + Duration::from_secs(1));
            }
        }
    }
}
