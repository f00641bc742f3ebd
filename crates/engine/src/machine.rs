//! The command lifecycle as a pure state machine: `on(event) -> effects`.
//!
//! No I/O, no clock reads, no async: the shell (the `supervisor` module) reads the clock, evaluates
//! the plant's expressions against fresh reads, and feeds the verdicts in as events; the machine
//! decides what they mean and answers with effects for the shell to carry out (write, journal,
//! release). That split is what makes every transition of the lifecycle testable in microseconds.
//!
//! # Invariants
//! - A terminal status never changes: every event after it yields no effect.
//! - `Completed` is reachable only from a [`Reading`] the shell marked fresh (issued after the write
//!   was acknowledged) with `done` true — there is no other path to it.
//! - `verified` is true only for a `Completed` or a `fail_when` failure decided by feedback.

use crate::contract::{ErrorCode, Status};

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
}

/// One fresh read, already judged by the shell against the action's expressions.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Monotonic milliseconds of the read (for `hold_ms`).
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
}

/// Something that happened to the command.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Validation passed and the command may be journaled as accepted.
    Accept,
    /// Validation failed; the command never reaches the device.
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
    /// The supervision deadline passed.
    Deadline,
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

/// Why a command ended as it did; the shell renders it into `detail` with the evidence.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// `done_when` held on fresh reads (or the readback matched).
    Confirmed,
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
    /// feedback moved.
    NoFreshRead,
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

/// Internal phase, finer than the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Received,
    Queued,
    Writing,
    Supervising,
    Cancelling,
    Done,
}

/// One command's lifecycle state.
#[derive(Debug, Clone)]
pub struct Machine {
    profile: Profile,
    phase: Phase,
    status: Status,
    attempt: u32,
    started_seen: bool,
    hold_since: Option<u64>,
    moved: bool,
    /// A fresh read taken after the expected duration was judged: without one, "the feedback
    /// never moved" would rest on reads from before it could have moved.
    settled_seen: bool,
    /// A judged read said `done_when`'s signals had no value at dispatch.
    baseline_unknown: bool,
    cancel_requested: bool,
    cancel_for_shutdown: bool,
    /// The cancel was the dead-man's: the command ends `DEADMAN`, not `CANCELLED`.
    cancel_for_deadman: bool,
    recovered: bool,
    /// The cancel being written is recovery's stop of a write that was on its way.
    restart_stop: bool,
    last_write_error: Option<(ErrorCode, String)>,
}

impl Machine {
    /// A new command, before validation.
    pub fn new(profile: Profile) -> Machine {
        Machine {
            profile,
            phase: Phase::Received,
            status: Status::Accepted,
            attempt: 0,
            started_seen: false,
            hold_since: None,
            moved: false,
            settled_seen: false,
            baseline_unknown: false,
            cancel_requested: false,
            cancel_for_shutdown: false,
            cancel_for_deadman: false,
            recovered: false,
            restart_stop: false,
            last_write_error: None,
        }
    }

