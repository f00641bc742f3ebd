//! A signal as last read: a [`Reading`], and the one rule of which readings may be decided on
//! ([`Freshness`], [`Unusable`]).
//!
//! A reading keeps the last value that was read well *apart from* whether the last read of the
//! signal succeeded. A signal whose register began answering an exception has no current value:
//! its last good value is history, with its true age. Every consumer gets values through here —
//! the command judge (a value numbered above a write's fence), `requires` and standing alarms
//! (a usable value: readable, read within the device's liveness window, of a device that
//! answers), the values one gateway publishes for another and the views (each value with its own
//! read time, and the unreadable list). There is no accessor that hands out a cached value
//! without saying which of those it is: an alarm once cleared on a temperature read before the
//! probe's register began answering exception 4, and a heater switched on at 85 °C.

use super::Liveness;
use crate::Value;
use crate::contract::ErrorCode;

/// One value read from a device.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalValue {
    /// The decoded value.
    pub value: Value,
    /// Wall-clock ms of the read (when it was asked for, the earliest the device can have
    /// read it).
    pub at_ms: i64,
    /// Where it came from, e.g. `holding:2`.
    pub source: String,
    /// The read that produced it: numbers only grow, and a value numbered above a write's fence
    /// was read after the write was acknowledged. 0: not read by this gateway at all (an MQTT
    /// message the broker retained).
    pub seq: u64,
    /// When its payload says it was taken (`time_json`), if that is not after `at_ms`: shown,
    /// never decided on — every decision, fence and freshness window uses `at_ms`, the time
    /// this gateway read it, so a device clock behind ours cannot hold a command back.
    pub taken_ms: Option<i64>,
}

impl SignalValue {
    /// When the value was taken, as every view shows it: its payload's time when it names one,
    /// else when it was read; `None` for a retained message without a time in it (sent at some
    /// moment nobody can tell).
    pub fn shown_ms(&self) -> Option<i64> {
        self.taken_ms.or((self.seq != 0).then_some(self.at_ms))
    }
}

/// Why the last read of a signal failed, and since when it has been failing.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The contract's code for it (`BUS_NAK`, `REGISTER_INVALID`).
    pub code: ErrorCode,
    /// What the device answered, e.g. `holding:4 answered exception 4 (Server Device Failure)`.
    pub why: String,
    /// Wall-clock ms of the first read of this run of failures.
    pub since_ms: i64,
    /// The read that last failed (numbered as values are).
    pub seq: u64,
    /// The device answered, but with something that is no value (an empty or `None` payload,
    /// a word in neither `true_values` nor `false_values`, JSON `null`, NaN): unlike a refused
    /// read, which ends a command at once with its code, the judge waits for a value, and a
    /// deadline reached without one is `NO_FEEDBACK` saying what came instead.
    pub no_value: bool,
}

/// One signal as last read.
///
/// # Invariants
/// `current()` is `Some` only while the last read of the signal succeeded: a failed read takes
/// the current value away (it stays as `last_good`, history), and only a good read gives it back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    good: Option<SignalValue>,
    failed: Option<Failure>,
}

impl Reading {
    /// The value, when the last read of the signal succeeded.
    pub fn current(&self) -> Option<&SignalValue> {
        match self.failed {
            Some(_) => None,
            None => self.good.as_ref(),
        }
    }

    /// The last value read well, current or not: for showing beside [`Reading::failure`], with
    /// its own age. Never for deciding.
    pub fn last_good(&self) -> Option<&SignalValue> {
        self.good.as_ref()
    }

    /// Why the last read failed, when it did.
    pub fn failure(&self) -> Option<&Failure> {
        self.failed.as_ref()
    }
}

