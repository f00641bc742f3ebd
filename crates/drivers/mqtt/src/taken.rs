//! When a payload says its value was taken (`time_json`, docs/plant-file.md): a retained message
//! is shown as old as that instead of "age unknown", and a live one is never shown younger than
//! it says it is. The time is read as a device writes it — an RFC 3339 date with its zone, or a
//! Unix time in seconds or milliseconds — and anything else is no time, said in words: a time
//! without a zone (Tasmota's local `Time`) could be any of 24 hours, so it dates nothing.

use closedloop_contract::calendar::days_from_civil;

/// Unix times at or above this many are milliseconds (2286 in seconds; 1973 in ms).
const MS_FROM: f64 = 1e10;

/// The time, in Unix milliseconds, at `pointer` in `payload`, or why there is none.
pub fn payload_time(payload: &[u8], pointer: &str) -> Result<i64, String> {
    let doc: serde_json::Value =
        serde_json::from_slice(payload).map_err(|_| "the payload is not JSON".to_string())?;
    let v = doc
        .pointer(pointer)
        .ok_or_else(|| format!("the payload has no {pointer}"))?;
    let time = match v {
        serde_json::Value::Number(n) => n.as_f64().and_then(unix_ms),
        serde_json::Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) => unix_ms(n),
            Err(_) => {
                let t = rfc3339_ms(s.trim()).map_err(|why| format!("{pointer} = {s:?}: {why}"))?;
                return (t > 0)
                    .then_some(t)
                    .ok_or_else(|| format!("{pointer} = {s:?}, which is no time after 1970"));
            }
        },
        _ => None,
    };
    // A time that comes to the epoch or before (a tiny number, a clock never set) dates nothing.
    time.filter(|t| *t > 0)
        .ok_or_else(|| format!("{pointer} = {v}, which is no time"))
}

/// A Unix time in seconds or milliseconds as milliseconds; `None` if not positive and finite.
fn unix_ms(n: f64) -> Option<i64> {
    if !n.is_finite() || n <= 0.0 || n >= 1e15 {
        return None;
    }
    Some(if n >= MS_FROM { n } else { n * 1000.0 }.round() as i64)
}

/// `2026-12-07T17:00:00.250+01:00` (or `Z`, or a space for the `T`) as Unix milliseconds.
fn rfc3339_ms(s: &str) -> Result<i64, String> {
    let bad = || "not an RFC 3339 time such as 2026-12-07T17:00:00Z".to_string();
    let b = s.as_bytes();
    if b.len() < 19 || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let part = s.get(r).ok_or_else(bad)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let dashes = b[4] == b'-' && b[7] == b'-' && b[13] == b':' && b[16] == b':';
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !dashes || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut rest = &s[19..];
    let mut ms = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let first3 = format!("{:0<3}", &frac[..digits.min(3)]);
        ms = first3.parse::<i64>().map_err(|_| bad())?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        "" => return Err("a time without a zone (add Z or an offset such as +01:00)".into()),
        o => zone_minutes(o).ok_or_else(bad)?,
    };
    // The one calendar: `None` for a month or day that does not exist.
    let days = (u32::try_from(mo).ok().zip(u32::try_from(d).ok()))
        .and_then(|(mo, d)| days_from_civil(y, mo, d))
        .ok_or_else(bad)?;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec.min(59) - offset_min * 60;
    // Before 1970 is a clock that was never set, as a Unix time of 0 is.
    match secs * 1000 + ms {
        t if t > 0 => Ok(t),
        _ => Err("a time before 1970: the device's clock was never set".into()),
    }
}

