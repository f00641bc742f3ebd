//! What the machine answers: effects for the shell to carry out, and the outcome of a
//! terminal status with its reason.

use super::Found;
use crate::contract::{ErrorCode, Status};

/// Why a command ended as it did; the shell renders it into `detail` with the evidence.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// `done_when` held on fresh reads (or the readback matched).
    Confirmed,
    /// `done_when` held on fresh reads after the acknowledgement, as it already did at dispatch,
    /// and its signals never moved in between: the device was already in that state, and
    /// nothing shows it acted.
    AlreadySo,
    /// Delivered to a device without feedback.
    Delivered,
    /// A `fail_when` expression held.
    FailSignal,
    /// The feedback never changed from its value at dispatch.
    NeverMoved,
    /// The feedback changed but never satisfied `done_when`.
    NotReached,
    /// `done_when` never held, and its signals had no value at dispatch to compare with: whether
    /// the feedback moved cannot be told.
    NoBaseline,
    /// No read taken after the expected duration (and issued after the acknowledgement)
    /// arrived before the deadline, and none showed movement: nothing shows whether the
    /// feedback moved. `answering`: the device was online all the same (it reported nothing on
    /// the criterion's signals: `NO_FEEDBACK`), else it gave no valid answer (`DEVICE_OFFLINE`).
    NoFreshRead { answering: bool },
    /// `done_when` already held at dispatch and on the reads that came sooner than the
    /// expected duration, but none taken after it arrived before the deadline: nothing
    /// confirms the device is still in that state (`answering` as for `NoFreshRead`). Not "the
    /// feedback never moved": it held.
    AlreadyUnconfirmed { answering: bool },
    /// A criterion signal could not be read after the acknowledgement; the text says which
    /// and why.
    Unreadable(String),
    /// The readback never matched what was written.
    ReadbackMismatch,
    /// Waited in the queue too long; nothing was written.
    QueueExpired,
    /// The driver or device refused or could not be reached; the text says how.
    Driver(String),
    /// The device went offline; the text says how.
    Offline(String),
    /// Cancelled; whether a stop was written.
    Cancelled { stop_written: bool, shutdown: bool },
    /// Cancel was requested, but the stop could not be written.
    CancelFailed(String),
    /// Rejected before reaching the device.
    Rejected(String),
    /// The gateway stopped or restarted before the command could be confirmed.
    Interrupted,
    /// closedloop's own supervision of the command failed (a panic: a bug in closedloop or in
    /// a driver): the panic's message, and what became of the stop. Nothing confirms what the
    /// device did.
    Crashed { why: String, stop: CrashStop },
    /// After a restart, fresh reads showed the device standing still short of `done_when`.
    StoppedShort,
    /// A dead-man action was not renewed in time; whether its stop was written.
    Deadman { stop_written: bool },
    /// A standing alarm blocking the device became active; the text says which and why.
    Alarm(String),
    /// Start-up recovery could not supervise this command; what it found.
    Restart(Found),
    /// Start-up recovery wrote the stop of a write that was on its way; `None` when the stop
    /// went out, else why it failed.
    RestartStop { failed: Option<String> },
}

/// What was done about a command whose supervisor panicked (`supervision/crash.rs`).
#[derive(Debug, Clone, PartialEq)]
pub enum CrashStop {
    /// Nothing had been sent to the device.
    NotSent,
    /// The write may have gone out, and the action has no cancel plan.
    NoPlan,
    /// The write may have gone out; the cancel plan (stop) was written.
    Written,
    /// The write may have gone out; the stop could not be written, for this reason.
    Failed(String),
}

/// A terminal outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The terminal status.
    pub status: Status,
    /// The error code, for `rejected`, `failed`, `timeout`, `cancelled`.
    pub code: Option<ErrorCode>,
    /// Why.
    pub reason: Reason,
    /// Decided by feedback read after the acknowledged write.
    pub verified: bool,
    /// For readback verification: whether the registers held the written value.
    pub readback_matched: Option<bool>,
}

impl Outcome {
    fn new(status: Status, code: Option<ErrorCode>, reason: Reason) -> Outcome {
        Outcome {
            status,
            code,
            reason,
            verified: false,
            readback_matched: None,
        }
    }

    /// `done_when` held on fresh feedback: completed, verified.
    pub fn confirmed() -> Outcome {
        Outcome {
            verified: true,
            ..Outcome::new(Status::Completed, None, Reason::Confirmed)
        }
    }

    /// `done_when` held on fresh feedback as it already did at dispatch: completed, verified
    /// (the state is confirmed), with `already: true` (nothing shows the device acted).
    pub fn already_so() -> Outcome {
        Outcome {
            verified: true,
            ..Outcome::new(Status::Completed, None, Reason::AlreadySo)
        }
    }

    /// The written values read back: completed, not verified (the effect was not sensed).
    pub fn read_back() -> Outcome {
        Outcome {
            readback_matched: Some(true),
            ..Outcome::new(Status::Completed, None, Reason::Confirmed)
        }
    }

    /// Delivered to a device that cannot report back.
    pub fn sent() -> Outcome {
        Outcome::new(Status::Sent, None, Reason::Delivered)
    }

    /// Refused before reaching the device.
    pub fn rejected(code: ErrorCode, reason: Reason) -> Outcome {
        Outcome::new(Status::Rejected, Some(code), reason)
    }

    /// Cancelled on request (or at shutdown), with or without a stop.
    pub fn cancelled(reason: Reason) -> Outcome {
        Outcome::new(Status::Cancelled, Some(ErrorCode::Cancelled), reason)
    }

    /// The deadline (or the queue wait) ran out.
    pub fn timeout(reason: Reason) -> Outcome {
        Outcome::new(Status::Timeout, Some(ErrorCode::Timeout), reason)
    }

    /// A `fail_when` held; verified when decided by feedback.
    pub fn fail_signal(code: ErrorCode, verified: bool) -> Outcome {
        Outcome {
            verified,
            ..Outcome::new(Status::Failed, Some(code), Reason::FailSignal)
        }
    }

    /// The registers never read back what was written.
    pub fn readback_mismatch() -> Outcome {
        Outcome {
            readback_matched: Some(false),
            ..Outcome::new(
                Status::Failed,
                Some(ErrorCode::FeedbackMismatch),
                Reason::ReadbackMismatch,
            )
        }
    }

    /// A dead-man action ended for want of renewal.
    pub fn deadman(stop_written: bool) -> Outcome {
        Outcome::new(
            Status::Cancelled,
            Some(ErrorCode::Deadman),
            Reason::Deadman { stop_written },
        )
    }

    /// Failed with this code, not verified.
    pub fn failed(code: ErrorCode, reason: Reason) -> Outcome {
        Outcome::new(Status::Failed, Some(code), reason)
    }
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Journal the command as `accepted` (durably) and tell the caller.
    Journal(Status),
    /// Send the write plan; `attempt` > 1 is a retry (journal `retry`).
    Write { attempt: u32 },
    /// The plan was acknowledged: journal `device_ack`, poll at once.
    PollNow,
    /// Send the cancel plan (journal `cancel_sent`).
    WriteCancel,
    /// After a failure or timeout of an action with a cancel plan: write the plan (unless it was
    /// just written) and keep the device busy until `stopped_when` holds.
    SafeState { write_cancel: bool },
    /// The command ended: journal it, release the device (after any safe state), notify.
    Finish(Outcome),
}
