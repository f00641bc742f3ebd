//! Pure helpers: payload decoding, topic filter matching, expiry rounding, broker URLs.
//! No I/O here; everything is unit-tested below.

use std::time::Duration;

use closedloop_driver::{BrokerUrl, Value, ValueType};

/// Decodes a signal value from an MQTT payload (docs/plant-file.md `topic` + `json` +
/// `true_values`).
///
/// - With `json`, the payload is parsed as JSON and the pointer selects the value: a JSON bool, a
///   number, or a string that parses as a number or appears in `true_values`.
/// - Without, the raw payload (trimmed UTF-8) is used the same way as a string.
/// - For `ty = Bool`: `true`/`false`, a number (non-zero is true), or a string, which is true
///   exactly when it is in `true_values` (or equals `"true"` when `true_values` is empty).
///
/// `None` means "no valid value in this message": it must not update the cache.
pub fn decode(
    payload: &[u8],
    json: Option<&str>,
    true_values: &[String],
    ty: ValueType,
) -> Option<Value> {
    let text = std::str::from_utf8(payload).ok()?;
    match json {
        Some(pointer) => {
            let doc: serde_json::Value = serde_json::from_str(text).ok()?;
            from_json(doc.pointer(pointer)?, true_values, ty)
        }
        None => from_text(text.trim(), true_values, ty),
    }
}

fn from_json(v: &serde_json::Value, true_values: &[String], ty: ValueType) -> Option<Value> {
    match v {
        serde_json::Value::Bool(b) => Some(typed(Value::Bool(*b), ty)),
        serde_json::Value::Number(n) => Some(typed(Value::Number(n.as_f64()?), ty)),
        serde_json::Value::String(s) => from_text(s, true_values, ty),
        _ => None,
    }
}

fn from_text(s: &str, true_values: &[String], ty: ValueType) -> Option<Value> {
    if ty == ValueType::Bool {
        if true_values.is_empty() {
            return match s {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => s
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .map(|n| Value::Bool(n != 0.0)),
            };
        }
        return Some(Value::Bool(true_values.iter().any(|t| t == s)));
    }
    s.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .map(Value::Number)
}

fn typed(v: Value, ty: ValueType) -> Value {
    if ty == ValueType::Bool {
        Value::Bool(v.as_bool())
    } else {
        Value::Number(v.as_f64())
    }
}