    /// A command found `running` (or dispatched) in the journal at start-up: it is supervised
    /// until its journaled deadline, and at that deadline it ends `failed` `INTERRUPTED` — the
    /// baseline needed to tell "never moved" from "moved" did not survive the restart.
    pub fn recovered(profile: Profile) -> Machine {
        let mut m = Machine::new(profile);
        m.on(Event::Restarted(Found::Acknowledged));
        m
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether the command is waiting for its device.
    pub fn is_queued(&self) -> bool {
        self.phase == Phase::Queued
    }

    /// Whether the shell should be feeding fresh readings.
    pub fn is_supervising(&self) -> bool {
        self.phase == Phase::Supervising
    }

    /// Whether the command has ended.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Feeds one event; returns what the shell must do, in order.
    pub fn on(&mut self, event: Event) -> Vec<Effect> {
        use Phase::*;
        match (self.phase, event) {
            (Done, _) => vec![],
            (Received, Event::Accept) => {
                self.phase = Queued;
                vec![Effect::Journal(Status::Accepted)]
            }
            (Received, Event::Reject { code, detail }) => {
                self.finish(Outcome::rejected(code, Reason::Rejected(detail)))
            }
            (Received, Event::Restarted(found)) => self.restarted(found),
            (Received, _) => vec![],

            (Queued, Event::Dispatch) => {
                self.phase = Writing;
                self.attempt = 1;
                vec![Effect::Write { attempt: 1 }]
            }
            (Queued, Event::QueueExpired) => self.finish(Outcome::timeout(Reason::QueueExpired)),
            (Queued, Event::CancelRequested) => {
                self.finish(Outcome::cancelled(Reason::Cancelled {
                    stop_written: false,
                    shutdown: false,
                }))
            }
            (Queued, Event::Offline { detail }) => self.finish(Outcome::failed(
                ErrorCode::DeviceOffline,
                Reason::Offline(detail),
            )),
            (Queued, Event::Shutdown) => {
                self.finish(Outcome::failed(ErrorCode::Interrupted, Reason::Interrupted))
            }
            (Queued, _) => vec![],

            (Writing, Event::WriteAcked) => self.acked(),
            (
                Writing,
                Event::WriteFailed {
                    code,
                    detail,
                    transient,
                    maybe_applied,
                },
            ) => {
                // Cancelled (or shutting down) while the write kept failing: never send it again.
                if self.cancel_requested {
                    let stop = maybe_applied && self.profile.has_cancel;
                    let fx = if self.cancel_for_shutdown {
                        self.finish(Outcome::failed(ErrorCode::Interrupted, Reason::Interrupted))
                    } else {
                        self.finish(Outcome::cancelled(Reason::Cancelled {
                            stop_written: stop,
                            shutdown: false,
                        }))
                    };
                    return with_stop(fx, stop);
                }
                if transient && self.profile.idempotent && self.attempt < self.profile.max_attempts
                {
                    self.attempt += 1;
                    self.last_write_error = Some((code, detail));
                    return vec![Effect::Write {
                        attempt: self.attempt,
                    }];
                }
                let fx = self.finish(Outcome::failed(code, Reason::Driver(detail)));
                with_stop(fx, maybe_applied && self.profile.has_cancel)
            }
            (Writing, Event::Deadline) => {
                let (code, detail) = self.last_write_error.take().unwrap_or((
                    ErrorCode::Timeout,
                    "the write was never acknowledged".into(),
                ));
                let fx = self.finish(Outcome::failed(code, Reason::Driver(detail)));
                with_stop(fx, self.profile.has_cancel)
            }
            (Writing, Event::Offline { detail }) => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::DeviceOffline,
                    Reason::Offline(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            (Writing, Event::CancelRequested) => {
                // The write is on the wire; stop it once it is acknowledged.
                self.cancel_requested = true;
                vec![]
            }
            (Writing, Event::Shutdown) => {
                self.cancel_requested = true;
                self.cancel_for_shutdown = true;
                vec![]
            }
            (Writing, _) => vec![],

            (Supervising, Event::Reading(r)) => self.reading(r),
            (Supervising, Event::Deadline) => self.deadline(),
            (Supervising, Event::Offline { detail }) => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::DeviceOffline,
                    Reason::Offline(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            (Supervising, Event::CancelRequested) => self.cancel(false),
            (Supervising, Event::AlarmRaised { name, detail }) => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::Signal(name),
                    Reason::Alarm(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            (Supervising, Event::KeepaliveLapsed) => {
                self.cancel_for_deadman = true;
                if self.profile.has_cancel {
                    self.phase = Phase::Cancelling;
                    vec![Effect::WriteCancel]
                } else {
                    self.finish(Outcome::deadman(false))
                }
            }
            (Supervising, Event::Shutdown) => {
                if self.profile.has_cancel {
                    self.cancel(true)
                } else {
                    // Nothing can stop it: leave it `running` in the journal so the next start
                    // keeps supervising it until its deadline.
                    vec![]
                }
            }
            (Supervising, _) => vec![],

            (Cancelling, Event::CancelWritten) if self.restart_stop => self.finish(
                Outcome::failed(ErrorCode::Interrupted, Reason::RestartStop { failed: None }),
            ),
            (Cancelling, Event::CancelFailed { detail, .. }) if self.restart_stop => {
                self.finish(Outcome::failed(
                    ErrorCode::Interrupted,
                    Reason::RestartStop {
                        failed: Some(detail),
                    },
                ))
            }
            (Cancelling, Event::CancelWritten) if self.cancel_for_deadman => {
                self.finish(Outcome::deadman(true))
            }
            (Cancelling, Event::CancelWritten) => {
                let shutdown = self.cancel_for_shutdown;
                self.finish(Outcome::cancelled(Reason::Cancelled {
                    stop_written: true,
                    shutdown,
                }))
            }
            (Cancelling, Event::CancelFailed { code, detail }) => {
                self.finish(Outcome::failed(code, Reason::CancelFailed(detail)))
            }
            (Cancelling, _) => vec![],
        }
    }

    fn acked(&mut self) -> Vec<Effect> {
        // A shutdown cannot stop an action without a cancel plan: it stays `running` in the
        // journal and the next start supervises it. Any other pending cancel is honoured now.
        let stop = self.cancel_requested && (self.profile.has_cancel || !self.cancel_for_shutdown);
        if self.profile.check == Check::None && !stop {
            return self.finish(Outcome::sent());
        }
        self.phase = Phase::Supervising;
        self.status = Status::Running;
        let mut fx = vec![Effect::Journal(Status::Running), Effect::PollNow];
        if stop {
            fx.extend(self.cancel(self.cancel_for_shutdown));
        }
        fx
    }

    fn reading(&mut self, r: Reading) -> Vec<Effect> {
        let feedback = self.profile.check == Check::Feedback;
        if let Some(code) = r.failed {
            let fx = self.finish(Outcome::fail_signal(ErrorCode::Signal(code), feedback));
            return with_stop(fx, self.profile.has_cancel);
        }
        self.moved |= r.moved;
        self.settled_seen |= r.settled;
        self.baseline_unknown |= !r.baseline_known;
        if self.recovered && r.stopped && !r.done {
            let fx = self.finish(Outcome::failed(
                ErrorCode::Interrupted,
                Reason::StoppedShort,
            ));
            return with_stop(fx, self.profile.has_cancel);
        }
        if self.profile.has_started_when && !self.started_seen {
            if !r.started {
                return vec![];
            }
            self.started_seen = true;
        }
        if !r.done || r.early {
            self.hold_since = None;
            return vec![];
        }
        let since = *self.hold_since.get_or_insert(r.at_ms);
        if r.at_ms.saturating_sub(since) < self.profile.hold_ms {
            return vec![];
        }
        match self.profile.check {
            Check::Readback => self.finish(Outcome::read_back()),
            _ => self.finish(Outcome::confirmed()),
        }
    }

    fn deadline(&mut self) -> Vec<Effect> {
        let readback = self.profile.check == Check::Readback;
        let fx = if self.recovered {
            self.finish(Outcome::failed(ErrorCode::Interrupted, Reason::Interrupted))
        } else if readback {
            self.finish(Outcome::readback_mismatch())
        } else if self.moved {
            self.finish(Outcome::timeout(Reason::NotReached))
        } else if !self.settled_seen {
            self.finish(Outcome::failed(
                ErrorCode::DeviceOffline,
                Reason::NoFreshRead,
            ))
        } else if self.baseline_unknown {
            self.finish(Outcome::timeout(Reason::NoBaseline))
        } else {
            self.finish(Outcome::failed(
                ErrorCode::FeedbackMismatch,
                Reason::NeverMoved,
            ))
        };
        with_stop(fx, self.profile.has_cancel)
    }

    fn cancel(&mut self, shutdown: bool) -> Vec<Effect> {
        if self.profile.has_cancel {
            self.phase = Phase::Cancelling;
            self.cancel_for_shutdown = shutdown;
            vec![Effect::WriteCancel]
        } else {
            self.finish(Outcome::cancelled(Reason::Cancelled {
                stop_written: false,
                shutdown,
            }))
        }
    }

    /// Start-up recovery: an acknowledged write is supervised to its deadline; one on its way
    /// is stopped when the action can be; anything else ends `failed INTERRUPTED` at once.
    fn restarted(&mut self, found: Found) -> Vec<Effect> {
        match found {
            Found::Acknowledged => {
                self.phase = Phase::Supervising;
                self.status = Status::Running;
                self.recovered = true;
                vec![]
            }
            Found::InFlight if self.profile.has_cancel => {
                self.phase = Phase::Cancelling;
                self.restart_stop = true;
                vec![Effect::WriteCancel]
            }
            found => self.finish(Outcome::failed(
                ErrorCode::Interrupted,
                Reason::Restart(found),
            )),
        }
    }

    fn finish(&mut self, outcome: Outcome) -> Vec<Effect> {
        self.phase = Phase::Done;
        self.status = outcome.status;
        vec![Effect::Finish(outcome)]
    }
}

/// Puts the safe state (write the cancel plan, hold the device until it stopped) before a
/// terminal effect when `stop` says the device may be moving.
fn with_stop(mut fx: Vec<Effect>, stop: bool) -> Vec<Effect> {
    if stop {
        fx.insert(0, Effect::SafeState { write_cancel: true });
    }
    fx
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
