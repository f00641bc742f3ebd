//! A value as every view shows it: its value, when it was read (or taken), where it came from
//! and its unit. One type for every consumer:
//!
//! - a command's evidence (the judge's, a cancel's, a readback's), whichever protocol read it:
//!   [`Shown::read`], dated when this gateway read it — what decided, decided then — and shown
//!   as `{"value", "at", "source", "unit"}`, `unit` only when the plant gives one;
//! - a device state here and at every other gateway (`get_device_state`, `list_devices`, the
//!   page, the prompts): [`Shown::dated`], dated by the payload's own time when it names one,
//!   undated for a retained message without one; an owner publishes it for the gateways that
//!   cannot read the device ([`Shown::published`], read back by [`Shown::from_published`]), so a
//!   value is never younger at another gateway than here.

use crate::clock::rfc3339;
use closedloop_contract::sample::SignalValue;
use serde_json::{Value as Json, json};

/// A value with its time, source and unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown<'a> {
    /// The value as JSON: a signal's number or flag, or a block of registers read back.
    pub value: Json,
    /// Wall-clock ms of the read (or of its taking, for [`Shown::dated`]); `None` for a value
    /// known only from a retained message that names no time: nobody can tell its age.
    pub at_ms: Option<i64>,
    /// Where it came from: `holding:2`, a node id, a topic.
    pub source: &'a str,
    /// The plant's unit of the signal, if it gives one.
    pub unit: Option<&'a str>,
    /// Known only from a retained message (numbered 0: not read by this gateway): shown, never
    /// decided on.
    pub retained: bool,
}

impl<'a> Shown<'a> {
    /// A sample as evidence: as of when this gateway read it — what decided, decided then (a
    /// payload's own time dates what a device state shows, never a decision).
    pub fn read(v: &'a SignalValue, unit: Option<&'a str>) -> Shown<'a> {
        Shown {
            value: crate::value_json(v.value),
            at_ms: Some(v.at_ms),
            source: &v.source,
            unit,
            retained: v.seq == 0,
        }
    }

    /// A sample as a device state shows it: dated by its payload's time when it names one
    /// ([`SignalValue::shown_ms`]), else by its read; undated when only a retained message
    /// without a time gave it.
    pub fn dated(v: &'a SignalValue, unit: Option<&'a str>) -> Shown<'a> {
        Shown {
            at_ms: v.shown_ms(),
            ..Shown::read(v, unit)
        }
    }

    /// A value read at `at_ms` by a request of the caller's own (a readback), not a sample.
    pub fn now(value: Json, at_ms: i64, source: &'a str) -> Shown<'a> {
        Shown {
            value,
            at_ms: Some(at_ms),
            source,
            unit: None,
            retained: false,
        }
    }

    /// `{"value", "at", "source"}`, with `"unit"` when there is one (`"at"` is null only for
    /// an undated retained value, which evidence never holds).
    pub fn evidence(&self) -> Json {
        let at = self.at_ms.map(rfc3339);
        let mut e = json!({"value": self.value, "at": at, "source": self.source});
        if let Some(u) = self.unit {
            e["unit"] = json!(u);
        }
        e
    }

    /// What an owner publishes for the other gateways: `{"value", "source"}`, `"retained":
    /// true` for a retained value, and `"at_ms"` whenever a reader must not take the value for
    /// fresh — a retained value's time when it has one, a live one's once `fresh` says it is
    /// no longer (read times change every poll: leaving them out while fresh keeps a row
    /// unchanged, so it is written only when something a reader shows changes).
    pub fn published(&self, fresh: impl Fn(i64) -> bool) -> Json {
        let mut p = json!({"value": self.value, "source": self.source});
        if self.retained {
            p["retained"] = json!(true);
        }
        match self.at_ms {
            Some(t) if self.retained || !fresh(t) => p["at_ms"] = json!(t),
            _ => {}
        }
        p
    }

    /// A value an owner published ([`Shown::published`]), dated for a reader at `now_ms`: as
    /// old as its time says, and never younger than `fresh_age_ms` (how long ago the owner may
    /// have read a value it published as fresh); a retained value without a time stays undated.
    pub fn from_published(
        p: &'a Json,
        unit: Option<&'a str>,
        now_ms: i64,
        fresh_age_ms: i64,
    ) -> Shown<'a> {
        let retained = p["retained"] == true;
        let age_ms = match p["at_ms"].as_i64() {
            Some(t) => Some((now_ms - t).max(fresh_age_ms)),
            None => (!retained).then_some(fresh_age_ms),
        };
        Shown {
            value: p["value"].clone(),
            at_ms: age_ms.map(|a| now_ms - a),
            source: p["source"].as_str().unwrap_or_default(),
            unit,
            retained,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_contract::Value;

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

    fn sample(seq: u64, at_ms: i64, taken_ms: Option<i64>) -> SignalValue {
        SignalValue {
            value: Value::Bool(true),
            at_ms,
            source: "relay/state".into(),
            seq,
            taken_ms,
        }
    }

    #[test]
    fn a_device_state_dates_by_the_payload_and_evidence_by_the_read() {
        let live = sample(4, 10_000, Some(6_000));
        assert_eq!(Shown::read(&live, None).at_ms, Some(10_000));
        assert_eq!(Shown::dated(&live, None).at_ms, Some(6_000));
        let retained = sample(0, 10_000, None);
        let dated = Shown::dated(&retained, None);
        assert_eq!((dated.at_ms, dated.retained), (None, true));
    }

    #[test]
    fn a_published_value_is_never_younger_at_its_reader() {
        let fresh = |t: i64| 10_000 - t <= 300;
        let cases = [
            // (sample, published at_ms, age at a reader 50 ms later whose fresh bound is 400)
            (sample(4, 9_900, None), None, Some(400)),
            (sample(4, 2_000, None), Some(2_000), Some(8_050)),
            (sample(4, 9_900, Some(3_000)), Some(3_000), Some(7_050)),
            (sample(0, 9_900, Some(9_850)), Some(9_850), Some(400)),
            (sample(0, 9_900, None), None, None),
        ];
        for (v, at_ms, age) in cases {
            let p = Shown::dated(&v, None).published(fresh);
            assert_eq!(p["at_ms"].as_i64(), at_ms, "{v:?} → {p}");
            assert_eq!(p["retained"] == true, v.seq == 0, "{p}");
            let back = Shown::from_published(&p, Some("°C"), 10_050, 400);
            assert_eq!(back.at_ms.map(|t| 10_050 - t), age, "{v:?} → {p}");
            assert_eq!(
                (back.value, back.source, back.unit),
                (json!(true), "relay/state", Some("°C"))
            );
        }
    }
}
