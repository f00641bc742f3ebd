//! The rules between an action's keys: what its verification mode needs and ignores, and the
//! ranges of its deadline and queue keys.

use super::action::ActionCheck;
use crate::action::{Verification, WriteEntry};
use crate::limits;
use crate::model::RawAction;
use std::collections::BTreeMap;

impl ActionCheck<'_> {
    /// What each verification mode needs, and keys a mode would silently ignore.
    pub(super) fn verification_rules(
        &mut self,
        raw: &RawAction,
        verification: Verification,
        done_when: Option<&crate::expr::Expr>,
        write: &[WriteEntry],
    ) {
        match verification {
            Verification::Feedback if raw.done_when.is_none() => self.err(
                "done_when",
                "verification = \"feedback\" (the default) needs done_when, the signal condition that shows the action took effect; add done_when, or set verification = \"readback\" or \"none\"",
            ),
            Verification::Feedback if done_when.is_some_and(|d| !d.reads_signals()) => self.err(
                "done_when",
                "done_when reads no signal, so it cannot confirm anything; name the signal that senses the effect, or set verification = \"none\"",
            ),
            Verification::None if raw.done_when.is_some() => self.err(
                "verification",
                "verification = \"none\" means nothing can confirm the action, but done_when is given; remove done_when or set verification = \"feedback\"",
            ),
            Verification::Readback if write.iter().any(|w| !matches!(w, WriteEntry::Register { .. } | WriteEntry::OpcuaNode { .. })) => self.err(
                "verification",
                "readback needs writes that can be read back (registers, OPC UA nodes); use verification = \"feedback\" with done_when, or \"none\"",
            ),
            _ => {}
        }
        if verification == Verification::Readback {
            // Readback compares the written values; done_when and started_when would be
            // accepted and then never looked at.
            for (key, given) in [
                ("done_when", raw.done_when.is_some()),
                ("started_when", raw.started_when.is_some()),
            ] {
                if given {
                    self.err(key, format!(
                        "{key} is never checked with verification = \"readback\": the written registers or nodes are read back and compared instead; remove {key}, or set verification = \"feedback\" so it is checked"
                    ));
                }
            }
            return;
        }
        if verification != Verification::None {
            return;
        }
        // With "none" the command ends as `sent` once the write is acknowledged: nothing is
        // read afterwards, so these keys would be accepted and then never act.
        let ignored = [
            ("started_when", raw.started_when.is_some()),
            ("hold_ms", raw.hold_ms.is_some_and(|h| h > 0)),
            ("fail_when", !raw.fail_when.is_empty()),
        ];
        for (key, given) in ignored {
            // Readback checks fail_when and hold_ms but never started_when.
            let modes = match key {
                "started_when" => "verification = \"feedback\" (with done_when)",
                _ => "verification = \"feedback\" (with done_when) or \"readback\"",
            };
            if given {
                self.err(key, format!(
                    "{key} is never checked with verification = \"none\": nothing is read back after the write, so the action ends as sent without looking at it; remove {key}, or set {modes} so it is checked"
                ));
            }
        }
    }

    /// The deadline and queue keys, each refused outside its range in [`crate::limits`].
    pub(super) fn timing(
        &mut self,
        raw: &RawAction,
        expect_s: Option<&crate::expr::Expr>,
    ) -> Timing {
        let t = Timing {
            timeout_factor: raw.timeout_factor.unwrap_or(3.0),
            timeout_floor_ms: raw.timeout_floor_ms.unwrap_or(100),
            queue_timeout_s: raw.queue_timeout_s.unwrap_or(10.0),
            hold_ms: raw.hold_ms.unwrap_or(0),
        };
        let checks = [
            limits::TIMEOUT_FACTOR.check_f64(t.timeout_factor, "the deadline is expect_s × timeout_factor + timeout_floor_ms + poll_ms: below 1 it cuts off actions that run as expected, above 100 a stuck action goes unnoticed; write a factor in that range, or remove timeout_factor for the default 3"),
            limits::TIMEOUT_FLOOR_MS.check_u64(t.timeout_floor_ms, "write the slack added to every deadline, in that range, or remove timeout_floor_ms for the default 100"),
            limits::QUEUE_TIMEOUT_S.check_f64(t.queue_timeout_s, "write how long a command may wait for its device, in that range, or remove queue_timeout_s for the default 10"),
            limits::HOLD_MS.check_u64(t.hold_ms, "write how long done_when must stay true, in that range, or remove hold_ms for the default 0"),
            match expect_s.and_then(constant) {
                Some(v) => limits::EXPECT_S.check_f64(v, "write how long the action is expected to take, 0 or more seconds (a number or an expression)"),
                None => Ok(()),
            },
        ];
        let keys = [
            "timeout_factor",
            "timeout_floor_ms",
            "queue_timeout_s",
            "hold_ms",
            "expect_s",
        ];
        for (key, check) in keys.into_iter().zip(checks) {
            if let Err(m) = check {
                self.err(key, m);
            }
        }
        t
    }
}

/// The deadline and queue keys of an action, defaults filled in.
pub(super) struct Timing {
    pub timeout_factor: f64,
    pub timeout_floor_ms: u64,
    pub queue_timeout_s: f64,
    pub hold_ms: u64,
}

/// The value of an expression that reads nothing (a constant), if it evaluates to a number.
fn constant(e: &crate::expr::Expr) -> Option<f64> {
    if e.reads_signals() || !e.params().is_empty() {
        return None;
    }
    let none = BTreeMap::new();
    let scope = crate::expr::Scope {
        signals: &none,
        params: &Default::default(),
        devices: &Default::default(),
        extra_strings: &[],
    };
    e.eval_f64(&scope).ok()
}
