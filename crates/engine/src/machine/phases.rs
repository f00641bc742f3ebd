//! What each phase of the lifecycle does with an event: one method per phase, so that
//! `Machine::on` reads as the list of phases and each phase's edges read at once.
//!
//! An event a phase has no edge for yields no effect (the contract's edges are all here; see
//! `docs/architecture.md`, "The lifecycle").

use super::{Effect, Event, Machine, Outcome, Phase, Reason, with_stop};
use crate::contract::{ErrorCode, Status};

impl Machine {
    /// Received: accepted (journaled first), rejected, or found by start-up recovery.
    pub(super) fn on_received(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::Accept => {
                self.phase = Phase::Queued;
                vec![Effect::Journal(Status::Accepted)]
            }
            Event::Reject { code, detail } => {
                self.finish(Outcome::rejected(code, Reason::Rejected(detail)))
            }
            Event::Restarted(found) => self.restarted(found),
            _ => vec![],
        }
    }

    /// Queued behind the device's other commands: dispatched, or ended unsent.
    pub(super) fn on_queued(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::Dispatch => {
                self.phase = Phase::Writing;
                self.attempt = 1;
                vec![Effect::Write { attempt: 1 }]
            }
            Event::QueueExpired => self.finish(Outcome::timeout(Reason::QueueExpired)),
            Event::Reject { code, detail } => {
                self.finish(Outcome::failed(code, Reason::Rejected(detail)))
            }
            Event::CancelRequested => self.finish(Outcome::cancelled(Reason::Cancelled {
                stop_written: false,
                shutdown: false,
            })),
            Event::Offline { detail } => self.finish(Outcome::failed(
                ErrorCode::DeviceOffline,
                Reason::Offline(detail),
            )),
            Event::Shutdown => {
                self.finish(Outcome::failed(ErrorCode::Interrupted, Reason::Interrupted))
            }
            _ => vec![],
        }
    }

    /// The write is on its way: acknowledged, failed (retried when it may be), or overtaken by
    /// the deadline, the device going offline, a cancel or a shutdown.
    pub(super) fn on_writing(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::WriteAcked => self.acked(),
            Event::WriteFailed {
                code,
                detail,
                transient,
                maybe_applied,
            } => self.write_failed(code, detail, transient, maybe_applied),
            Event::Deadline { .. } => {
                let (code, detail) = self.last_write_error.take().unwrap_or((
                    ErrorCode::Timeout,
                    "the write was never acknowledged".into(),
                ));
                let fx = self.finish(Outcome::failed(code, Reason::Driver(detail)));
                with_stop(fx, self.profile.has_cancel)
            }
            Event::Offline { detail } => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::DeviceOffline,
                    Reason::Offline(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            Event::CancelRequested => {
                // The write is on the wire; stop it once it is acknowledged.
                self.cancel_requested = true;
                vec![]
            }
            Event::Shutdown => {
                self.cancel_requested = true;
                self.cancel_for_shutdown = true;
                vec![]
            }
            _ => vec![],
        }
    }

    /// A write the driver refused or that failed on the line.
    fn write_failed(
        &mut self,
        code: ErrorCode,
        detail: String,
        transient: bool,
        maybe_applied: bool,
    ) -> Vec<Effect> {
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
        if transient && self.profile.idempotent && self.attempt < self.profile.max_attempts {
            self.attempt += 1;
            self.last_write_error = Some((code, detail));
            return vec![Effect::Write {
                attempt: self.attempt,
            }];
        }
        let fx = self.finish(Outcome::failed(code, Reason::Driver(detail)));
        with_stop(fx, maybe_applied && self.profile.has_cancel)
    }

    /// Acknowledged, waiting for the device to show the outcome in fresh reads.
    pub(super) fn on_supervising(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::Reading(r) => self.reading(r),
            Event::Deadline { answering } => self.deadline(answering),
            Event::NoValue { detail } => {
                self.no_value = Some(detail);
                vec![]
            }
            Event::Unreadable { code, detail } => {
                let fx = self.finish(Outcome::failed(code, Reason::Unreadable(detail)));
                with_stop(fx, self.profile.has_cancel)
            }
            Event::Offline { detail } => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::DeviceOffline,
                    Reason::Offline(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            Event::CancelRequested => self.cancel(false),
            Event::AlarmRaised { name, detail } => {
                let fx = self.finish(Outcome::failed(
                    ErrorCode::Signal(name),
                    Reason::Alarm(detail),
                ));
                with_stop(fx, self.profile.has_cancel)
            }
            Event::KeepaliveLapsed => {
                self.cancel_for_deadman = true;
                if self.profile.has_cancel {
                    self.phase = Phase::Cancelling;
                    vec![Effect::WriteCancel]
                } else {
                    self.finish(Outcome::deadman(false))
                }
            }
            // Nothing can stop an action without a cancel plan: it stays `running` in the
            // journal so the next start keeps supervising it until its deadline.
            Event::Shutdown if self.profile.has_cancel => self.cancel(true),
            _ => vec![],
        }
    }

    /// The cancel plan is being written: it ends the command however it went.
    pub(super) fn on_cancelling(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::CancelWritten if self.restart_stop => self.finish(Outcome::failed(
                ErrorCode::Interrupted,
                Reason::RestartStop { failed: None },
            )),
            Event::CancelFailed { detail, .. } if self.restart_stop => {
                self.finish(Outcome::failed(
                    ErrorCode::Interrupted,
                    Reason::RestartStop {
                        failed: Some(detail),
                    },
                ))
            }
            Event::CancelWritten if self.cancel_for_deadman => self.finish(Outcome::deadman(true)),
            Event::CancelWritten => {
                let shutdown = self.cancel_for_shutdown;
                self.finish(Outcome::cancelled(Reason::Cancelled {
                    stop_written: true,
                    shutdown,
                }))
            }
            Event::CancelFailed { code, detail } => {
                self.finish(Outcome::failed(code, Reason::CancelFailed(detail)))
            }
            _ => vec![],
        }
    }
}
