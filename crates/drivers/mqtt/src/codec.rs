//! Pure helpers: payload decoding, topic filter matching, expiry rounding, broker URLs.
//! No I/O here; everything is unit-tested below.

use std::time::Duration;

use closedloop_contract::{BrokerUrl, Value, ValueType};

/// The words a bool signal is read from (`true_values`, `false_values` in the plant file).
///
/// Both named: a text in `on` is true, in `off` false, anything else — Home Assistant's `None`
/// or `unknown`, a firmware's `unavailable` — is no value. Both empty: `true`/`false` or a
/// number (non-zero is true). A default of "anything else is false" once confirmed an OFF on a
/// switch whose state topic said `None` while its relay stayed on.
#[derive(Debug, Clone, Copy)]
pub struct Words<'a> {
    /// Payloads (or JSON strings) that mean `true`.
    pub on: &'a [String],
    /// Payloads (or JSON strings) that mean `false`.
    pub off: &'a [String],
}

impl Words<'static> {
    /// No words named: `true`/`false` and numbers.
    pub const PLAIN: Words<'static> = Words { on: &[], off: &[] };
}

/// Decodes a signal value from an MQTT payload (docs/plant-file.md `topic` + `json` +
/// `true_values`/`false_values`): a value, or why the payload holds none — never a default.
///
/// - With `json`, the payload is parsed as JSON and the pointer selects the value: a JSON bool, a
///   number, or a string read as text below. JSON `null`, a missing pointer, an object or an
///   array are no value.
/// - Without, the raw payload (trimmed UTF-8) is read as text: a number, or for a bool the words
///   of [`Words`].
/// - An empty payload (a retained message being cleared), text that is not UTF-8, `nan`, `inf`
///   and numbers no double holds are no value.
///
/// `Err` says, in words for a `detail`, what came and why it is no value: from that message on the
/// signal is unreadable (`Snapshot::no_value`) until a value comes.
pub fn decode(
    payload: &[u8],
    json: Option<&str>,
    words: Words<'_>,
    ty: ValueType,
) -> Result<Value, String> {
    let text =
        std::str::from_utf8(payload).map_err(|_| "a payload that is not UTF-8 text".to_string())?;
    if text.trim().is_empty() {
        return Err("an empty payload".into());
    }
    match json {
        Some(pointer) => {
            let doc: serde_json::Value = serde_json::from_str(text)
                .map_err(|_| format!("{}, which is not JSON", quoted(text)))?;
            let v = doc
                .pointer(pointer)
                .ok_or_else(|| format!("JSON without {pointer}"))?;
            from_json(v, pointer, words, ty)
        }
        None => from_text(text.trim(), words, ty),
    }
}

fn from_json(
    v: &serde_json::Value,
    pointer: &str,
    words: Words<'_>,
    ty: ValueType,
) -> Result<Value, String> {
    match v {
        serde_json::Value::Bool(b) => Ok(typed(Value::Bool(*b), ty)),
        serde_json::Value::Number(n) => match n.as_f64().filter(|n| n.is_finite()) {
            Some(n) => Ok(typed(Value::Number(n), ty)),
            None => Err(format!("{pointer} = {n}, which no double holds")),
        },
        serde_json::Value::String(s) => from_text(s, words, ty),
        serde_json::Value::Null => Err(format!("{pointer} = null")),
        other => Err(format!(
            "{pointer} = {}, not a value",
            quoted(&other.to_string())
        )),
    }
}

fn from_text(s: &str, words: Words<'_>, ty: ValueType) -> Result<Value, String> {
    let number = || s.parse::<f64>().ok().filter(|n| n.is_finite());
    if ty != ValueType::Bool {
        return number()
            .map(Value::Number)
            .ok_or_else(|| format!("{}, which is not a number", quoted(s)));
    }
    if words.on.is_empty() && words.off.is_empty() {
        return match s {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => number()
                .map(|n| Value::Bool(n != 0.0))
                .ok_or_else(|| format!("{}, which is neither true, false nor a number", quoted(s))),
        };
    }
    if words.on.iter().any(|t| t == s) {
        Ok(Value::Bool(true))
    } else if words.off.iter().any(|t| t == s) {
        Ok(Value::Bool(false))
    } else {
        Err(format!(
            "{}, in neither true_values {:?} nor false_values {:?}",
            quoted(s),
            words.on,
            words.off
        ))
    }
}

