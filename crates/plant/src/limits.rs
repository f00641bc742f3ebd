//! The allowed ranges of the plant file's durations, periods and factors, checked at load.
//!
//! The engine turns these numbers into `Duration`s and deadlines on the request path, where a
//! value that is not finite or absurdly large panics (`Duration::from_secs_f64`) or overflows an
//! `Instant`. Refusing it at load, with the range and the fix, puts the problem in front of the
//! person who can fix the file instead of crashing a running command. The ranges are wide enough
//! for any real device (see `docs/plant-bounds.md`); consumers may rely on them after loading.

use std::fmt;

/// The allowed range of one number of the plant file: `min..=max`, or `(min, max]` when
/// `min_exclusive` (for a value that must be above 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    /// The key as written (`timeout_factor`).
    pub key: &'static str,
    /// The smallest allowed value (itself refused when `min_exclusive`).
    pub min: f64,
    /// Whether `min` itself is refused.
    pub min_exclusive: bool,
    /// The largest allowed value.
    pub max: f64,
    /// The unit, for messages: `ms`, `s`, or empty for a plain factor.
    pub unit: &'static str,
}

impl Limit {
    const fn new(key: &'static str, min: f64, max: f64, unit: &'static str) -> Limit {
        Limit {
            key,
            min,
            min_exclusive: false,
            max,
            unit,
        }
    }

    /// Whether `v` is allowed (never for NaN or an infinity).
    pub fn contains(&self, v: f64) -> bool {
        let above = if self.min_exclusive {
            v > self.min
        } else {
            v >= self.min
        };
        v.is_finite() && above && v <= self.max
    }

    /// Checks a number of seconds or a factor; the error names the value, the range and `fix`.
    pub(crate) fn check_f64(&self, v: f64, fix: &str) -> Result<(), String> {
        if self.contains(v) {
            return Ok(());
        }
        Err(self.refusal(&show(v), v.is_finite(), fix))
    }

    /// Checks a whole number of milliseconds; the error names the value, the range and `fix`.
    pub(crate) fn check_u64(&self, v: u64, fix: &str) -> Result<(), String> {
        if self.contains(v as f64) {
            return Ok(());
        }
        Err(self.refusal(&v.to_string(), true, fix))
    }

    fn refusal(&self, value: &str, finite: bool, fix: &str) -> String {
        let what = if finite {
            "is outside the allowed range"
        } else {
            "is not a finite number; the allowed range is"
        };
        format!("{} = {value} {what} {self}; {fix}", self.key)
    }
}

/// `1 to 100`, `0 to 600000 ms`, `above 0 up to 3600 s`.
impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min_exclusive {
            write!(f, "above {} up to {}", show(self.min), show(self.max))?;
        } else {
            write!(f, "{} to {}", show(self.min), show(self.max))?;
        }
        if !self.unit.is_empty() {
            write!(f, " {}", self.unit)?;
        }
        Ok(())
    }
}

/// A number as a person would write it: `1e300` rather than three hundred digits.
pub(crate) fn show(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v != 0.0 && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `timeout_factor` of an action: deadline = expect_s × factor + floor + poll. Below 1 an
/// action running as expected times out; above 100 a stuck one goes unnoticed for too long.
pub const TIMEOUT_FACTOR: Limit = Limit::new("timeout_factor", 1.0, 100.0, "");
/// `timeout_floor_ms` of an action: at most 10 minutes added to every deadline.
pub const TIMEOUT_FLOOR_MS: Limit = Limit::new("timeout_floor_ms", 0.0, 600_000.0, "ms");
/// `queue_timeout_s` of an action: a command waits at most an hour for its device.
pub const QUEUE_TIMEOUT_S: Limit = Limit::new("queue_timeout_s", 0.0, 3_600.0, "s");
/// `hold_ms` of an action: `done_when` must hold at most an hour.
pub const HOLD_MS: Limit = Limit::new("hold_ms", 0.0, 3_600_000.0, "ms");
/// `expect_s` of an action when it is a constant (an expression is checked when evaluated).
pub const EXPECT_S: Limit = Limit::new("expect_s", 0.0, 86_400.0, "s");
/// `poll_ms` of a device: from 1 ms to one read a minute.
pub const POLL_MS: Limit = Limit::new("poll_ms", 1.0, 60_000.0, "ms");
/// `liveness.max_silence_s` of a device: above 0, at most an hour.
pub const MAX_SILENCE_S: Limit = Limit {
    min_exclusive: true,
    ..Limit::new("max_silence_s", 0.0, 3_600.0, "s")
};
/// `timeout_ms` of a Modbus driver (the simulator checks its own, with the same range).
pub const TIMEOUT_MS: Limit = Limit::new("timeout_ms", 1.0, 600_000.0, "ms");
/// `cycle_ms` of a CAN write: how often a cyclic frame is re-sent.
pub const CYCLE_MS: Limit = Limit::new("cycle_ms", 1.0, 60_000.0, "ms");
/// `period_ms` of a simulated CAN node's status message.
pub const PERIOD_MS: Limit = Limit::new("period_ms", 1.0, 60_000.0, "ms");
/// `confirm_ttl_s` of the server: a confirmation token expires within a day.
pub const CONFIRM_TTL_S: Limit = Limit::new("confirm_ttl_s", 1.0, 86_400.0, "s");
/// `default_wait_s` of the server: the longest wait a tool call may ask for is 10 s.
pub const DEFAULT_WAIT_S: Limit = Limit::new("default_wait_s", 0.0, 10.0, "s");
/// `journal_key` of the server: the shortest key accepted, in bytes (128 bits; the journal's
/// `JournalKey::new` holds the same floor for keys that come from elsewhere).
pub const JOURNAL_KEY_MIN_BYTES: usize = 16;
/// `lease_s` of the server: a device lease lasts 1 s to 60 s; shorter is renewed faster than a
/// database round trip is sure to take, longer leaves a dead gateway's devices stranded longer.
pub const LEASE_S: Limit = Limit::new("lease_s", 1.0, 60.0, "s");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_values_read_as_written() {
        assert_eq!(TIMEOUT_FACTOR.to_string(), "1 to 100");
        assert_eq!(MAX_SILENCE_S.to_string(), "above 0 up to 3600 s");
        assert_eq!(show(1e300), "1e300");
        assert_eq!(show(0.5), "0.5");
        assert_eq!(show(f64::NAN), "nan");
        assert!(!MAX_SILENCE_S.contains(0.0));
        assert!(MAX_SILENCE_S.contains(3600.0));
        assert!(!TIMEOUT_FACTOR.contains(f64::INFINITY));
        assert_eq!(
            TIMEOUT_FACTOR.check_f64(f64::NAN, "fix it").unwrap_err(),
            "timeout_factor = nan is not a finite number; the allowed range is 1 to 100; fix it"
        );
        assert_eq!(
            POLL_MS.check_u64(0, "fix it").unwrap_err(),
            "poll_ms = 0 is outside the allowed range 1 to 60000 ms; fix it"
        );
    }
}
