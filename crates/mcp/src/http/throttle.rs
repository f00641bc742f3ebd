//! Refusal log lines, at most one a second per kind: a client hammering the endpoint with bad
//! tokens or a full server must not fill the log (or the disk behind `--log-file`). The lines
//! left out are counted and the next line says how many.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One kind of refusal (401, 403, 503).
pub(super) struct Throttle {
    start: Instant,
    /// Milliseconds since `start` of the last line logged, plus one (0: none yet).
    last_ms: AtomicU64,
    /// Lines left out since then.
    suppressed: AtomicU64,
}

/// At most one line per kind in this interval.
const EVERY: Duration = Duration::from_secs(1);

impl Throttle {
    pub(super) const fn new_at(start: Instant) -> Throttle {
        Throttle {
            start,
            last_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when a line may be logged now (`n` lines were left out before it), `None`
    /// when this one is left out.
    pub(super) fn allow(&self) -> Option<u64> {
        let now = self.start.elapsed().as_millis() as u64 + 1;
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= EVERY.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// The throttles of the refusals (401, 403, 503, and sessions over their cap), shared by every
/// endpoint of the process.
pub(super) fn unauthorized() -> &'static Throttle {
    static T: std::sync::OnceLock<Throttle> = std::sync::OnceLock::new();
    T.get_or_init(|| Throttle::new_at(Instant::now()))
}

/// See [`unauthorized`].
pub(super) fn forbidden() -> &'static Throttle {
    static T: std::sync::OnceLock<Throttle> = std::sync::OnceLock::new();
    T.get_or_init(|| Throttle::new_at(Instant::now()))
}

/// See [`unauthorized`].
pub(super) fn busy() -> &'static Throttle {
    static T: std::sync::OnceLock<Throttle> = std::sync::OnceLock::new();
    T.get_or_init(|| Throttle::new_at(Instant::now()))
}

/// See [`unauthorized`]: addresses held back after failed guesses (`guessing.rs`).
pub(super) fn held_back() -> &'static Throttle {
    static T: std::sync::OnceLock<Throttle> = std::sync::OnceLock::new();
    T.get_or_init(|| Throttle::new_at(Instant::now()))
}

/// See [`unauthorized`].
pub(super) fn sessions() -> &'static Throttle {
    static T: std::sync::OnceLock<Throttle> = std::sync::OnceLock::new();
    T.get_or_init(|| Throttle::new_at(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_logs_one_line_and_counts_the_rest() {
        let t = Throttle::new_at(Instant::now());
        assert_eq!(t.allow(), Some(0));
        for _ in 0..1000 {
            assert_eq!(t.allow(), None);
        }
        // A second later the next line says how many were left out.
        let earlier = Throttle::new_at(Instant::now() - Duration::from_secs(5));
        earlier.last_ms.store(1, Ordering::Relaxed);
        earlier.suppressed.store(1000, Ordering::Relaxed);
        assert_eq!(earlier.allow(), Some(1000));
    }
}
