//! Time for the engine: one monotonic base mapped to wall-clock milliseconds.
//!
//! Timestamps in results and the journal are derived from `tokio::time::Instant`, so that under
//! `tokio::time::pause()` a test's timeline advances with the paused clock and stays consistent
//! with deadlines. Formatting is done here (RFC 3339, UTC, milliseconds, `Z`) rather than pulling in
//! a date crate for one function.

use closedloop_contract::calendar::civil_from_days;
pub use closedloop_contract::calendar::days_from_civil;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Maps monotonic instants to wall-clock milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_wall_ms: i64,
    base: Instant,
}

impl Clock {
    /// A clock whose wall time is the system's at creation.
    pub fn new() -> Clock {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Clock {
            base_wall_ms: wall,
            base: Instant::now(),
        }
    }

    /// Wall-clock milliseconds now.
    pub fn now_ms(&self) -> i64 {
        self.wall_ms(Instant::now())
    }

    /// Wall-clock milliseconds of an instant.
    pub fn wall_ms(&self, at: Instant) -> i64 {
        let delta = if at >= self.base {
            at.duration_since(self.base).as_millis() as i64
        } else {
            -(self.base.duration_since(at).as_millis() as i64)
        };
        self.base_wall_ms + delta
    }

    /// The instant of a wall-clock time (for journaled deadlines after a restart).
    pub fn instant_of(&self, wall_ms: i64) -> Instant {
        let delta = wall_ms - self.base_wall_ms;
        if delta >= 0 {
            self.base + std::time::Duration::from_millis(delta as u64)
        } else {
            self.base
                .checked_sub(std::time::Duration::from_millis((-delta) as u64))
                .unwrap_or(self.base)
        }
    }

    /// Monotonic milliseconds since the clock's creation (for `hold_ms`).
    pub fn mono_ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_millis() as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Formats wall-clock milliseconds as `2026-11-29T16:00:00.123Z`.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Reads back what [`rfc3339`] writes (`2026-11-29T16:00:00.123Z`, the milliseconds optional):
/// the times the journal keeps. Anything else — another zone, a missing field, a day that does
/// not exist — is `None`, never a guess.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let num = |t: &str, len: usize| {
        (t.len() == len && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse::<i64>().ok())?
    };
    let mut d = date.split('-');
    let (y, m, day) = (num(d.next()?, 4)?, num(d.next()?, 2)?, num(d.next()?, 2)?);
    let (hms, millis) = match time.split_once('.') {
        Some((hms, ms)) => (hms, num(ms, 3)?),
        None => (time, 0),
    };
    let mut t = hms.split(':');
    let (h, mi, sec) = (num(t.next()?, 2)?, num(t.next()?, 2)?, num(t.next()?, 2)?);
    if d.next().is_some()
        || t.next().is_some()
        || !(1..=12).contains(&m)
        || h > 23
        || mi > 59
        || sec > 59
    {
        return None;
    }
    let days = days_from_civil(y, m as u32, day as u32)?;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec) * 1000) + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_millis_and_z() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-29T16:00:00.123Z
        assert_eq!(rfc3339(1_764_432_000_123), "2025-11-29T16:00:00.123Z");
        assert_eq!(rfc3339(1_795_968_000_123), "2026-11-29T16:00:00.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn reads_back_what_it_writes_and_nothing_else() {
        for ms in [
            0,
            951_782_400_000,
            1_795_968_000_123,
            -86_400_001,
            4_102_444_800_999,
        ] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)), Some(ms), "{ms}");
        }
        assert_eq!(
            parse_rfc3339("2026-11-29T16:00:00Z"),
            Some(1_795_968_000_000)
        );
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-11-29T16:00:00+01:00",
            "2026-11-29 16:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T16:00:00.12Z",
            "",
            "Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn wall_time_follows_the_paused_clock() {
        let c = Clock::new();
        let t0 = c.now_ms();
        tokio::time::advance(std::time::Duration::from_millis(1500)).await;
        assert_eq!(c.now_ms() - t0, 1500);
        assert_eq!(c.wall_ms(c.instant_of(t0 + 10)), t0 + 10);
    }
}
