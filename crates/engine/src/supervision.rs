//! The async shell around one command's [`Machine`]: it waits for the device, writes the plan,
//! judges fresh reads, keeps the deadline, and carries out every effect the machine asks for.

pub mod crash;
pub(crate) mod judge;
pub(crate) mod others;
pub(crate) mod stop;
pub(crate) mod terminal;
pub mod verdict;
pub(crate) mod wait;

use crate::context::Context;
use crate::context::live::LiveCommand;
use crate::contract::{ErrorCode, Status};
use crate::device::DeviceRuntime;
use crate::dispatch::plan::Request;
use crate::machine::{CrashStop, Effect, Event, Found, Machine, Outcome, Reason};
use crate::supervision::terminal::Ending;
use closedloop_contract::Value;
use closedloop_plant::{Action, Params};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, sleep_until};

/// Everything one command's task owns.
pub(crate) struct Supervisor {
    pub ctx: Arc<Context>,
    pub cmd: Arc<LiveCommand>,
    pub dev: Arc<DeviceRuntime>,
    pub action: Arc<Action>,
    pub params: Params,
    pub machine: Machine,
    /// Instant the command was accepted (the queue wait counts from it).
    pub accepted: Instant,
    /// Journaled deadline, for a recovered command.
    pub deadline: Option<Instant>,
    /// The exclusive group's permit, shared with the task that ends the command if this
    /// supervisor panics (`supervision/crash.rs`): it is let go only once the end is on record.
    pub permit: PermitSlot,
    /// Read cycles up to this number were issued before the write was acknowledged.
    pub ack_seq: u64,
    /// The same fence for every other device the criteria read (`devices.<id>.<signal>`).
    pub fences: BTreeMap<String, u64>,
    /// The sample numbers of the last judged sample: a republished one is not judged again.
    pub last_sample: Option<Vec<u64>>,
    /// Values of the `done_when` signals when the write was dispatched.
    pub baseline: BTreeMap<String, Value>,
    /// The last signal values journaled, to journal only changes.
    pub last_logged: Option<serde_json::Value>,
    /// What may decide the outcome or trigger a stop, not yet journaled: a reading on which
    /// `done_when` or a `fail_when` held (`signal`), or the standing alarm that was raised
    /// (`alarm`). It goes into the commit of the first consequence — the `cancel_sent` of a stop,
    /// else the final status — ahead of it, so the journal reads in causal order and the
    /// confirming read costs no fsync of its own. Journaled alone at the end of
    /// [`Supervisor::feed`] when nothing followed.
    pub deciding: Option<(&'static str, serde_json::Value)>,
    /// Who recovered the command, when it was recovered: its ending's words say whether this
    /// gateway restarted or took the device over from the gateway that ran it.
    pub recovery: crate::views::detail::Recovery,
    /// Evidence of the last fresh reading.
    pub evidence: serde_json::Value,
    /// Whether a stop was written and the device must be held until `stopped_when`.
    pub hold: bool,
    pub shutdown_seen: bool,
    /// `done_when` already held on the values cached at dispatch ("already so").
    pub baseline_done: bool,
    /// The expected duration, evaluated at dispatch.
    pub expect_s: f64,
    /// Before this wall-clock ms, a `done_when` that already held at dispatch cannot confirm.
    pub settle_until_ms: i64,
    /// The instant `settle_until_ms` was counted to from the acknowledgement: a read issued at or
    /// after it is stamped at or after `settle_until_ms` (same clock), so the read asked for
    /// then counts as settled without a margin. `None` for a command recovered after a restart.
    pub settle_at: Option<tokio::time::Instant>,
    /// The requests actually sent (readback compares against these, not a re-evaluation).
    pub writes: Vec<Request>,
    /// Re-sends the plan's cyclic CAN frames while the command runs (aborted when dropped, so
    /// even a panicking supervisor never leaves a start frame going out).
    pub cycling: Option<AbortOnDrop>,
    /// The command's id, for plans that render it (`${command_id}`).
    pub command_id: String,
}

impl Supervisor {
    /// A supervisor for a command accepted now; the caller sets `deadline` and `permit` for a
    /// recovered one.
    pub fn new(
        ctx: Arc<Context>,
        cmd: Arc<LiveCommand>,
        dev: Arc<DeviceRuntime>,
        action: Arc<Action>,
        params: Params,
        machine: Machine,
    ) -> Supervisor {
        let command_id = cmd.row().command_id;
        Supervisor {
            ctx,
            cmd,
            dev,
            action,
            params,
            machine,
            accepted: Instant::now(),
            deadline: None,
            permit: PermitSlot::default(),
            ack_seq: 0,
            fences: BTreeMap::new(),
            last_sample: None,
            baseline: BTreeMap::new(),
            last_logged: None,
            deciding: None,
            recovery: Default::default(),
            evidence: json!({}),
            hold: false,
            shutdown_seen: false,
            baseline_done: false,
            expect_s: 0.0,
            settle_until_ms: 0,
            settle_at: None,
            writes: Vec::new(),
            cycling: None,
            command_id,
        }
    }

