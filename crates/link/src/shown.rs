//! A value as every view shows it: its value, when it was read, where it came from and its
//! unit. One type, so a command's evidence (the judge's, a cancel's, a readback's), whichever
//! protocol read it, has one shape — `{"value", "at", "source", "unit"}`, `unit` only when the
//! plant gives one — and a new consumer has one to pick.

use crate::clock::rfc3339;
use closedloop_driver::sample::SignalValue;
use serde_json::{Value as Json, json};

/// A value with its read time, source and unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown<'a> {
    /// The value as JSON: a signal's number or flag, or a block of registers read back.
    pub value: Json,
    /// Wall-clock ms of the read.
    pub at_ms: i64,
    /// Where it came from: `holding:2`, a node id, a topic.
    pub source: &'a str,
    /// The plant's unit of the signal, if it gives one.
    pub unit: Option<&'a str>,
}

impl<'a> Shown<'a> {
    /// A sample as evidence: as of when this gateway read it — what decided, decided then (a
    /// payload's own time dates what a device state shows, never a decision).
    pub fn read(v: &'a SignalValue, unit: Option<&'a str>) -> Shown<'a> {
        Shown {
            value: crate::value_json(v.value),
            at_ms: v.at_ms,
            source: &v.source,
            unit,
        }
    }

    /// `{"value", "at", "source"}`, with `"unit"` when there is one.
    pub fn evidence(&self) -> Json {
        let mut e = json!({"value": self.value, "at": rfc3339(self.at_ms), "source": self.source});
        if let Some(u) = self.unit {
            e["unit"] = json!(u);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_driver::Value;

    #[test]
    fn evidence_has_one_shape_and_a_unit_only_when_there_is_one() {
        let v = SignalValue {
            value: Value::Number(21.5),
            at_ms: 1_000,
            source: "input:4".into(),
            seq: 3,
            taken_ms: Some(500),
        };
        let want = json!({"value": 21.5, "at": "1970-01-01T00:00:01.000Z", "source": "input:4"});
        assert_eq!(Shown::read(&v, None).evidence(), want);
        let mut with_unit = want.clone();
        with_unit["unit"] = json!("°C");
        assert_eq!(
            Shown::read(&v, Some("°C")).evidence(),
            with_unit,
            "read time, not taken"
        );
    }
}
