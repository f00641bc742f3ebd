//! The async shell around one command's [`Machine`]: it waits for the device, writes the plan,
//! judges fresh reads, keeps the deadline, and carries out every effect the machine asks for.

use crate::context::Context;
use crate::contract::{ErrorCode, Status};
use crate::device::{DeviceRuntime, Snapshot};
use crate::engine::AsCheck;
use crate::live::LiveCommand;
use crate::machine::{Check, Effect, Event, Found, Machine, Outcome};
use crate::plan::{self, Request, WriteError};
use crate::terminal::Ending;
use closedloop_driver::Value;
use closedloop_plant::{Action, Params, Scope};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, broadcast};
use tokio::time::{Instant, sleep_until};

/// Upper bound on how long a device stays held after a stop, waiting for `stopped_when`.
const SAFE_STATE_MAX: Duration = Duration::from_secs(30);
/// How long a cancel plan's MQTT publish may wait for the device: a stop usually goes out after
/// the deadline, and arriving late is still better than never.
const CANCEL_EXPIRY: Duration = Duration::from_secs(10);

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
    pub permit: Option<OwnedSemaphorePermit>,
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
    /// The requests actually sent (readback compares against these, not a re-evaluation).
    pub writes: Vec<Request>,
    /// Re-sends the plan's cyclic CAN frames while the command runs (aborted when dropped, so
    /// even a panicking supervisor never leaves a start frame going out).
    pub cycling: Option<AbortOnDrop>,
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
        Supervisor {
            ctx,
            cmd,
            dev,
            action,
            params,
            machine,
            accepted: Instant::now(),
            deadline: None,
            permit: None,
            ack_seq: 0,
            fences: BTreeMap::new(),
            last_sample: None,
            baseline: BTreeMap::new(),
            last_logged: None,
            evidence: json!({}),
            hold: false,
            shutdown_seen: false,
            baseline_done: false,
            expect_s: 0.0,
            settle_until_ms: 0,
            writes: Vec::new(),
            cycling: None,
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
        drop(self.permit.take());
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
        drop(self.permit.take());
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
            permit = group.acquire() => match permit {
                Some(p) => { self.permit = Some(p); Event::Dispatch }
                None => Event::Shutdown,
            },
            _ = sleep_until(expiry) => Event::QueueExpired,
        };
        self.ctx.dequeued(&self.action.exclusive);
        let dispatch = event == Event::Dispatch;
        self.feed(event).await;
        dispatch
    }

    /// Judges fresh reads until the machine reaches a terminal status.
    async fn supervise(&mut self) {
        // Every sample, not only the latest: a short fail_when pulse between two snapshots a
        // watch channel would merge must still fail the command.
        let mut samples = self.dev.samples();
        let others: BTreeSet<String> = self.criterion_refs().into_iter().map(|(d, _)| d).collect();
        let (_forwarders, mut other_rx) =
            match crate::others::wakes(&self.ctx, self.dev.id(), &others) {
                Some((set, rx)) => (Some(set), Some(rx)),
                None => (None, None),
            };
        let mut shutdown = self.ctx.shutdown_rx();
        let deadline = self.deadline.unwrap_or_else(Instant::now);
        let readback = self.action.verification.as_check() == Check::Readback;
        let readback_every = Duration::from_millis(self.dev.spec.poll_ms.max(1));
        let mut next_readback = Instant::now();
        // A device that reports changes only (OPC UA) never sends again a value the write itself
        // set: its nodes are read every poll_ms while the command runs, and reads issued after
        // the acknowledgement are fresh evidence.
        let reads_on_request = self.dev.opcua().is_some() && !readback;
        let mut next_read = Instant::now() + readback_every;
        // "Already so" confirms only on a read taken expect_s after the ack: ask for one then,
        // as a device that reports changes only (OPC UA) would never send the unchanged value.
        let settle_ms = self.settle_until_ms - self.ctx.clock.now_ms();
        let keepalive = self.action.keepalive_s.map(Duration::from_secs_f64);
        let mut alarms = self.ctx.alarms.watch();
        // An alarm raised between dispatch's check and now is seen on the first turn.
        alarms.mark_changed();
        let watched = self
            .ctx
            .plant
            .alarms
            .iter()
            .any(|a| a.blocks.iter().any(|d| d == self.dev.id()));
        let mut settle_poll = (self.baseline_done && settle_ms >= 0)
            .then(|| Instant::now() + Duration::from_millis(settle_ms as u64 + 1));
        while self.machine.is_supervising() {
            let wake = tokio::select! {
                sample = samples.recv(), if !readback => match sample {
                    Ok(snap) => Wake::Snapshot(snap),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let row = self.cmd.row();
                        tracing::warn!(request_id = %row.request_id, command_id = %row.command_id,
                                       device = %self.dev.id(), missed = n, "supervisor fell behind the device's samples");
                        Wake::Snapshot(self.dev.snapshot())
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                Some(()) = async { other_rx.as_mut()?.recv().await }, if other_rx.is_some() && !readback => {
                    Wake::Snapshot(self.dev.snapshot())
                }
                _ = sleep_until(next_readback), if readback => {
                    next_readback = Instant::now() + readback_every;
                    Wake::Readback
                }
                _ = sleep_until(next_read), if reads_on_request => {
                    next_read = Instant::now() + readback_every;
                    self.dev.poll_now();
                    continue;
                }
                _ = sleep_until(settle_poll.unwrap_or(deadline)), if settle_poll.is_some() => {
                    settle_poll = None;
                    self.dev.poll_now();
                    continue;
                }
                _ = sleep_until(deadline) => Wake::Event(Event::Deadline),
                // A standing alarm that blocks this device: stop, whatever the command's state.
                changed = alarms.changed(), if watched => {
                    if changed.is_err() {
                        continue;
                    }
                    match crate::alarms::blocking(&self.ctx, self.dev.id()) {
                        Some((name, detail)) => Wake::Event(Event::AlarmRaised { name, detail }),
                        None => continue,
                    }
                }
                // A dead-man action: due when its caller last asked plus keepalive_s.
                _ = sleep_until(self.cmd.renewed_at() + keepalive.unwrap_or(Duration::ZERO)), if keepalive.is_some() => {
                    let lapsed = keepalive.is_some_and(|k| self.cmd.renewed_at() + k <= Instant::now());
                    if !lapsed {
                        continue;
                    }
                    Wake::Event(Event::KeepaliveLapsed)
                }
                _ = self.cmd.cancelled() => Wake::Event(Event::CancelRequested),
                _ = shutdown_signal(&mut shutdown), if !self.shutdown_seen => {
                    self.shutdown_seen = true;
                    Wake::Event(Event::Shutdown)
                }
            };
            let event = match wake {
                Wake::Snapshot(snap) => match self.judge(&snap).await {
                    Some(e) => e,
                    None => continue,
                },
                Wake::Readback => match self.readback().await {
                    Some(e) => e,
                    None => continue,
                },
                Wake::Event(Event::Deadline) if !readback => {
                    if self.judge_delivered(&mut samples).await {
                        continue;
                    }
                    Event::Deadline
                }
                Wake::Event(e) => e,
            };
            let was_shutdown = event == Event::Shutdown;
            let fx = self.feed(event).await;
            if was_shutdown && fx.is_empty() {
                // No cancel plan: leave it `running` for the next start to supervise.
                return;
            }
        }
    }

    /// At the deadline, judges the samples already delivered first: a read that came back in
    /// the same instant as the deadline is evidence the verdict must not ignore (a heater that
    /// warmed, read at the deadline, did not "never move"). Returns true when one of them ended
    /// the command.
    async fn judge_delivered(&mut self, samples: &mut broadcast::Receiver<Snapshot>) -> bool {
        while let Ok(snap) = samples.try_recv() {
            if let Some(event) = self.judge(&snap).await {
                self.feed(event).await;
                if !self.machine.is_supervising() {
                    return true;
                }
            }
        }
        false
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
        all
    }

    /// Writes the cancel plan; holds the device until `stopped_when` afterwards.
    async fn write_cancel(&mut self) -> Event {
        // A cyclic start frame must not keep going out beside the stop.
        self.stop_cycling();
        let devices = self.ctx.scope_for(&self.action);
        let signals = self.dev.snapshot().plain();
        let command_id = self.cmd.row().command_id;
        let extra = [("command_id", command_id.as_str())];
        let scope = Scope {
            signals: &signals,
            params: &self.params,
            devices: &devices,
            extra_strings: &extra,
        };
        let result = match plan::evaluate(&self.action.cancel, &scope, self.dev.dbc()) {
            Ok(writes) => self.write_all(&writes, CANCEL_EXPIRY).await.map(|_| ()),
            Err(e) => Err(WriteError {
                code: ErrorCode::InvalidParams,
                detail: e.to_string(),
                transient: false,
                maybe_applied: false,
            }),
        };
        match result {
            Ok(()) => {
                self.hold = self.action.stopped_when.is_some();
                self.ctx
                    .record(
                        &self.cmd,
                        |_| {},
                        vec![("cancel_sent", serde_json::Value::Null)],
                    )
                    .await;
                Event::CancelWritten
            }
            Err(e) => {
                self.ctx
                    .record(
                        &self.cmd,
                        |_| {},
                        vec![(
                            "cancel_failed",
                            json!({"code": e.code.as_str(), "detail": e.detail}),
                        )],
                    )
                    .await;
                Event::CancelFailed {
                    code: e.code,
                    detail: e.detail,
                }
            }
        }
    }

    /// Starts re-sending the plan's cyclic frames (`cycle_ms`) until the command ends or its
    /// cancel plan is written. A failed re-send is logged; the criterion judges the effect.
    pub(crate) fn start_cycling(&mut self, writes: &[Request]) {
        let cyclic: Vec<(plan::CanWrite, u64)> = writes
            .iter()
            .filter_map(|w| match w {
                Request::Can(c) => c.cycle_ms.map(|ms| (c.clone(), ms.max(1))),
                _ => None,
            })
            .collect();
        if cyclic.is_empty() {
            return;
        }
        let dev = Arc::clone(&self.dev);
        let command_id = self.cmd.row().command_id;
        self.cycling = Some(AbortOnDrop(tokio::spawn(async move {
            let start = Instant::now();
            let mut next: Vec<Instant> = cyclic
                .iter()
                .map(|(_, ms)| start + Duration::from_millis(*ms))
                .collect();
            loop {
                let Some((i, at)) = next.iter().copied().enumerate().min_by_key(|(_, t)| *t) else {
                    return;
                };
                sleep_until(at).await;
                let (c, ms) = &cyclic[i];
                let period = Duration::from_millis(*ms);
                if let Err(e) = dev.send(&Request::Can(c.clone()), period).await {
                    tracing::warn!(%command_id, device = %dev.id(), error = %e.detail, "cyclic CAN frame not sent");
                }
                next[i] = at + period;
            }
        })));
    }

    /// Stops the cyclic frames (before a stop is written, and when the command ends).
    fn stop_cycling(&mut self) {
        self.cycling = None;
    }

    async fn finish(&mut self, o: Outcome) {
        self.stop_cycling();
        let detail = crate::detail::render(
            &o,
            &self.action,
            &self.dev.spec,
            &self.evidence,
            &self.params,
            self.deadline_budget(),
        );
        let end = Ending::new(o, detail, Some(self.evidence.clone()));
        self.ctx
            .record(&self.cmd, |r| end.apply(r), end.events())
            .await;
    }

    fn deadline_budget(&self) -> Option<f64> {
        let row = self.cmd.row();
        row.deadline_ms
            .map(|d| (d - row.accepted_at_ms).max(0) as f64 / 1000.0)
    }

    /// Keeps the device busy until `stopped_when` holds on a fresh read (bounded); returns the
    /// evidence of that read (where the device stopped), `None` when it never held in time.
    async fn hold_until_stopped(&mut self) -> Option<serde_json::Value> {
        let stopped = self.action.stopped_when.clone()?;
        let mut rx = self.dev.subscribe();
        let after = self.dev.issued_seq();
        self.dev.poll_now();
        let until = Instant::now() + SAFE_STATE_MAX;
        loop {
            let snap = rx.borrow_and_update().clone();
            let fresh = stopped
                .signals()
                .iter()
                .all(|n| snap.values.get(n).is_some_and(|v| v.seq > after));
            if snap.seq > after && fresh {
                let signals = snap.plain();
                let devices = self.ctx.scope_for(&self.action);
                let scope = Scope {
                    signals: &signals,
                    params: &self.params,
                    devices: &devices,
                    extra_strings: &[],
                };
                if stopped.eval_bool(&scope).unwrap_or(false) {
                    return Some(self.stopped_evidence(&snap));
                }
            }
            // A device that stopped answering will not confirm the stop: release it now
            // (its commands are refused while it is offline) instead of waiting out the bound.
            let gone = self.dev.current().liveness == crate::device::Liveness::Offline;
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) if !gone => {}
                _ => {
                    let row = self.cmd.row();
                    tracing::warn!(request_id = %row.request_id, command_id = %row.command_id, device = %self.dev.id(),
                                   offline = gone, "stopped_when did not hold within {SAFE_STATE_MAX:?}, or the device went offline; releasing it");
                    return None;
                }
            }
        }
    }
}

