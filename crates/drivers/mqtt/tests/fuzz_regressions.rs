//! What fuzzing the MQTT payload decoder found (`fuzz/fuzz_targets/mqtt_payload.rs`). Fixed: the
//! test failed before serde_json's `float_roundtrip` was enabled, and the fuzz target now asks
//! for exact numbers.

use closedloop_contract::{Value, ValueType};
use closedloop_mqtt::{Words, decode};

/// A number a device sends must read as that number, whether the payload is plain text or JSON.
/// Plain text goes through `str::parse::<f64>` (exact); JSON through serde_json, which without
/// its `float_roundtrip` feature computes significand × 10^exponent in two roundings: 17-digit
/// numbers (what `repr`/`json.dumps` of a double writes) can come back one unit in the last
/// place off, and numbers next to f64::MAX overflow, so the whole payload is dropped.
///
/// Fixed by `serde_json = { workspace = true, features = ["float_roundtrip"] }` in
/// crates/drivers/mqtt/Cargo.toml (or in the workspace's `serde_json` entry).
#[test]
fn json_numbers_decode_exactly() {
    for text in [
        "451.70520289303045",
        "123456789012345.67",
        "1.7976931348623157e308",
    ] {
        let v: f64 = text.parse().expect("a double");
        assert_eq!(
            decode(text.as_bytes(), None, Words::PLAIN, ValueType::F64).ok(),
            Some(Value::Number(v)),
            "plain text {text}"
        );
        let doc = format!(r#"{{"value": {text}}}"#);
        assert_eq!(
            decode(doc.as_bytes(), Some("/value"), Words::PLAIN, ValueType::F64).ok(),
            Some(Value::Number(v)),
            "{doc}"
        );
    }
}

/// Found by fuzzing `mqtt_payload`: a time so small it rounds to the epoch (`125e-33` seconds),
/// or the epoch itself, dates nothing — as a time before 1970 does.
#[test]
fn a_payload_time_at_the_epoch_dates_nothing() {
    for doc in [
        r#"{"t": 125e-33}"#,
        r#"{"t": "1e-9"}"#,
        r#"{"t": "1970-01-01T00:00:00Z"}"#,
    ] {
        assert!(
            closedloop_mqtt::payload_time(doc.as_bytes(), "/t").is_err(),
            "{doc}"
        );
    }
    assert_eq!(
        closedloop_mqtt::payload_time(br#"{"t": 1}"#, "/t"),
        Ok(1_000)
    );
}
