//! Dispatch, in steps: nothing is sent while the gateway stops; the device, `requires`, a
//! failure already on, the plan and the expected duration are judged on a fresh read
//! ([`Supervisor::prepare`]); the deadline and the `dispatched` record are committed before
//! anything goes out ([`Supervisor::commit_dispatch`]); then the plan is written, re-sent only
//! as the machine allows ([`Supervisor::write_plan`]).

pub(crate) mod plan;

use crate::contract::ErrorCode;
use crate::device::offline_detail;
use crate::device::{Liveness, Snapshot};
use crate::machine::{Effect, Event};
use crate::supervision::{Supervisor, shutdown_signal};
use closedloop_link::Reporting;
use closedloop_plant::Scope;
use plan::{Request, WriteError};
use serde_json::json;
use std::time::Duration;
use tokio::time::{Instant, sleep_until};

/// Why nothing will be written: its contract code and the words for the caller.
type Refusal = (ErrorCode, String);
/// `done_when`'s values at dispatch and whether it already held then (`judge::baseline_of`).
type Baseline = (
    std::collections::BTreeMap<String, closedloop_contract::Value>,
    bool,
);

/// What a fresh read at dispatch decided: the requests to send and the expected duration.
pub(crate) struct Prepared {
    writes: Vec<Request>,
    expect_s: f64,
}

impl Supervisor {
    /// Checks the device and the precondition again, evaluates the plan, and writes it.
    pub(crate) async fn dispatch(&mut self) {
        if *self.ctx.shutdown_rx().borrow() {
            // Nothing was sent yet, and nothing is sent while the gateway stops.
            self.feed(Event::Shutdown).await;
            let detail = "not sent: the gateway is shutting down".to_string();
            self.refuse(ErrorCode::Interrupted, detail).await;
            return;
        }
        let prepared = match self.prepare().await {
            Ok(p) => p,
            Err((code, detail)) => return self.refuse(code, detail).await,
        };
        let Some(deadline) = self.commit_dispatch(&prepared).await else {
            // Never send a write whose `dispatched` the journal does not hold: a restart would
            // take it for never sent.
            let detail = "not sent: the journal did not take the dispatch record".to_string();
            return self.refuse(ErrorCode::Interrupted, detail).await;
        };
        self.write_plan(&prepared.writes, deadline).await;
    }

    /// Judges "already so", `requires`, a failure already on and the plan on values read now,
    /// not on a cache that may predate a fault that struck while the command waited. `Err`:
    /// why nothing will be written.
    async fn prepare(&mut self) -> Result<Prepared, Refusal> {
        if let Some((_, detail)) = self
            .ctx
            .alarms
            .blocking(&self.ctx.plant.alarms, self.dev.id())
        {
            return Err((
                ErrorCode::Interlock,
                format!("{detail}; nothing was written"),
            ));
        }
        let within = Duration::from_millis(self.dev.spec.request_timeout_ms());
        let snap = self.dev.fresh(within).await;
        if snap.liveness != Liveness::Online {
            let detail = format!("{} Nothing was written.", offline_detail(&self.dev, &snap));
            return Err((ErrorCode::DeviceOffline, detail));
        }
        // Judged again here, on values inside the freshness window: a command that waited in
        // the queue was admitted on values that may since have aged, failed or been only a
        // retained message (which is never a baseline for "already so" either).
        let now_ms = self.ctx.clock.now_ms();
        self.own_requires_judgeable(&snap, now_ms)?;
        let signals = self.dev.usable_values(&snap, now_ms);
        let devices = self.ctx.scope_for(&self.action);
        let devices = crate::admission::rules::required_values(
            &self.action,
            &self.ctx.devices,
            devices,
            &self.ctx.clock,
        )
        .await
        .map_err(|why| (ErrorCode::Interlock, why))?;
        let (prepared, baseline) =
            self.in_scope(&signals, &devices, |scope| self.check_and_plan(scope))?;
        (self.baseline, self.baseline_done) = baseline;
        self.writes = prepared.writes.clone();
        self.expect_s = prepared.expect_s;
        Ok(prepared)
    }