impl Supervisor {
    /// The criterion signals of a snapshot as evidence (value, time, source, unit).
    fn stopped_evidence(&self, snap: &Snapshot) -> serde_json::Value {
        let action = &self.action;
        let names: std::collections::BTreeSet<&String> = action
            .done_when
            .iter()
            .chain(action.stopped_when.iter())
            .flat_map(|e| e.signals())
            .collect();
        let mut evidence = serde_json::Map::new();
        for n in names {
            if let Some(v) = snap.values.get(n) {
                let mut e = json!({"value": v.value, "at": crate::clock::rfc3339(v.at_ms), "source": v.source});
                if let Some(u) = self.dev.spec.signal(n).and_then(|s| s.unit.clone()) {
                    e["unit"] = json!(u);
                }
                evidence.insert(n.clone(), e);
            }
        }
        serde_json::Value::Object(evidence)
    }
}

/// Why a device counts as offline, in words.
pub(crate) fn offline_detail(dev: &DeviceRuntime, snap: &Snapshot) -> String {
    let silence = dev.spec.liveness.max_silence_s;
    if snap.down {
        // Not a silence: the device said so (its last will), or its broker is unreachable.
        let why = snap.last_error.as_deref().unwrap_or("it is unreachable");
        return format!("{} is offline: {why}.", dev.id());
    }
    match &snap.last_error {
        Some(e) => format!(
            "{} gave no valid answer for more than {silence} s (last error: {e}).",
            dev.id()
        ),
        None => format!(
            "{} gave no valid answer for more than {silence} s.",
            dev.id()
        ),
    }
}

/// A task aborted when its handle is dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What woke the supervision loop.
enum Wake {
    Snapshot(Snapshot),
    Readback,
    Event(Event),
}

/// Resolves once the gateway is shutting down (never holds the watch guard across an await).
pub(crate) async fn shutdown_signal(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