/// The rule a consumer that decides (an alarm, `requires`, the scope of a command's
/// expressions) applies to a value: read well, by a device that answers, and — for a device that
/// is read or sends frames — no longer ago than its liveness window. A device that reports when
/// it likes (MQTT) reports changes: its values stand while it is online.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// Wall-clock ms now.
    pub now_ms: i64,
    /// How old a value may be (the liveness window); `None`: any age while the device is online.
    pub within_ms: Option<i64>,
}

/// Why a signal's value may not be decided on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unusable<'a> {
    /// No value was ever read.
    NoValue,
    /// The last read failed (its last good value, if any, is history).
    Unreadable(&'a Failure, Option<&'a SignalValue>),
    /// Read longer ago than the device's liveness window.
    Stale(&'a SignalValue),
    /// Not read by this gateway: a message its broker retained from some earlier moment.
    Retained(&'a SignalValue),
    /// The device does not answer.
    Silent(Liveness),
}

impl Unusable<'_> {
    /// In words, for a `why` or a `detail`: "devices.probe.temp_c cannot be read since
    /// 2026-…Z (holding:4 answered exception 4); its last value, 45, is 4.0 s old".
    pub fn describe(&self, name: &str, now_ms: i64, rfc3339: impl Fn(i64) -> String) -> String {
        let age = |v: &SignalValue| format!("{:.1} s", (now_ms - v.at_ms).max(0) as f64 / 1000.0);
        match self {
            Unusable::NoValue => format!("{name} has no value yet"),
            Unusable::Unreadable(f, last) => {
                let last = last.map_or(String::new(), |v| {
                    format!("; its last value, {}, is {} old", shown(v.value), age(v))
                });
                let what = match f.no_value {
                    true => "has had no value",
                    false => "cannot be read",
                };
                format!(
                    "{name} {what} since {} ({}){last}",
                    rfc3339(f.since_ms),
                    f.why
                )
            }
            Unusable::Stale(v) => format!(
                "{name} was last read {} ago ({}), longer than its device's liveness window",
                age(v),
                shown(v.value)
            ),
            Unusable::Retained(v) => format!(
                "{name} = {} only from a retained message{}, not read since the gateway started",
                shown(v.value),
                v.taken_ms.map_or(String::new(), |t| format!(
                    " taken {:.1} s ago",
                    (now_ms - t).max(0) as f64 / 1000.0
                ))
            ),
            Unusable::Silent(l) => format!("{name}'s device is {}", l.as_str()),
        }
    }

    /// The contract code of an unreadable signal (`None` for the other kinds).
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Unusable::Unreadable(f, _) => Some(&f.code),
            _ => None,
        }
    }
}

fn shown(v: Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
    }
}

impl super::Snapshot {
    /// The reading of `name`, if the signal was ever read (well or not).
    pub fn reading(&self, name: &str) -> Option<&Reading> {
        self.readings.get(name)
    }

    /// Every signal's reading, by name.
    pub fn readings(&self) -> impl Iterator<Item = (&str, &Reading)> {
        self.readings.iter().map(|(k, r)| (k.as_str(), r))
    }

    /// The signals whose last read failed, by name, with why.
    pub fn unreadable(&self) -> impl Iterator<Item = (&str, &Failure)> {
        (self.readings.iter()).filter_map(|(k, r)| Some((k.as_str(), r.failure()?)))
    }

    /// Whether any signal's last read failed.
    pub fn has_unreadable(&self) -> bool {
        self.unreadable().next().is_some()
    }

    /// The current value of `name` read after `fence`: what judges a write acknowledged at that
    /// fence (only a read issued after the acknowledgement counts).
    pub fn read_after(&self, name: &str, fence: u64) -> Option<&SignalValue> {
        let v = self.readings.get(name)?.current()?;
        (v.seq > fence).then_some(v)
    }