    /// Runs the command to a terminal status (or, at shutdown, as far as it can go).
    pub async fn run(mut self) {
        if self.machine.is_queued() && !self.queue().await {
            return;
        }
        if !self.machine.is_done() && !self.machine.is_supervising() {
            self.dispatch().await;
        }
        if self.machine.is_supervising() {
            self.supervise().await;
        }
        if self.hold {
            let _ = self.hold_until_stopped().await;
        }
        self.stop_cycling();
        self.ctx.forget(&self.cmd);
        release(&self.permit);
    }

    /// At start-up, for a write that may have arrived unacknowledged: writes the cancel plan,
    /// ends the command `failed INTERRUPTED` saying whether the stop went out, and holds the
    /// device until `stopped_when` holds.
    pub async fn stop_after_restart(mut self) {
        let within = Duration::from_millis(self.dev.spec.request_timeout_ms());
        let _ = self.dev.fresh(within).await;
        for effect in self.machine.on(Event::Restarted(Found::InFlight)) {
            let next = match effect {
                Effect::WriteCancel => self.write_cancel().await,
                Effect::Finish(o) => {
                    self.finish(o).await;
                    continue;
                }
                _ => continue,
            };
            for effect in self.machine.on(next) {
                if let Effect::Finish(o) = effect {
                    self.finish(o).await;
                }
            }
        }
        if self.hold {
            let _ = self.hold_until_stopped().await;
        }
        self.ctx.forget(&self.cmd);
        release(&self.permit);
    }

    /// After this command's first supervisor panicked (`supervision/crash.rs`) with the write possibly
    /// sent: writes the cancel plan, ends the command `failed INTERRUPTED` saying whether the
    /// stop went out, and holds the device until `stopped_when` holds.
    pub async fn stop_after_crash(mut self, why: String) {
        let stop = match self.write_cancel().await {
            Event::CancelWritten => CrashStop::Written,
            Event::CancelFailed { detail, .. } => CrashStop::Failed(detail),
            _ => CrashStop::Failed("the stop was not written".into()),
        };
        let events = vec![crate::supervision::terminal::internal_error_event(&why)];
        self.ctx.record(&self.cmd, |_| {}, events).await;
        self.finish(Outcome::failed(
            ErrorCode::Interrupted,
            Reason::Crashed { why, stop },
        ))
        .await;
        if self.hold {
            let _ = self.hold_until_stopped().await;
        }
        self.ctx.forget(&self.cmd);
        release(&self.permit);
    }

    /// Waits for the exclusive group. Returns false when the command ended while queued.
    async fn queue(&mut self) -> bool {
        let group = self.ctx.group(&self.action.exclusive);
        let expiry = self.accepted + Duration::from_secs_f64(self.action.queue_timeout_s.max(0.0));
        let mut shutdown = self.ctx.shutdown_rx();
        // Biased: a shutdown or a cancel that is already due wins over a permit freed in the same
        // instant, so a queued command is never sent while the gateway stops.
        let event = tokio::select! {
            biased;
            _ = shutdown_signal(&mut shutdown) => Event::Shutdown,
            _ = self.cmd.cancelled() => Event::CancelRequested,
            // A dead-man action whose session ended never starts: nobody could keep it going.
            _ = self.cmd.lapsed() => Event::CancelRequested,
            permit = group.acquire() => match permit {
                Some(p) => { hold(&self.permit, Some(p)); Event::Dispatch }
                None => Event::Shutdown,
            },
            _ = sleep_until(expiry) => Event::QueueExpired,
        };
        self.ctx.dequeued(&self.action.exclusive);
        let dispatch = event == Event::Dispatch;
        self.feed(event).await;
        dispatch
    }

