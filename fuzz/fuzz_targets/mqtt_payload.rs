//! MQTT payloads as closedloop turns them into signal values (`closedloop_mqtt::decode`, with and
//! without a JSON pointer), and topic filters (`closedloop_mqtt::topic_matches`).
//!
//! Input: `flags, pointer, 0x00, true values (comma-separated), 0x00, false values, 0x00,
//! payload...`; `flags & 15` picks the signal's type (mod 9), `flags & 16` decodes with the JSON
//! pointer, else as text.
//!
//! Properties: no panic; a value is a bool exactly for `type = "bool"`, and a number is always
//! finite (NaN or infinity must never reach the cache); with words named, a text bool is true
//! only for a true word and false only for a false word (anything else is no value, never a
//! default); an empty payload is no value; the text decoder ignores surrounding
//! whitespace; a finite number written as text decodes to itself exactly, and inside a JSON
//! document (through a pointer) to itself within 3 units in the last place (see the known issue
//! below); a filter without wildcards
//! matches itself, `#` matches every topic that does not start with `$`. The time a payload says
//! its value was taken (`closedloop_mqtt::payload_time`, `time_json`): no panic, a time is after
//! 1970, and a Unix time in milliseconds written into a document reads back as itself.

#![no_main]

use closedloop_contract::{Value, ValueType};
use closedloop_mqtt::{Words, decode, payload_time, topic_matches};
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

fn well_typed(v: Result<Value, String>, ty: ValueType, what: &str) {
    match v {
        Err(why) => assert!(!why.is_empty(), "{what}: no value without a reason"),
        Ok(Value::Bool(_)) => assert_eq!(ty, ValueType::Bool, "{what}"),
        Ok(Value::Number(n)) => {
            assert_ne!(ty, ValueType::Bool, "{what}");
            assert!(n.is_finite(), "{what}: {n}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let ty = TYPES[usize::from(flags & 15) % TYPES.len()];
    let json = flags & 16 != 0;
    let mut parts = rest.splitn(4, |&b| b == 0);
    let pointer = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    let list = |t: Option<&[u8]>| -> Vec<String> {
        match t {
            Some(t) if !t.is_empty() => String::from_utf8_lossy(t)
                .split(',')
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        }
    };
    let (on, off) = (list(parts.next()), list(parts.next()));
    let words = Words { on: &on, off: &off };
    let payload = parts.next().unwrap_or(&[]);

    let got = decode(payload, json.then_some(pointer.as_str()), words, ty);
    well_typed(got.clone(), ty, "decode");
    if payload.iter().all(u8::is_ascii_whitespace) {
        assert!(got.is_err(), "an empty payload is no value");
    }
    if !json {
        if let (Ok(Value::Bool(b)), false) = (&got, on.is_empty() && off.is_empty()) {
            let text = std::str::from_utf8(payload).expect("decoded").trim();
            let named = if *b { &on } else { &off };
            assert!(named.iter().any(|w| w == text), "{text:?} read {b} unnamed");
        }
        let mut padded = b" \t\n".to_vec();
        padded.extend_from_slice(payload);
        padded.extend_from_slice(b"\r\n ");
        assert_eq!(
            decode(&padded, None, words, ty),
            got,
            "surrounding whitespace changed the value"
        );
    }

    // A number the device sends, as text and inside JSON.
    if payload.len() >= 8 {
        let v = f64::from_le_bytes(payload[..8].try_into().unwrap());
        if v.is_finite() {
            for text in [format!("{v}"), format!("{v:?}"), format!("{v:e}")] {
                let ty = if ty == ValueType::Bool {
                    ValueType::F64
                } else {
                    ty
                };
                assert_eq!(
                    decode(text.as_bytes(), None, Words::PLAIN, ty),
                    Ok(Value::Number(v)),
                    "{text}"
                );
                let doc = format!(r#"{{"a": {{"b/c": [true, {text}]}}}}"#);
                // Exact, as plain text (`json_numbers_decode_exactly` in
                // crates/drivers/mqtt/tests/fuzz_regressions.rs).
                assert_eq!(
                    decode(doc.as_bytes(), Some("/a/b~1c/1"), Words::PLAIN, ty),
                    Ok(Value::Number(v)),
                    "{doc}"
                );
            }
        }
    }

    // The time the payload says its value was taken.
    if let Ok(t) = payload_time(payload, &pointer) {
        assert!(t > 0, "{t}");
    }
    if payload.len() >= 8 {
        let ms = i64::from_le_bytes(payload[..8].try_into().unwrap()).rem_euclid(1 << 45)
            + 10_000_000_000;
        let doc = format!(r#"{{"t": {ms}}}"#);
        assert_eq!(payload_time(doc.as_bytes(), "/t"), Ok(ms), "{doc}");
    }

    // Topic filters, from the pointer and the payload as text.
    let topic = String::from_utf8_lossy(payload);
    if !pointer.contains(['+', '#']) {
        assert!(topic_matches(&pointer, &pointer), "{pointer:?}");
    }
    assert_eq!(
        topic_matches("#", &topic),
        !topic.starts_with('$'),
        "{topic:?}"
    );
    let _ = topic_matches(&pointer, &topic);
});
