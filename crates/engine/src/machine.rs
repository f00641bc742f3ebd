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

mod event;
mod outcome;
mod phases;
pub(crate) mod profile;

pub use event::{Check, Event, Found, Profile, Reading};
pub use outcome::{CrashStop, Effect, Outcome, Reason};

use crate::contract::{ErrorCode, Status};

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
    /// `done_when` held on a read sooner than the expected duration ("already so", not yet
    /// confirmable), and on no read after it.
    held_early: bool,
    cancel_requested: bool,
    cancel_for_shutdown: bool,
    /// The cancel was the dead-man's: the command ends `DEADMAN`, not `CANCELLED`.
    cancel_for_deadman: bool,
    recovered: bool,
    /// The cancel being written is recovery's stop of a write that was on its way.
    restart_stop: bool,
    last_write_error: Option<(ErrorCode, String)>,
    /// A criterion signal answered with no value since the last fresh reading: what a deadline
    /// without one says came instead (`NO_FEEDBACK`).
    no_value: Option<String>,
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
            held_early: false,
            cancel_requested: false,
            cancel_for_shutdown: false,
            cancel_for_deadman: false,
            recovered: false,
            restart_stop: false,
            last_write_error: None,
            no_value: None,
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

    /// Whether the criteria's last report carried no value (the judge waits for one).
    pub fn awaits_a_value(&self) -> bool {
        self.no_value.is_some()
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

    /// Feeds one event; returns what the shell must do, in order (`phases.rs`: each phase's
    /// edges).
    pub fn on(&mut self, event: Event) -> Vec<Effect> {
        match self.phase {
            Phase::Received => self.on_received(event),
            Phase::Queued => self.on_queued(event),
            Phase::Writing => self.on_writing(event),
            Phase::Supervising => self.on_supervising(event),
            Phase::Cancelling => self.on_cancelling(event),
            Phase::Done => vec![],
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
        // Every criterion value of this reading is a value: what came before is past.
        self.no_value = None;
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
        if r.done {
            self.held_early = r.early;
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
            _ if self.profile.readback_only => self.finish(Outcome::read_back()),
            _ if r.already && !self.moved => self.finish(Outcome::already_so()),
            _ => self.finish(Outcome::confirmed()),
        }
    }

    fn deadline(&mut self, answering: bool) -> Vec<Effect> {
        let readback = self.profile.check == Check::Readback;
        let fx = if self.recovered {
            self.finish(Outcome::failed(ErrorCode::Interrupted, Reason::Interrupted))
        } else if readback {
            self.finish(Outcome::readback_mismatch())
        } else if self.moved {
            self.finish(Outcome::timeout(Reason::NotReached))
        } else if let Some(what_came) = self.no_value.take() {
            // Its last report had no value: what the signal is now is unknown — not "reported
            // nothing", not "never moved", whatever values came before. A device no longer
            // answering at the deadline is offline.
            match answering {
                true => {
                    let reason = Reason::Unreadable(what_came);
                    self.finish(Outcome::failed(ErrorCode::NoFeedback, reason))
                }
                false => self.finish(Outcome::failed(
                    ErrorCode::DeviceOffline,
                    Reason::NoFreshRead { answering },
                )),
            }
        } else if self.held_early {
            let code = match answering {
                true => ErrorCode::NoFeedback,
                false => ErrorCode::DeviceOffline,
            };
            self.finish(Outcome::failed(
                code,
                Reason::AlreadyUnconfirmed { answering },
            ))
        } else if !self.settled_seen {
            let code = match answering {
                true => ErrorCode::NoFeedback,
                false => ErrorCode::DeviceOffline,
            };
            self.finish(Outcome::failed(code, Reason::NoFreshRead { answering }))
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
#[path = "machine_tests/mod.rs"]
mod tests;