    /// Every own signal `requires` reads is usable now, or why not in the words of the freshness
    /// rule ("was last read 4.1 s ago", "has had no value since …"), not "has no value yet".
    fn own_requires_judgeable(&self, snap: &Snapshot, now_ms: i64) -> Result<(), Refusal> {
        let Some(req) = &self.action.requires else {
            return Ok(());
        };
        let rule = self.dev.freshness(now_ms);
        let Some((s, why)) =
            (req.signals().iter()).find_map(|s| Some((s, snap.usable(s, rule).err()?)))
        else {
            return Ok(());
        };
        let why = why.describe(s, now_ms, crate::clock::rfc3339);
        Err((
            ErrorCode::Interlock,
            format!(
                "The precondition `{}` cannot be judged when the device became free: {why}; nothing was written.",
                req.source()
            ),
        ))
    }

    /// On the fresh read's scope: `requires` still holds and no failure is on; the plan, the
    /// expected duration and the baseline ("already so") evaluated. Nothing is sent here.
    fn check_and_plan(&self, scope: &Scope<'_>) -> Result<(Prepared, Baseline), Refusal> {
        if let Some(req) = &self.action.requires
            && !req.eval_bool(scope).unwrap_or(false)
        {
            let detail = format!(
                "The precondition `{}` no longer held when the device became free{}; nothing was written.",
                req.source(),
                crate::admission::rules::values_read(req, scope)
            );
            return Err((ErrorCode::Interlock, detail));
        }
        if let Some(why) = crate::admission::rules::failure_already_on(&self.action, scope) {
            let detail = format!("On a fresh read of {}, {why}.", self.dev.id());
            return Err((ErrorCode::Interlock, detail));
        }
        let writes = plan::evaluate(&self.action.write, scope, self.dev.link().as_ref())
            .map_err(|e| (ErrorCode::InvalidParams, e.to_string()))?;
        let expect_s = crate::admission::rules::expected_duration(&self.action, scope)
            .map_err(|detail| (ErrorCode::InvalidParams, detail))?;
        let baseline = crate::supervision::judge::baseline_of(&self.action, scope);
        Ok((Prepared { writes, expect_s }, baseline))
    }

    /// The deadline from now ([`closedloop_plant::Action::deadline_s`]): for "already so" on a
    /// device that reports when it likes, the longer one (only a report sent after expect_s
    /// can confirm, and a live device sends one within max_silence_s).
    fn budget_s(&self, expect_s: f64) -> f64 {
        let pushed = self.baseline_done && self.dev.reporting() != Reporting::Polled;
        self.action.deadline_s(&self.dev.spec, expect_s, pushed)
    }

    /// Sets the deadline and journals `dispatched`; `None` when the journal did not take it.
    async fn commit_dispatch(&mut self, p: &Prepared) -> Option<Instant> {
        let now = Instant::now();
        let budget_s = self.budget_s(p.expect_s);
        let deadline = now + Duration::from_secs_f64(budget_s);
        self.deadline = Some(deadline);
        self.cmd
            .set_expected_end(now + Duration::from_secs_f64(p.expect_s));
        self.cmd.set_deadline(deadline);
        let deadline_ms = self.ctx.clock.wall_ms(deadline);
        let writes: Vec<String> = p.writes.iter().map(|w| w.to_string()).collect();
        // The budget and `done_when`'s values at dispatch: what a replay of the journal needs
        // to count the deadline and the early rule as this command did (`crate::supervision::verdict`).
        let baseline: serde_json::Map<String, serde_json::Value> = (self.baseline.iter())
            .map(|(k, v)| (k.clone(), crate::dispatch::plan::value_json(*v)))
            .collect();
        let mut data = json!({"deadline": crate::clock::rfc3339(deadline_ms), "expect_s": p.expect_s,
                          "budget_s": budget_s, "writes": writes, "baseline": baseline});
        if self.ctx.ownership.shared() {
            // Which gateway wrote it: a gateway that takes the device over says whose it was.
            data["by"] = json!(self.ctx.ownership.instance());
        }
        let change = |r: &mut closedloop_journal::CommandRow| {
            r.dispatched = true;
            r.deadline_ms = Some(deadline_ms);
        };
        let committed = self
            .ctx
            .record(&self.cmd, change, vec![("dispatched", data)])
            .await;
        committed.then_some(deadline)
    }