    /// Feeds the machine and carries out its effects, in order. Returns the effects.
    pub(crate) async fn feed(&mut self, event: Event) -> Vec<Effect> {
        let mut pending = std::collections::VecDeque::from(self.machine.on(event));
        let mut all = Vec::new();
        while let Some(effect) = pending.pop_front() {
            all.push(effect.clone());
            match effect {
                Effect::Journal(Status::Running) => {
                    self.ctx
                        .record(
                            &self.cmd,
                            |r| r.status = Status::Running.as_str().into(),
                            vec![
                                ("device_ack", serde_json::Value::Null),
                                ("running", serde_json::Value::Null),
                            ],
                        )
                        .await;
                }
                Effect::Journal(_) => {}
                Effect::Write { .. } => {}
                Effect::PollNow => self.dev.poll_now(),
                Effect::WriteCancel => {
                    let next = self.write_cancel().await;
                    let stopping = *self.ctx.shutdown_rx().borrow();
                    if next == Event::CancelWritten && !stopping {
                        // A cancel ends once the device reads stopped (bounded), with where
                        // it stopped as its evidence: the caller learns the outcome, not the
                        // wish. Without such a read there is no evidence.
                        let confirmed = match std::mem::take(&mut self.hold) {
                            true => self.hold_until_stopped().await,
                            false => None,
                        };
                        self.evidence = confirmed.unwrap_or_else(|| json!({}));
                    }
                    pending.extend(self.machine.on(next));
                }
                Effect::SafeState { write_cancel } => {
                    if write_cancel {
                        // The outcome is already decided; a failed stop is logged in the timeline.
                        let _ = self.write_cancel().await;
                    }
                }
                Effect::Finish(outcome) => self.finish(outcome).await,
            }
        }
        if let Some(reading) = self.deciding.take() {
            self.ctx.note(&self.cmd, vec![reading]).await;
        }
        all
    }

    /// Starts re-sending the plan's cyclic requests (a CAN frame with `cycle_ms`) until the
    /// command ends, its cancel plan is written, or the device's lease is lost (several
    /// gateways). A failed re-send is logged; the criterion judges the effect.
    pub(crate) fn start_cycling(&mut self, writes: &[Request]) {
        let cyclic: Vec<(Request, Duration)> = writes
            .iter()
            .filter_map(|w| w.repeat_every().map(|period| (Arc::clone(w), period)))
            .collect();
        if cyclic.is_empty() {
            return;
        }
        let dev = Arc::clone(&self.dev);
        let command_id = self.cmd.row().command_id;
        let (ctx, epoch) = (Arc::clone(&self.ctx), self.cmd.epoch());
        self.cycling = Some(AbortOnDrop(tokio::spawn(async move {
            let start = Instant::now();
            let mut next: Vec<Instant> = cyclic.iter().map(|(_, period)| start + *period).collect();
            loop {
                let Some((i, at)) = next.iter().copied().enumerate().min_by_key(|(_, t)| *t) else {
                    return;
                };
                sleep_until(at).await;
                // Only the lease's holder writes, cyclic frames too.
                if ctx.ownership.fence_at(dev.id(), epoch).is_err() {
                    tracing::warn!(%command_id, device = %dev.id(), "cyclic requests stopped: the device's lease was lost");
                    return;
                }
                let (request, period) = &cyclic[i];
                if let Err(e) = dev.send(request, *period).await {
                    tracing::warn!(%command_id, device = %dev.id(), error = %e.detail, "cyclic request not sent");
                }
                next[i] = at + *period;
            }
        })));
    }

    /// Stops the cyclic frames (before a stop is written, and when the command ends).
    pub(crate) fn stop_cycling(&mut self) {
        self.cycling = None;
    }

    async fn finish(&mut self, o: Outcome) {
        self.stop_cycling();
        let detail = match (&o.reason, self.cmd.lapse_reason()) {
            (Reason::Deadman { stop_written }, Some(why)) => Some(
                crate::views::detail::ended_early(&why, *stop_written, &self.evidence),
            ),
            _ => crate::views::detail::render(
                &o,
                &self.action,
                &self.dev.spec,
                &self.evidence,
                &self.params,
                self.deadline_budget(),
                &self.recovery,
            ),
        };
        let end = Ending::new(o, detail, Some(self.evidence.clone()));
        let mut events = end.events();
        if let Some(reading) = self.deciding.take() {
            events.insert(0, reading);
        }
        self.ctx.record(&self.cmd, |r| end.apply(r), events).await;
    }

    fn deadline_budget(&self) -> Option<f64> {
        let row = self.cmd.row();
        row.deadline_ms
            .map(|d| (d - row.accepted_at_ms).max(0) as f64 / 1000.0)
    }
}

/// See [`Supervisor::permit`].
pub(crate) type PermitSlot = Arc<std::sync::Mutex<Option<OwnedSemaphorePermit>>>;

/// Puts `permit` in the slot (its lock is never held across an await, so a poisoned one is sound).
pub(crate) fn hold(slot: &PermitSlot, permit: Option<OwnedSemaphorePermit>) {
    *slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = permit;
}

/// Lets the exclusive group go.
pub(crate) fn release(slot: &PermitSlot) {
    hold(slot, None);
}

/// A task aborted when its handle is dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Resolves once the gateway is shutting down (never holds the watch guard across an await).
pub(crate) async fn shutdown_signal(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