/// A device's text for a detail: quoted, control characters escaped, at most 40 characters.
fn quoted(s: &str) -> String {
    let mut short: String = s.chars().take(40).collect();
    if short.len() < s.len() {
        short.push('…');
    }
    format!("{short:?}")
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
/// loader's parser (`closedloop_contract::BrokerUrl`), so a URL `closedloop check` accepts is one
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

    fn plain(p: &[u8], json: Option<&str>, ty: ValueType) -> Option<Value> {
        decode(p, json, Words::PLAIN, ty).ok()
    }

    #[test]
    fn json_pointer_bool_and_number() {
        let p = br#"{"on": true, "seq": 7, "t": {"c": "21.5"}}"#;
        assert_eq!(
            plain(p, Some("/on"), ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            plain(p, Some("/seq"), ValueType::F64),
            Some(Value::Number(7.0))
        );
        assert_eq!(
            plain(p, Some("/t/c"), ValueType::F64),
            Some(Value::Number(21.5))
        );
        assert_eq!(
            plain(p, Some("/seq"), ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(
            plain(p, Some("/on"), ValueType::U16),
            Some(Value::Number(1.0))
        );
    }

    #[test]
    fn what_is_not_a_value_says_what_came() {
        let no = |p: &[u8], json, ty| decode(p, json, Words::PLAIN, ty).unwrap_err();
        assert_eq!(
            no(br#"{"on": true}"#, Some("/off"), ValueType::Bool),
            "JSON without /off"
        );
        assert_eq!(
            no(b"not json", Some("/on"), ValueType::Bool),
            "\"not json\", which is not JSON"
        );
        assert_eq!(
            no(
                br#"{"temperature": null}"#,
                Some("/temperature"),
                ValueType::F64
            ),
            "/temperature = null"
        );
        assert_eq!(
            no(br#"{"t": [1]}"#, Some("/t"), ValueType::F64),
            "/t = \"[1]\", not a value"
        );
        assert_eq!(
            no(&[0xff, 0xfe], None, ValueType::F64),
            "a payload that is not UTF-8 text"
        );
        assert_eq!(no(b"", None, ValueType::Bool), "an empty payload");
        assert_eq!(no(b" \n", Some("/on"), ValueType::Bool), "an empty payload");
        assert_eq!(
            no(b"nan", None, ValueType::F64),
            "\"nan\", which is not a number"
        );
        assert_eq!(
            no(b"None", None, ValueType::Bool),
            "\"None\", which is neither true, false nor a number"
        );
        assert_eq!(
            no(br#"{"t": 1e999}"#, Some("/t"), ValueType::F64),
            "\"{\\\"t\\\": 1e999}\", which is not JSON"
        );
    }

    #[test]
    fn a_bool_from_words_is_true_false_or_no_value() {
        let (on, off) = (tv(&["ON", "1"]), tv(&["OFF", "0"]));
        let w = Words { on: &on, off: &off };
        assert_eq!(
            decode(b"ON", None, w, ValueType::Bool),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            decode(b" 1\n", None, w, ValueType::Bool),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            decode(b"OFF", None, w, ValueType::Bool),
            Ok(Value::Bool(false))
        );
        for word in ["None", "unknown", "unavailable", "on", "2"] {
            assert_eq!(
                decode(word.as_bytes(), None, w, ValueType::Bool),
                Err(format!(
                    "{word:?}, in neither true_values [\"ON\", \"1\"] nor false_values [\"OFF\", \"0\"]"
                ))
            );
        }
        let doc = br#"{"POWER": "None"}"#;
        assert!(decode(doc, Some("/POWER"), w, ValueType::Bool).is_err());
    }

    #[test]
    fn raw_payload_without_words() {
        assert_eq!(
            plain(b"true", None, ValueType::Bool),
            Some(Value::Bool(true))
        );
        assert_eq!(plain(b"0", None, ValueType::Bool), Some(Value::Bool(false)));
        assert_eq!(plain(b"maybe", None, ValueType::Bool), None);
        assert_eq!(
            plain(b"42.5", None, ValueType::F32),
            Some(Value::Number(42.5))
        );
        assert_eq!(plain(b"NaN", None, ValueType::F32), None);
        assert_eq!(plain(b"x", None, ValueType::F32), None);
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
