//! What the shell tells the machine: the action's profile, the events, and what a fresh
//! reading said.

use crate::contract::ErrorCode;

/// How the outcome of an action can be checked (the plant's `verification`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// An independent signal senses the effect.
    Feedback,
    /// The written registers are read back; the effect itself is not sensed.
    Readback,
    /// Nothing can be read back.
    None,
}

/// What the machine needs to know about the action, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Verification level.
    pub check: Check,
    /// Whether the write may be re-sent after a transport error or a busy answer.
    pub idempotent: bool,
    /// Whether the action has a cancel plan (stop) to write on cancel, failure, timeout.
    pub has_cancel: bool,
    /// Whether `started_when` must be seen once before `done_when` counts.
    pub has_started_when: bool,
    /// How long `done_when` must hold across consecutive fresh reads.
    pub hold_ms: u64,
    /// Most write attempts for an idempotent action (the deadline bounds them too).
    pub max_attempts: u32,
    /// `done_when` reads only what the action itself writes: when it holds, the write read
    /// back — a readback completion, never feedback (`closedloop_plant::Action::readback_only`).
    pub readback_only: bool,
}

/// One fresh read, already judged by the shell against the action's expressions.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Milliseconds of the read on the gateway's clock (a monotonic base: for `hold_ms`).
    pub at_ms: u64,
    /// `done_when` (or the readback comparison) holds.
    pub done: bool,
    /// The first `fail_when` code whose expression holds.
    pub failed: Option<String>,
    /// `started_when` holds.
    pub started: bool,
    /// The signals named in `done_when` differ from their values at dispatch.
    pub moved: bool,
    /// `done_when` already held at dispatch and this read came sooner than `expect_s` after the
    /// acknowledgement: a value that has not had time to change cannot confirm anything (a relay
    /// with swapped contacts reads "closed" until it pulls in). `fail_when` still counts.
    pub early: bool,
    /// `stopped_when` holds (or a `started_when` no longer does): the device stands still. A
    /// recovered command that reads this short of `done_when` is over — its device stopped
    /// during the restart — and ends at once instead of waiting out its journaled deadline.
    pub stopped: bool,
    /// Every feedback value of the read (`done_when`'s signals) was taken at least `expect_s`
    /// after the acknowledgement: the feedback has had its expected time to move. Only such a read can show it "never moved".
    pub settled: bool,
    /// Every signal `done_when` reads had a value at dispatch. Without one (a feedback register
    /// that never answered before the write), an unchanged-looking read proves nothing: the
    /// command cannot be said to have "never moved".
    pub baseline_known: bool,
    /// `done_when` already held on the fresh read at dispatch: if it still holds and nothing
    /// moved in between, the device was already in that state and nothing shows it acted.
    pub already: bool,
}

/// Something that happened to the command.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Validation passed and the command may be journaled as accepted.
    Accept,
    /// Validation failed; the command never reaches the device. Before acceptance it ends
    /// `rejected`; once accepted — by another gateway, the owner's checks refusing it when it
    /// takes the command over — it ends `failed` with the code.
    Reject { code: ErrorCode, detail: String },
    /// The device (its exclusive group) is ours: write the plan.
    Dispatch,
    /// The command waited in the queue longer than `queue_timeout_s`.
    QueueExpired,
    /// Every write of the plan was acknowledged by the device.
    WriteAcked,
    /// A write of the plan failed. `transient` = a transport error or a busy answer, after which
    /// an idempotent write may be re-sent; `maybe_applied` = the write may have reached the
    /// device (no answer, garbled answer), so a cancel plan must be written for safety.
    WriteFailed {
        code: ErrorCode,
        detail: String,
        transient: bool,
        maybe_applied: bool,
    },
    /// A fresh read, judged.
    Reading(Reading),
    /// The device stopped answering (liveness went offline).
    Offline { detail: String },
    /// A signal the criteria read could not be read after the acknowledgement: the device
    /// refused it (`code`: its exception's), so nothing can confirm the command.
    Unreadable { code: ErrorCode, detail: String },
    /// A signal the criteria read answered after the acknowledgement with something that is no
    /// value (an empty or `None` payload, NaN): nothing decided, but a deadline reached before a
    /// value came is `NO_FEEDBACK` with this text rather than "reported nothing".
    NoValue { detail: String },
    /// The supervision deadline passed; `answering`: the device was online then (it answers,
    /// though nothing it reported decided the command).
    Deadline { answering: bool },
    /// `cancel_command` was called.
    CancelRequested,
    /// The cancel plan was acknowledged.
    CancelWritten,
    /// The cancel plan could not be written.
    CancelFailed { code: ErrorCode, detail: String },
    /// The gateway is shutting down.
    Shutdown,
    /// A dead-man action's caller stopped renewing it within `keepalive_s`.
    KeepaliveLapsed,
    /// A standing alarm that blocks the device became active.
    AlarmRaised { name: String, detail: String },
    /// Start-up recovery found this command unfinished in the journal (docs/architecture.md).
    Restarted(Found),
}

/// What start-up recovery found of a command the journal left unfinished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The device acknowledged the write (`running`): supervised until its journaled deadline.
    Acknowledged,
    /// Dispatched but not acknowledged: the write may or may not have arrived. With a cancel
    /// plan it is stopped; without one nothing can be done.
    InFlight,
    /// Accepted but never sent: it is not sent late.
    NotSent,
    /// Acknowledged, but the plant no longer declares the action as it was.
    Undeclared,
}
