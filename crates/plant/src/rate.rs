//! Operation-rate limits (`max_rate = "6/min"`, `max_burst = 2`): contacts and motors are rated
//! for so many operations an hour, and an agent in a retry loop does not know it.

/// At most `burst` operations at once, refilled at `count` per `period_s` (a token bucket).
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Operations per period.
    pub count: u32,
    /// The period, in seconds.
    pub period_s: f64,
    /// How many may go at once (default: `count`).
    pub burst: u32,
    /// As written, for messages: `6/min`.
    pub text: String,
}

impl RateLimit {
    /// Parses `N/s`, `N/min` or `N/h` (also `N/second`, `N/minute`, `N/hour`), with an optional
    /// burst. `Err` says what to write.
    pub fn parse(text: &str, burst: Option<u32>) -> Result<RateLimit, String> {
        let wrong = || {
            format!(
                "max_rate = {text:?} is not a rate; write operations per period, like \"6/min\", \"1/s\" or \"100/h\""
            )
        };
        let (n, unit) = text.split_once('/').ok_or_else(wrong)?;
        let count: u32 = n.trim().parse().map_err(|_| wrong())?;
        let period_s = match unit.trim() {
            "s" | "sec" | "second" => 1.0,
            "min" | "minute" => 60.0,
            "h" | "hour" => 3600.0,
            _ => return Err(wrong()),
        };
        if count == 0 {
            return Err(format!(
                "max_rate = {text:?} allows nothing; write at least 1 per period, or remove max_rate"
            ));
        }
        let burst = burst.unwrap_or(count);
        if burst == 0 {
            return Err(
                "max_burst = 0 allows nothing; write at least 1, or remove max_burst".into(),
            );
        }
        Ok(RateLimit {
            count,
            period_s,
            burst,
            text: text.trim().to_string(),
        })
    }

    /// Seconds between two operations at the sustained rate.
    pub fn interval_s(&self) -> f64 {
        self.period_s / f64::from(self.count)
    }

    /// How far back the history of operations matters: two full buckets' refill time.
    pub fn horizon_s(&self) -> f64 {
        2.0 * f64::from(self.burst) * self.interval_s()
    }

    /// Given the times (seconds, ascending) of the operations done so far within
    /// [`RateLimit::horizon_s`], whether one more may go at `now`: `None`, or `Some(seconds)`
    /// to wait. A generic cell rate algorithm: each operation moves a theoretical arrival time
    /// one interval on; one may go while that time is at most `burst - 1` intervals ahead.
    pub fn wait_s(&self, done: &[f64], now: f64) -> Option<f64> {
        let t = self.interval_s();
        let slack = f64::from(self.burst - 1) * t;
        let mut tat = f64::NEG_INFINITY;
        for at in done {
            tat = tat.max(*at) + t;
        }
        let tat = tat.max(now);
        let wait = tat - slack - now;
        (wait > 1e-9).then_some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_goes_at_once_then_one_per_interval() {
        let r = RateLimit::parse("6/min", None).unwrap();
        assert_eq!((r.count, r.period_s, r.burst), (6, 60.0, 6));
        let mut done = Vec::new();
        for _ in 0..6 {
            assert_eq!(r.wait_s(&done, 0.0), None);
            done.push(0.0);
        }
        let wait = r.wait_s(&done, 0.0).unwrap();
        assert!((wait - 10.0).abs() < 1e-6, "{wait}");
        assert_eq!(r.wait_s(&done, 10.0), None);
        let one = RateLimit::parse("1/s", Some(1)).unwrap();
        assert!((one.wait_s(&[5.0], 5.25).unwrap() - 0.75).abs() < 1e-9);
        for bad in ["6", "6/day", "x/min", "0/min"] {
            assert!(RateLimit::parse(bad, None).is_err(), "{bad}");
        }
        assert!(RateLimit::parse("1/s", Some(0)).is_err());
    }
}