/// `+01:00`, `-0530` as minutes east of UTC.
fn zone_minutes(o: &str) -> Option<i64> {
    let sign = match o.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    // `+HH:MM` or `+HHMM`, nothing else.
    let digits: String = match (o.len(), o.as_bytes().get(3)) {
        (6, Some(b':')) => format!("{}{}", o.get(1..3)?, o.get(4..6)?),
        (5, _) => o.get(1..5)?.to_string(),
        _ => return None,
    };
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
    (h <= 23 && m <= 59).then_some(sign * (h * 60 + m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(payload: &str, pointer: &str) -> Result<i64, String> {
        payload_time(payload.as_bytes(), pointer)
    }

    #[test]
    fn reads_rfc3339_with_a_zone_and_unix_seconds_or_milliseconds() {
        // 2026-11-29T16:00:00.123Z
        let t = 1_795_968_000_123;
        assert_eq!(at(r#"{"ts":"2026-11-29T16:00:00.123Z"}"#, "/ts"), Ok(t));
        assert_eq!(
            at(r#"{"ts":"2026-11-29T17:00:00.123+01:00"}"#, "/ts"),
            Ok(t)
        );
        assert_eq!(
            at(r#"{"ts":"2026-11-29 10:30:00.123456-0530"}"#, "/ts"),
            Ok(t)
        );
        assert_eq!(at(r#"{"ts":1795968000.123}"#, "/ts"), Ok(t));
        assert_eq!(at(r#"{"last_seen":1795968000123}"#, "/last_seen"), Ok(t));
        assert_eq!(at(r#"{"m":{"t":"1795968000123"}}"#, "/m/t"), Ok(t));
        assert_eq!(
            at(r#"{"ts":"2000-02-29T00:00:00Z"}"#, "/ts"),
            Ok(951_782_400_000)
        );
        // A leap second is read as the second before it.
        assert_eq!(
            at(r#"{"ts":"2016-12-31T23:59:60Z"}"#, "/ts"),
            Ok(1_483_228_799_000)
        );
    }

    #[test]
    fn a_time_without_a_zone_or_that_is_no_time_dates_nothing_and_says_why() {
        let naive = at(r#"{"Time":"2026-12-07T17:00:00"}"#, "/Time").unwrap_err();
        assert!(naive.contains("without a zone"), "{naive}");
        assert_eq!(
            at(r#"{"on":true}"#, "/ts"),
            Err("the payload has no /ts".into())
        );
        assert_eq!(at("ON", "/ts"), Err("the payload is not JSON".into()));
        for v in [
            "null",
            "true",
            "-5",
            "0",
            "1e300",
            r#""soon""#,
            r#""2026-02-30T00:00:00Z""#,
            r#""2026-00-10T00:00:00Z""#,
            r#""2026-13-10T00:00:00Z""#,
            r#""2026-12-00T00:00:00Z""#,
            r#""2026-02-29T00:00:00Z""#,
            r#""2026-04-31T00:00:00Z""#,
            r#""1900-02-29T00:00:00Z""#,
            r#""2026-12-07T25:00:00Z""#,
            r#""2026-12-07T17:00:00+1:00""#,
            "{}",
            "[1]",
            r#""2026-12-07T17:00:00.Z""#,
            r#""２０２６-12-07T17:00:00Z""#,
            r#""2026-12-07T17:00:00+0:100""#,
            r#""2026-12-07T17:00:00+01:0""#,
            r#""1970-01-01T00:00:00Z""#,
            r#""1969-12-31T23:59:59Z""#,
        ] {
            let r = at(&format!(r#"{{"ts":{v}}}"#), "/ts");
            assert!(r.is_err(), "{v} -> {r:?}");
        }
    }

    #[test]
    fn no_payload_panics_the_time_reader() {
        // Every prefix and a few byte flips of a valid payload: an answer, never a panic.
        let good = r#"{"ts":"2026-11-29T17:00:00.123+01:00"}"#;
        for i in 0..=good.len() {
            let _ = at(&good[..i], "/ts");
            let mut b = good.as_bytes().to_vec();
            if i < b.len() {
                b[i] = b'9';
                let _ = payload_time(&b, "/ts");
                b[i] = 0xff;
                let _ = payload_time(&b, "/ts");
            }
        }
    }
}