    /// The value of `name` if a decider may use it under `rule`, or why not.
    pub fn usable(&self, name: &str, rule: Freshness) -> Result<&SignalValue, Unusable<'_>> {
        if self.liveness != Liveness::Online {
            return Err(Unusable::Silent(self.liveness));
        }
        let reading = self.readings.get(name).ok_or(Unusable::NoValue)?;
        if let Some(f) = &reading.failed {
            return Err(Unusable::Unreadable(f, reading.good.as_ref()));
        }
        let v = reading.good.as_ref().ok_or(Unusable::NoValue)?;
        if v.seq == 0 {
            return Err(Unusable::Retained(v));
        }
        match rule.within_ms {
            Some(w) if rule.now_ms - v.at_ms > w => Err(Unusable::Stale(v)),
            _ => Ok(v),
        }
    }

    /// Every value a decider may use under `rule`, by name: an expression's scope. A signal
    /// left out makes an expression that reads it fail to evaluate, which holds nothing.
    pub fn usable_values(&self, rule: Freshness) -> std::collections::BTreeMap<String, Value> {
        (self.readings.keys())
            .filter_map(|k| Some((k.clone(), self.usable(k, rule).ok()?.value)))
            .collect()
    }

    /// Every value whose last read succeeded, whatever its age: the scope of a judge that fences
    /// each value it decides on by its number ([`Snapshot::read_after`]), and of a stop plan,
    /// which must be written even when the device's values have aged. A decider without a
    /// fence uses [`Snapshot::usable_values`].
    pub fn readable_values(&self) -> std::collections::BTreeMap<String, Value> {
        (self.readings.iter())
            .filter_map(|(k, r)| Some((k.clone(), r.current()?.value)))
            .collect()
    }

    /// Records a read of `name` (read at `at_ms` by read `seq`), changing its reading in
    /// place: a poll of an idle device allocates nothing. A good value ends a run of failures;
    /// a number that is no number (NaN, ±inf: a broken thermocouple's float register, a
    /// node's Double) is recorded as [`Snapshot::no_value`] — the one place every decoder's
    /// value passes, so no protocol can hand one on.
    pub fn record(
        &mut self,
        name: &str,
        value: Value,
        at_ms: i64,
        seq: u64,
        source: impl FnOnce() -> String,
    ) {
        self.record_taken(name, value, (at_ms, None), seq, source);
    }

    /// [`Snapshot::record`] of a value whose payload says when it was taken (`taken_ms`, the
    /// plant's `time_json`): `at_ms` stays when it was read, and `taken_ms` only dates what is
    /// shown — a retained message (`seq` 0) gets an age, a live one is shown as old as it says.
    /// A time after `at_ms` (a device clock ahead of ours) dates nothing.
    pub fn record_taken(
        &mut self,
        name: &str,
        value: Value,
        (at_ms, taken_ms): (i64, Option<i64>),
        seq: u64,
        source: impl FnOnce() -> String,
    ) {
        let taken_ms = taken_ms.filter(|t| *t <= at_ms);
        if let Value::Number(n) = value
            && !n.is_finite()
        {
            let why = format!("{} read {n}, which is not a number", source());
            return self.no_value(name, why, at_ms, seq);
        }
        let reading = match self.readings.get_mut(name) {
            Some(r) => r,
            None => self.readings.entry(name.to_string()).or_default(),
        };
        reading.failed = None;
        match &mut reading.good {
            Some(v) => (v.value, v.at_ms, v.seq, v.taken_ms) = (value, at_ms, seq, taken_ms),
            None => {
                reading.good = Some(SignalValue {
                    value,
                    at_ms,
                    source: source(),
                    seq,
                    taken_ms,
                })
            }
        }
    }

    /// Records a failed read of `name`: the device refused it (`code`, `why`) at `at_ms`, read
    /// `seq`. A run of failures keeps the moment it began.
    pub fn refuse(&mut self, name: &str, code: ErrorCode, why: String, at_ms: i64, seq: u64) {
        self.fail(name, code, why, at_ms, seq, false);
    }

    /// Records that the device answered on `name` with something that is no value (`why`: what
    /// came and why it is none, e.g. `a message on lab/heater/state held "None", in neither
    /// true_values nor false_values`): from here on the signal is unreadable for every
    /// consumer — alarms fail safe, `requires` refuses, the judge waits — until a value comes.
    pub fn no_value(&mut self, name: &str, why: String, at_ms: i64, seq: u64) {
        self.fail(name, ErrorCode::NoFeedback, why, at_ms, seq, true);
    }

    fn fail(&mut self, name: &str, code: ErrorCode, why: String, at_ms: i64, seq: u64, nv: bool) {
        let reading = match self.readings.get_mut(name) {
            Some(r) => r,
            None => self.readings.entry(name.to_string()).or_default(),
        };
        // A run is of one kind: refusals turning into payloads without a value start anew.
        let since_ms = (reading.failed.as_ref())
            .filter(|f| f.no_value == nv)
            .map_or(at_ms, |f| f.since_ms);
        reading.failed = Some(Failure {
            code,
            why,
            since_ms,
            seq,
            no_value: nv,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::Snapshot;
    use super::*;

    fn online() -> Snapshot {
        Snapshot {
            liveness: Liveness::Online,
            ..Snapshot::before_first_read()
        }
    }

    const RULE: Freshness = Freshness {
        now_ms: 10_000,
        within_ms: Some(2_000),
    };

    #[test]
    fn a_failed_read_takes_the_current_value_away_and_keeps_it_as_history() {
        let mut snap = online();
        snap.record("temp_c", Value::Number(45.0), 9_000, 3, || "input:4".into());
        assert_eq!(
            snap.usable("temp_c", RULE).map(|v| v.value),
            Ok(Value::Number(45.0))
        );
        let nak = || "input:4 answered exception 4".to_string();
        snap.refuse("temp_c", ErrorCode::BusNak, nak(), 9_500, 4);
        snap.refuse("temp_c", ErrorCode::BusNak, nak(), 9_600, 5);
        let r = snap.reading("temp_c").expect("read");
        assert_eq!(r.current(), None, "no current value once a read failed");
        assert_eq!(r.last_good().map(|v| v.at_ms), Some(9_000), "history kept");
        assert_eq!(r.failure().map(|f| (f.since_ms, f.seq)), Some((9_500, 5)));
        assert!(matches!(
            snap.usable("temp_c", RULE),
            Err(Unusable::Unreadable(_, Some(_)))
        ));
        assert_eq!(snap.read_after("temp_c", 0), None, "no evidence either");
        assert!(snap.usable_values(RULE).is_empty());
        snap.record("temp_c", Value::Number(85.0), 9_700, 6, String::new);
        assert_eq!(
            snap.read_after("temp_c", 5).map(|v| v.value),
            Some(Value::Number(85.0))
        );
        assert_eq!(
            snap.reading("temp_c").unwrap().last_good().unwrap().source,
            "input:4"
        );
        assert!(!snap.has_unreadable());
    }

    /// A payload's time dates what is shown only: a value read at 9_900 whose payload says it
    /// was taken at 5_000 is decided on as read at 9_900 (a device clock behind ours holds
    /// nothing back) and shown 5 s old; a retained one gets an age but still never decides; a
    /// time after the read (a clock ahead) dates nothing.
    #[test]
    fn a_payload_s_time_dates_what_is_shown_never_what_is_decided() {
        let mut snap = online();
        snap.record_taken(
            "live",
            Value::Bool(true),
            (9_900, Some(5_000)),
            3,
            String::new,
        );
        let v = snap.usable("live", RULE).expect("decided on its read time");
        assert_eq!((v.at_ms, v.shown_ms()), (9_900, Some(5_000)));
        snap.record_taken(
            "ret",
            Value::Bool(true),
            (9_900, Some(1_000)),
            0,
            String::new,
        );
        let Err(Unusable::Retained(v)) = snap.usable("ret", RULE) else {
            panic!("a retained value never decides")
        };
        assert_eq!(v.shown_ms(), Some(1_000));
        let said = Unusable::Retained(v).describe("ret", 10_000, |t| t.to_string());
        assert!(said.contains("retained message taken 9.0 s ago"), "{said}");
        // A clock ahead of ours: retained, no age; live, shown as read.
        let ahead = (9_950, Some(60_000));
        let shown = |snap: &mut Snapshot, seq| {
            snap.record_taken("ahead", Value::Bool(true), ahead, seq, String::new);
            let v = snap.reading("ahead").and_then(Reading::last_good);
            v.and_then(SignalValue::shown_ms)
        };
        assert_eq!(shown(&mut snap, 0), None);
        assert_eq!(shown(&mut snap, 4), Some(9_950));
    }

    #[test]
    fn a_value_older_than_the_window_retained_or_of_a_silent_device_is_not_usable() {
        let mut snap = online();
        snap.record("a", Value::Bool(true), 7_999, 1, String::new);
        snap.record("b", Value::Bool(true), 8_000, 1, String::new);
        snap.record("r", Value::Bool(true), 9_999, 0, String::new);
        assert!(matches!(snap.usable("a", RULE), Err(Unusable::Stale(_))));
        assert!(
            snap.usable("b", RULE).is_ok(),
            "exactly the window is still in it"
        );
        assert!(matches!(snap.usable("r", RULE), Err(Unusable::Retained(_))));
        assert_eq!(snap.usable("z", RULE), Err(Unusable::NoValue));
        let any_age = Freshness {
            within_ms: None,
            ..RULE
        };
        assert!(
            snap.usable("a", any_age).is_ok(),
            "a device reporting changes"
        );
        snap.liveness = Liveness::Offline;
        assert_eq!(
            snap.usable("b", RULE),
            Err(Unusable::Silent(Liveness::Offline))
        );
    }

    #[test]
    fn an_unusable_value_says_which_signal_why_and_since_when() {
        let mut snap = online();
        snap.record("temp_c", Value::Number(45.0), 6_000, 1, String::new);
        snap.refuse(
            "temp_c",
            ErrorCode::BusNak,
            "input:4 answered exception 4".into(),
            7_000,
            2,
        );
        let why = snap.usable("temp_c", RULE).unwrap_err();
        let text = why.describe("devices.probe.temp_c", 10_000, |ms| format!("t{ms}"));
        assert_eq!(
            text,
            "devices.probe.temp_c cannot be read since t7000 (input:4 answered exception 4); \
             its last value, 45, is 4.0 s old"
        );
        assert_eq!(why.code(), Some(&ErrorCode::BusNak));
    }

    #[test]
    fn a_number_that_is_no_number_takes_the_value_away_whatever_the_decoder() {
        let mut snap = online();
        snap.record("temp_c", Value::Number(45.0), 9_000, 1, || "input:4".into());
        for (n, seq) in [(f64::NAN, 2), (f64::INFINITY, 3), (f64::NEG_INFINITY, 4)] {
            snap.record("temp_c", Value::Number(n), 9_500, seq, || "input:4".into());
            let why = snap.usable("temp_c", RULE).unwrap_err();
            assert!(matches!(why, Unusable::Unreadable(f, Some(_)) if f.no_value));
            assert_eq!(snap.read_after("temp_c", 0), None);
        }
        let text = (snap.usable("temp_c", RULE).unwrap_err())
            .describe("temp_c", 10_000, |ms| format!("t{ms}"));
        assert_eq!(
            text,
            "temp_c has had no value since t9500 (input:4 read -inf, which is not a number); \
             its last value, 45, is 1.0 s old"
        );
        snap.record("temp_c", Value::Number(85.0), 9_900, 5, String::new);
        assert_eq!(
            snap.usable("temp_c", RULE).map(|v| v.value),
            Ok(Value::Number(85.0))
        );
    }
}
