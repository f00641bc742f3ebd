//! One command as one OTLP span: from `received` to its final status, its timeline as span
//! events, device, action, status and code as attributes — a child of the caller's trace when
//! the tool call carried a W3C `traceparent` in `_meta` (kept on the `received` entry).

use super::proto::{Msg, attr_bool, attr_str};
use closedloop_engine::clock::days_from_civil;
use closedloop_engine::{CommandResult, Status};

/// A W3C trace context: the caller's trace and the span the command's span is a child of.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl TraceParent {
    /// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, as W3C Trace Context writes it;
    /// `None` for anything else (an invalid traceparent is ignored, as the spec says).
    pub fn parse(s: &str) -> Option<TraceParent> {
        let parts: Vec<&str> = s.trim().split('-').collect();
        let [version, trace, span, flags] = parts.as_slice() else {
            return None;
        };
        if *version != "00" || flags.len() != 2 || hex(flags).is_none() {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace)?.try_into().ok()?;
        let span_id: [u8; 8] = hex(span)?.try_into().ok()?;
        let zero = trace_id.iter().all(|b| *b == 0) || span_id.iter().all(|b| *b == 0);
        (!zero).then_some(TraceParent { trace_id, span_id })
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2)
        || !s
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// The span of a finished command (`Span`, trace.proto).
pub(crate) fn span(r: &CommandResult) -> Msg {
    let id = hex(&r.command_id.replace('-', "")).unwrap_or_else(|| vec![0; 16]);
    let parent = r
        .timeline
        .iter()
        .find(|e| e.event == "received")
        .and_then(|e| e.data.get("traceparent")?.as_str())
        .and_then(TraceParent::parse);
    let mut s = Msg::new();
    match &parent {
        Some(p) => s.bytes(1, &p.trace_id),
        // No caller's trace: the command's own (its UUID is unique, as a trace id must be).
        None => s.bytes(1, &id),
    };
    // The UUIDv7's random half: unique per command.
    s.bytes(2, &id[8..16]);
    if let Some(p) = &parent {
        s.bytes(4, &p.span_id);
    }
    s.string(5, &format!("{} {}", r.device, r.action));
    s.uint(6, 1); // SPAN_KIND_INTERNAL
    let first = r.timeline.first().map_or(&r.updated_at, |e| &e.at);
    s.fixed64(7, unix_nanos(first).unwrap_or(0));
    s.fixed64(8, unix_nanos(&r.updated_at).unwrap_or(0));
    for a in attributes(r) {
        s.message(9, &a);
    }
    for e in &r.timeline {
        // A reading at the time it was read, not when the journal took it.
        let read_at = e.data.get("read_at").and_then(|v| v.as_str());
        let mut ev = Msg::new();
        ev.fixed64(1, unix_nanos(read_at.unwrap_or(&e.at)).unwrap_or(0))
            .string(2, &e.event);
        if !e.data.is_empty() {
            let data = serde_json::Value::Object(e.data.clone()).to_string();
            ev.message(3, &attr_str("closedloop.data", &data));
        }
        s.message(11, &ev);
    }
    s.message(15, &status(r));
    s
}

fn attributes(r: &CommandResult) -> Vec<Msg> {
    let mut v = vec![
        attr_str("closedloop.command_id", &r.command_id),
        attr_str("closedloop.request_id", &r.request_id),
        attr_str("closedloop.device", &r.device),
        attr_str("closedloop.action", &r.action),
        attr_str("closedloop.status", r.status.as_str()),
        attr_bool("closedloop.verified", r.verified),
    ];
    if let Some(code) = &r.error_code {
        v.push(attr_str("closedloop.error_code", code.as_str()));
    }
    // What decided it: each value with its own read time and source.
    if r.evidence.as_object().is_some_and(|m| !m.is_empty()) {
        v.push(attr_str("closedloop.evidence", &r.evidence.to_string()));
    }
    v
}

/// `Status`: OK for what ended as asked (`completed`, `sent`), ERROR with the code and the
/// detail for the rest.
fn status(r: &CommandResult) -> Msg {
    let mut st = Msg::new();
    if matches!(r.status, Status::Completed | Status::Sent) {
        st.uint(3, 1);
    } else {
        let code = r.error_code.as_ref().map_or("", |c| c.as_str());
        let detail = r.detail.as_deref().unwrap_or_default();
        st.string(2, &format!("{} {code}: {detail}", r.status.as_str()));
        st.uint(3, 2);
    }
    st
}

/// Nanoseconds since the epoch of the engine's RFC 3339 times (`2026-12-02T02:30:11.672Z`).
fn unix_nanos(at: &str) -> Option<u64> {
    let b = at.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !at.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| at.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let secs = num(11..13)? * 3600 + num(14..16)? * 60 + num(17..19)?;
    let frac = at.get(19..at.len() - 1).unwrap_or("");
    let nanos = match frac.strip_prefix('.') {
        Some(f) if !f.is_empty() && f.len() <= 9 => {
            f.parse::<i64>().ok()? * 10i64.pow(9 - f.len() as u32)
        }
        _ => 0,
    };
    let days = days_from_civil(y, u32::try_from(m).ok()?, u32::try_from(d).ok()?)?;
    let total = (days * 86_400 + secs) * 1_000_000_000 + nanos;
    u64::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_taken_only_in_the_w3c_form() {
        let p =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(p.trace_id[0], 0x4b);
        assert_eq!(p.span_id[7], 0xb7);
        for bad in [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01",
            "garbage",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn engine_times_convert_to_unix_nanoseconds() {
        assert_eq!(unix_nanos("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            unix_nanos("2026-12-02T02:30:11.672Z"),
            Some(1_796_178_611_672_000_000)
        );
        assert_eq!(
            unix_nanos("2000-02-29T00:00:01Z"),
            Some(951_782_401_000_000_000)
        );
        assert_eq!(unix_nanos("yesterday"), None);
    }
}