    /// Writes the plan until it is acknowledged, re-sending only when the machine says so
    /// (idempotent actions after a transport error or a busy answer, within the deadline).
    async fn write_plan(&mut self, writes: &[Request], deadline: Instant) {
        loop {
            let expiry = deadline.saturating_duration_since(Instant::now());
            let e = match self.write_all(writes, expiry).await {
                Ok(fence) => return self.acked(writes, fence).await,
                Err(e) => e,
            };
            let ev = Event::WriteFailed {
                code: e.code.clone(),
                detail: e.detail.clone(),
                transient: e.transient && Instant::now() < deadline,
                maybe_applied: e.maybe_applied,
            };
            let fx = self.feed(ev.clone()).await;
            // The machine counts the attempts and decides whether there is another.
            let Some(attempt) = fx.iter().find_map(|f| match f {
                Effect::Write { attempt } => Some(*attempt),
                _ => None,
            }) else {
                return;
            };
            let retry = json!({"attempt": attempt, "after": e.detail});
            self.ctx
                .record(&self.cmd, |_| {}, vec![("retry", retry)])
                .await;
            if !self.pause_before_retry(deadline, ev).await {
                return;
            }
        }
    }

    /// The plan was acknowledged: take the fences, start cyclic frames, tell the machine.
    async fn acked(&mut self, writes: &[Request], fence: u64) {
        self.ack_seq = fence;
        self.fence_others();
        self.start_cycling(writes);
        let expect = Duration::from_millis((self.expect_s * 1000.0).round() as u64);
        let now = tokio::time::Instant::now();
        self.settle_until_ms = self.ctx.clock.wall_ms(now) + expect.as_millis() as i64;
        self.settle_at = Some(now + expect);
        self.feed(Event::WriteAcked).await;
    }

    /// Waits before a re-send; false when the command ended meanwhile (deadline, cancel,
    /// shutdown: the machine then ends it on the failure that is pending instead of retrying).
    async fn pause_before_retry(&mut self, deadline: Instant, pending: Event) -> bool {
        let pause = Duration::from_millis(self.dev.spec.poll_ms.clamp(10, 500));
        let mut shutdown = self.ctx.shutdown_rx();
        let first = tokio::select! {
            _ = tokio::time::sleep(pause) => return true,
            _ = sleep_until(deadline) => Event::Deadline { answering: false },
            _ = self.cmd.cancelled() => Event::CancelRequested,
            _ = shutdown_signal(&mut shutdown) => Event::Shutdown,
        };
        let deadline_passed = matches!(first, Event::Deadline { .. });
        self.feed(first).await;
        if !deadline_passed {
            self.feed(pending).await;
        }
        false
    }

    /// Ends the command before anything was written: no stop, nothing to undo.
    pub(crate) async fn refuse(&mut self, code: ErrorCode, detail: String) {
        let ev = Event::WriteFailed {
            code,
            detail,
            transient: false,
            maybe_applied: false,
        };
        self.feed(ev).await;
    }

    /// Sends every request in order; returns the fence of the last acknowledgement.
    pub(crate) async fn write_all(
        &self,
        writes: &[Request],
        expiry: Duration,
    ) -> Result<u64, WriteError> {
        let mut fence = self.dev.issued_seq();
        for w in writes {
            // With several gateways, only the lease's holder writes: checked before each write
            // (a cancel plan, a re-send) as well as when the dispatch was journaled.
            let epoch = self.cmd.epoch();
            if let Err(not) = self.ctx.ownership.fence_at(&self.dev.spec.id, epoch) {
                let holder = not.owner.unwrap_or_else(|| "another gateway".into());
                return Err(WriteError::refused(
                    ErrorCode::Interrupted,
                    format!(
                        "not sent: this gateway no longer holds {}'s lease ({holder} may); \
                         the device's commands are its new owner's",
                        self.dev.spec.id
                    ),
                ));
            }
            fence = self.dev.send(w, expiry).await?;
        }
        Ok(fence)
    }
}
