//! What `closedloop report` counts for one tool, added up one journal row at a time so a long
//! history is never held whole: only the durations a median needs are kept.

use closedloop_engine::{ErrorCode, Status};
use closedloop_journal::CommandRow;
use std::collections::BTreeMap;

/// Failed codes that say nobody read what the hardware did: the device went silent, a frame
/// did not verify (the write may have taken effect), or the gateway restarted. Such an ending
/// is the gateway giving up, not the hardware's answer, so it has no time to truth.
const NOT_TRUTH: [ErrorCode; 3] = [
    ErrorCode::DeviceOffline,
    ErrorCode::CrcMismatch,
    ErrorCode::Interrupted,
];

/// The counts of one tool over the report's period.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tally {
    /// Every journaled call: accepted or rejected.
    pub calls: u32,
    /// Accepted calls by where they are now: `completed`, `failed`, `timeout`, `sent`,
    /// `cancelled`, or `open` (`accepted` or `running`: not ended yet).
    pub outcomes: BTreeMap<&'static str, u32>,
    /// Rejected calls by error code (`INVALID_PARAMS`, `INTERLOCK`, `DEVICE_BUSY`, ...).
    pub rejected: BTreeMap<String, u32>,
    /// Accepted calls that ended with a code, by `(status, code)`: `failed MOTOR_STALL`,
    /// `cancelled DEADMAN`, `timeout TIMEOUT`.
    pub ended: BTreeMap<(String, String), u32>,
    /// Milliseconds from accepted to the final status the hardware decided (see
    /// [`time_to_truth`]), one per such command, in journal order.
    pub truth_ms: Vec<u32>,
}

impl Tally {
    /// Counts one journaled command of this tool.
    pub(crate) fn add(&mut self, c: &CommandRow) {
        self.calls += 1;
        let status = Status::parse(&c.status);
        let code = c.error_code.clone().unwrap_or_else(|| "-".into());
        if status == Some(Status::Rejected) {
            *self.rejected.entry(code).or_default() += 1;
            return;
        }
        let column = match status {
            Some(s) if s.is_terminal() => s.as_str(),
            _ => "open",
        };
        *self.outcomes.entry(column).or_default() += 1;
        if c.error_code.is_some() {
            *self.ended.entry((c.status.clone(), code)).or_default() += 1;
        }
        if let Some(ms) = time_to_truth(c) {
            self.truth_ms.push(ms);
        }
    }

    /// Calls not rejected.
    pub(crate) fn accepted(&self) -> u32 {
        self.calls - self.rejected.values().sum::<u32>()
    }

    /// Accepted calls whose outcome is `column` (a status, or `open`).
    pub(crate) fn outcome(&self, column: &str) -> u32 {
        self.outcomes.get(column).copied().unwrap_or(0)
    }

    /// Calls rejected `INVALID_PARAMS`.
    pub(crate) fn invalid_params(&self) -> u32 {
        self.rejected
            .get(ErrorCode::InvalidParams.as_str())
            .copied()
            .unwrap_or(0)
    }

    /// The median of [`Tally::truth_ms`] (for an even count, the mean of the middle two), or
    /// `None` when no command ended so.
    pub(crate) fn median_truth_ms(&self) -> Option<u32> {
        let mut v = self.truth_ms.clone();
        v.sort_unstable();
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some(((u64::from(v[n / 2 - 1]) + u64::from(v[n / 2])) / 2) as u32),
        }
    }
}

/// How long the caller waited for the truth: from `accepted` to the final status, for a
/// command whose final status the hardware decided — `completed` (the feedback or the
/// readback confirmed it), or `failed` on the device's own answer (a `fail_when` signal, an
/// alarm, a refusal, feedback that never moved). Left out: `timeout` (the clock decided),
/// `sent` (nothing can confirm), `cancelled` (the caller decided), `rejected` (nothing was
/// written), commands not ended yet, and `failed` with a [`NOT_TRUTH`] code.
///
/// A finished command's row is last written with its final status, so `updated_at_ms` is
/// when that status was journaled.
pub(crate) fn time_to_truth(c: &CommandRow) -> Option<u32> {
    let decided = match Status::parse(&c.status)? {
        Status::Completed => true,
        Status::Failed => c
            .error_code
            .as_deref()
            .is_none_or(|code| !NOT_TRUTH.contains(&ErrorCode::parse(code))),
        _ => false,
    };
    let ms = (c.updated_at_ms - c.accepted_at_ms).clamp(0, i64::from(u32::MAX));
    decided.then_some(ms as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `move_to` command, as the report tests build them.
    fn row(status: &str, code: Option<&str>, took_ms: i64) -> CommandRow {
        crate::report::tests::row("move_to", status, code, took_ms)
    }

    #[test]
    fn only_endings_the_hardware_decided_have_a_time_to_truth() {
        assert_eq!(time_to_truth(&row("completed", None, 40)), Some(40));
        assert_eq!(
            time_to_truth(&row("failed", Some("MOTOR_STALL"), 700)),
            Some(700)
        );
        assert_eq!(time_to_truth(&row("failed", Some("BUS_NAK"), 5)), Some(5));
        for code in ["DEVICE_OFFLINE", "CRC_MISMATCH", "INTERRUPTED"] {
            assert_eq!(time_to_truth(&row("failed", Some(code), 5)), None, "{code}");
        }
        for (status, code) in [
            ("timeout", Some("TIMEOUT")),
            ("sent", None),
            ("cancelled", Some("DEADMAN")),
            ("rejected", Some("INVALID_PARAMS")),
            ("running", None),
            ("accepted", None),
        ] {
            assert_eq!(time_to_truth(&row(status, code, 5)), None, "{status}");
        }
        // A clock stepped back between the two writes is not a negative wait.
        assert_eq!(time_to_truth(&row("completed", None, -3)), Some(0));
    }

    #[test]
    fn a_tally_counts_outcomes_rejections_and_codes() {
        let mut t = Tally::default();
        for r in [
            row("completed", None, 30),
            row("completed", None, 10),
            row("failed", Some("MOTOR_STALL"), 700),
            row("failed", Some("INTERRUPTED"), 9_000),
            row("running", None, 0),
            row("rejected", Some("INVALID_PARAMS"), 0),
            row("rejected", Some("INVALID_PARAMS"), 0),
            row("rejected", Some("INTERLOCK"), 0),
        ] {
            t.add(&r);
        }
        assert_eq!((t.calls, t.accepted(), t.invalid_params()), (8, 5, 2));
        assert_eq!(
            (
                t.outcome("completed"),
                t.outcome("failed"),
                t.outcome("open")
            ),
            (2, 2, 1)
        );
        assert_eq!(t.outcome("timeout"), 0);
        assert_eq!(t.rejected["INTERLOCK"], 1);
        assert_eq!(
            t.ended[&("failed".to_string(), "MOTOR_STALL".to_string())],
            1
        );
        assert_eq!(t.truth_ms, vec![30, 10, 700]);
        assert_eq!(t.median_truth_ms(), Some(30));
        t.truth_ms.push(50);
        assert_eq!(t.median_truth_ms(), Some(40));
        assert_eq!(Tally::default().median_truth_ms(), None);
    }
}