/// Whether `topic` matches the subscription `filter` (`+` one level, `#` the rest).
pub fn topic_matches(filter: &str, topic: &str) -> bool {
    let mut f = filter.split('/');
    let mut t = topic.split('/');
    loop {
        match (f.next(), t.next()) {
            (Some("#"), _) => return !topic.starts_with('$') || filter.starts_with('$'),
            (Some("+"), Some(_)) => {}
            (Some(a), Some(b)) if a == b => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// MQTT 5 message expiry in whole seconds, rounded up so a message never expires before the
/// deadline; `None` when the deadline has passed (nothing should be sent).
pub fn expiry_secs(expiry: Duration) -> Option<u32> {
    if expiry.is_zero() {
        return None;
    }
    let secs = expiry.as_secs() + u64::from(expiry.subsec_nanos() > 0);
    Some(u32::try_from(secs).unwrap_or(u32::MAX))
}

/// Splits a broker URL into host and port: `mqtt://host[:port]` or `tcp://` (plain, default port
/// 1883), `mqtts://host[:port]` or `ssl://` (TLS, default port 8883); the scheme alone decides
/// whether [`crate::MqttBroker::connect`] speaks TLS.
pub fn parse_broker_url(url: &str) -> Result<(String, u16), crate::Error> {
    parse_broker(url).map(|a| (a.host, a.port))
}

/// [`parse_broker_url`] with the TLS flag [`crate::MqttBroker::connect`] needs: the plant
/// loader's parser (`closedloop_driver::BrokerUrl`), so a URL `closedloop check` accepts is one
/// this crate connects to.
pub(crate) fn parse_broker(url: &str) -> Result<BrokerUrl, crate::Error> {
    BrokerUrl::parse(url).map_err(|why| crate::Error::InvalidUrl {
        url: url.to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn json_pointer_bool_and_number() {
        let p = br#"{"on": true, "seq": 7, "t": {"c": "21.5"}}"#;
        assert_eq!(
            decode(p, Some("/on"), &[], ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            decode(p, Some("/seq"), &[], ValueType::F64),
            Some(Value::Number(7.0))
        );
        assert_eq!(
            decode(p, Some("/t/c"), &[], ValueType::F64),
            Some(Value::Number(21.5))
        );
        assert_eq!(
            decode(p, Some("/seq"), &[], ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            decode(p, Some("/on"), &[], ValueType::U16),
            Some(Value::Number(1.0))
        );
    }

    #[test]
    fn missing_pointer_or_bad_json_is_no_value() {
        assert_eq!(
            decode(br#"{"on": true}"#, Some("/off"), &[], ValueType::Bool),
            None
        );
        assert_eq!(decode(b"not json", Some("/on"), &[], ValueType::Bool), None);
        assert_eq!(
            decode(br#"{"on": null}"#, Some("/on"), &[], ValueType::Bool),
            None
        );
        assert_eq!(decode(&[0xff, 0xfe], None, &[], ValueType::F64), None);
    }

    #[test]
    fn raw_payload_with_true_values() {
        let t = tv(&["ON", "1"]);
        assert_eq!(
            decode(b"ON", None, &t, ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            decode(b" 1\n", None, &t, ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            decode(b"OFF", None, &t, ValueType::Bool),
            Some(Value::Bool(false))
        );
        assert_eq!(
            decode(b"on", None, &t, ValueType::Bool),
            Some(Value::Bool(false))
        );
    }

    #[test]
    fn raw_payload_without_true_values() {
        assert_eq!(
            decode(b"true", None, &[], ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            decode(b"0", None, &[], ValueType::Bool),
            Some(Value::Bool(false))
        );
        assert_eq!(decode(b"maybe", None, &[], ValueType::Bool), None);
        assert_eq!(
            decode(b"42.5", None, &[], ValueType::F32),
            Some(Value::Number(42.5))
        );
        assert_eq!(decode(b"NaN", None, &[], ValueType::F32), None);
        assert_eq!(decode(b"x", None, &[], ValueType::F32), None);
    }

    #[test]
    fn filters_match_like_the_spec() {
        assert!(topic_matches("lab/lamp/state", "lab/lamp/state"));
        assert!(topic_matches("lab/+/state", "lab/lamp/state"));
        assert!(topic_matches("lab/#", "lab/lamp/state"));
        assert!(topic_matches("lab/#", "lab"));
        assert!(topic_matches("#", "a/b"));
        assert!(!topic_matches("#", "$SYS/x"));
        assert!(!topic_matches("lab/+", "lab/lamp/state"));
        assert!(!topic_matches("lab/lamp", "lab/lamp/state"));
        assert!(!topic_matches("lab/lamp/state", "lab/lamp"));
    }

    #[test]
    fn expiry_rounds_up_and_refuses_zero() {
        assert_eq!(expiry_secs(Duration::ZERO), None);
        assert_eq!(expiry_secs(Duration::from_millis(1)), Some(1));
        assert_eq!(expiry_secs(Duration::from_millis(2000)), Some(2));
        assert_eq!(expiry_secs(Duration::from_millis(2001)), Some(3));
    }

    #[test]
    fn broker_urls() {
        assert_eq!(
            parse_broker_url("mqtt://h:1884").ok(),
            Some(("h".into(), 1884))
        );
        assert_eq!(parse_broker_url("mqtt://h").ok(), Some(("h".into(), 1883)));
        assert_eq!(parse_broker_url("tcp://h/").ok(), Some(("h".into(), 1883)));
        assert_eq!(parse_broker_url("mqtts://h").ok(), Some(("h".into(), 8883)));
        assert_eq!(
            parse_broker_url("ssl://[::1]").ok(),
            Some(("::1".into(), 8883))
        );
        assert_eq!(
            parse_broker_url("mqtts://[::1]:9883").ok(),
            Some(("::1".into(), 9883))
        );
        assert!(parse_broker_url("http://h:1883").is_err());
        assert!(parse_broker_url("mqtts://user@h").is_err());
        assert!(parse_broker_url("mqtt://h:99999").is_err());
        assert!(parse_broker_url("mqtt://:1883").is_err());
    }

    #[test]
    fn tls_is_told_by_the_scheme() {
        let tls = |url: &str| parse_broker(url).ok().map(|a| a.tls);
        assert_eq!(tls("mqtt://h"), Some(false));
        assert_eq!(tls("tcp://h:1883"), Some(false));
        assert_eq!(tls("mqtts://h"), Some(true));
        assert_eq!(tls("ssl://h:8883"), Some(true));
        assert_eq!(tls("h:1883"), None);
    }
}
