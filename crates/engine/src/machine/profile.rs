//! What the pure machine needs to know of a plant's action ([`profile`]), and its view of a
//! verification level ([`AsCheck`]): the one mapping from the plant's words to the machine's,
//! used wherever a machine is made (submission, recovery, a take-over, a crash's ending).

use crate::machine::{Check, Profile};
use closedloop_plant::{Action, Verification};

/// Most write attempts of an idempotent action (the deadline bounds them too).
const MAX_ATTEMPTS: u32 = 5;

/// The machine's profile of `action`.
pub(crate) fn profile(action: &Action) -> Profile {
    Profile {
        check: action.verification.as_check(),
        idempotent: action.idempotent,
        has_cancel: !action.cancel.is_empty(),
        has_started_when: action.started_when.is_some(),
        hold_ms: action.hold_ms,
        max_attempts: if action.idempotent { MAX_ATTEMPTS } else { 1 },
        readback_only: action.readback_only.is_some(),
    }
}

/// The profile of an action this gateway's plant lacks, or of a command ended before it runs
/// (a take-over of a command ended elsewhere, an unsupervised restart): nothing to cancel, one
/// attempt.
pub(crate) fn inert() -> Profile {
    Profile {
        check: Check::Feedback,
        idempotent: false,
        has_cancel: false,
        has_started_when: false,
        hold_ms: 0,
        max_attempts: 1,
        readback_only: false,
    }
}

/// The machine's view of a verification level.
pub(crate) trait AsCheck {
    fn as_check(&self) -> Check;
}

impl AsCheck for Verification {
    fn as_check(&self) -> Check {
        match self {
            Verification::Feedback => Check::Feedback,
            Verification::Readback => Check::Readback,
            Verification::None => Check::None,
        }
    }
}
