//! The owner's side of a handed command (`ownership/handover.rs`): a gateway that holds a device's lease
//! takes over the commands other gateways accepted for it — woken by the journal's change feed,
//! and on every keeper round in case a notification was lost — checks them where the device's
//! values are, and runs them as its own. Also how queued commands move when a device changes
//! hands: its new owner takes over the commands accepted and not yet dispatched
//! (`Engine::recover_device`).
//!
//! # Invariants
//! - A command is taken over by the holder of its device's lease only, under that lease: the
//!   `claimed` entry is a fenced write, so a gateway that lost the lease meanwhile claims
//!   nothing, and the lease itself keeps two gateways from running one command.
//! - One taker at a time per gateway (`Context::taking`), which reads the command again once
//!   it has checked its lease, and runs it only if it still waits; a command registers live
//!   only if none of its id is (`Context::remember_new`), so a gateway's own fresh command and
//!   a take-over of it never both run.
//! - The queue wait counts from the acceptance, wherever it was (`queue_timeout_s`): a command
//!   that waited longer while its device changed hands ends `timeout`, never sent late.

use crate::context::Change;
use crate::context::live::LiveCommand;
use crate::engine::Engine;
use crate::machine::profile::profile;
use crate::machine::{Effect, Event, Machine};
use crate::supervision::terminal::Ending;
use crate::{EngineError, Submission};
use closedloop_journal::CommandRow;
use closedloop_plant::Action;
use serde_json::json;
use std::sync::{Arc, Weak};
use std::time::Duration;

impl Engine {
    /// Follows the journal's change feed when several gateways share it (a no-op otherwise):
    /// each change announced by another gateway is passed on to this one's subscribers, and a
    /// command accepted for a device this one holds is taken over. The feed is re-opened after
    /// an error; the task ends with the engine or at shutdown.
    pub async fn follow_feed(self: &Arc<Self>) {
        if !self.ctx.ownership.shared() {
            return;
        }
        let engine = Arc::downgrade(self);
        let mut stop = self.ctx.shutdown_rx();
        tokio::spawn(async move {
            tokio::select! {
                _ = feed_loop(engine) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        });
    }

    /// The commands accepted for devices this gateway holds that nobody runs — handed here by
    /// another gateway, or queued at a previous owner — each taken over (the feed's backstop,
    /// and how queued commands move with a device: every keeper round).
    pub(crate) async fn adopt_waiting(self: &Arc<Self>) -> Result<(), EngineError> {
        for row in self.ctx.journal.unfinished().await? {
            if self.mine_to_take(&row) {
                self.spawn_adoption(row.command_id);
            }
        }
        Ok(())
    }

    /// Whether `row` waits for a gateway to run it and this one may: accepted, never
    /// dispatched, not running or just ended here, on a device whose lease this gateway holds
    /// and has settled, while it is not shutting down.
    pub(crate) fn mine_to_take(&self, row: &CommandRow) -> bool {
        let own = &self.ctx.ownership;
        row.status == "accepted"
            && !row.dispatched
            && self.ctx.live(&row.command_id).is_none()
            && !self.ctx.finished.contains(&row.command_id)
            && !own.recovering(&row.device)
            && matches!(own.fence(&row.device), Ok(Some(_)))
            && !*self.ctx.shutdown_rx().borrow()
    }

    /// Takes a command over in a task of its own (its checks may wait for the device).
    pub(crate) fn spawn_adoption(self: &Arc<Self>, command_id: String) {
        let engine = Arc::clone(self);
        self.spawn_task(async move {
            if let Err(e) = engine.adopt(&command_id).await {
                tracing::error!(command_id, error = %e, "taking over a command failed; tried again next round");
            }
        });
    }

    /// Takes one command over: reads it under this gateway's lease (what the journal says then
    /// is the truth: a command another taker ran meanwhile no longer waits), registers it,
    /// journals `claimed` under the lease, and runs it — or ends it: `timeout` when its queue
    /// wait ran out since it was accepted, `failed` with the code when admission's checks
    /// refuse it here; nothing written either way.
    pub(crate) async fn adopt(&self, command_id: &str) -> Result<(), EngineError> {
        let Some(_taking) = crate::context::Taking::new(&self.ctx, command_id) else {
            return Ok(());
        };
        let Some(row) = self.ctx.journal.get(command_id).await? else {
            return Ok(());
        };
        let Ok(Some(fence)) = self.ctx.ownership.fence(&row.device) else {
            return Ok(());
        };
        // Read again now the lease is checked: no write of an earlier epoch lands after this.
        let Some(row) = self.ctx.journal.get(command_id).await? else {
            return Ok(());
        };
        if !self.mine_to_take(&row) {
            return Ok(());
        }
        let events = self.ctx.journal.events(command_id).await?;
        let cancelled = events.iter().any(|e| e.event == CANCEL_REQUESTED);
        let lapsed = (events.iter())
            .find(|e| e.event == crate::ownership::dead_man::LAPSE_REQUESTED)
            .map(|e| e.data["why"].as_str().unwrap_or_default().to_string());
        let cmd = Arc::new(LiveCommand::new(row.clone(), events, Some(fence.epoch)));
        if !self.ctx.remember_new(Arc::clone(&cmd)) {
            return Ok(());
        }
        let claimed = json!({"by": fence.owner, "epoch": fence.epoch});
        if !self
            .ctx
            .record(&cmd, |_| {}, vec![("claimed", claimed)])
            .await
        {
            self.ctx.drop_fenced(&cmd);
            return Ok(());
        }
        tracing::info!(command_id, device = %row.device, epoch = fence.epoch, "command taken over");
        if cancelled {
            let mut machine = Machine::new(crate::machine::profile::inert());
            machine.on(Event::Accept);
            let detail = "Cancelled on request before it ran; nothing was written.".to_string();
            self.end_adopted(&cmd, machine, Event::CancelRequested, detail)
                .await;
            return Ok(());
        }
        if let Some(why) = lapsed {
            // Its caller's session ended before it was taken over: it never starts (the queue
            // step ends it unsent), as a queued command of a session ending here would.
            cmd.lapse(&why);
        }
        self.run_adopted(cmd, &row).await;
        Ok(())
    }

    /// The rest of [`Engine::adopt`], once the command is registered and claimed here.
    async fn run_adopted(&self, cmd: Arc<LiveCommand>, row: &CommandRow) {
        let action = self
            .ctx
            .plant
            .device(&row.device)
            .and_then(|d| d.action(&row.action));
        let mut machine = Machine::new(action.map_or_else(crate::machine::profile::inert, profile));
        machine.on(Event::Accept);
        let Some(action) = action else {
            let detail = format!(
                "this gateway's plant has no action {} on {}: the gateways' plant files differ; \
                 nothing was written.",
                row.action, row.device
            );
            let refused = Event::Reject {
                code: crate::contract::ErrorCode::InvalidParams,
                detail: detail.clone(),
            };
            return self.end_adopted(&cmd, machine, refused, detail).await;
        };
        let waited_ms = self.waited_ms(row).await;
        if waited_ms as f64 >= action.queue_timeout_s * 1000.0 {
            let detail = format!(
                "Waited {} s for {} while its lease changed hands (queue_timeout_s); nothing was \
                 written.",
                action.queue_timeout_s, row.device
            );
            return self
                .end_adopted(&cmd, machine, Event::QueueExpired, detail)
                .await;
        }
        match self.recheck(row, action).await {
            Ok(params) => {
                let waited = Duration::from_millis(u64::try_from(waited_ms).unwrap_or(0));
                let now = tokio::time::Instant::now();
                let accepted = now.checked_sub(waited).unwrap_or(now);
                self.supervise(cmd, action, params, machine, accepted);
            }
            Err((code, detail)) => {
                let detail = crate::views::detail::tidy(&format!(
                    "Refused by the gateway that drives the device: {detail}"
                ));
                let refused = Event::Reject {
                    code,
                    detail: detail.clone(),
                };
                self.end_adopted(&cmd, machine, refused, detail).await
            }
        }
    }

    /// How long `row` has waited since it was accepted: on the database's clock when the
    /// journal is shared (the accepting gateway's clock may differ from this one's), else on
    /// this gateway's clock against the time it wrote.
    async fn waited_ms(&self, row: &CommandRow) -> i64 {
        match self.ctx.journal.waited_ms(&row.command_id).await {
            Ok(Some(waited)) => waited,
            Ok(None) => self.ctx.clock.now_ms() - row.accepted_at_ms,
            Err(e) => {
                tracing::warn!(command_id = %row.command_id, error = %e,
                               "queue wait counted on this gateway's clock: the database's could not be read");
                self.ctx.clock.now_ms() - row.accepted_at_ms
            }
        }
    }

    /// Admission's checks for a command accepted elsewhere, as if it were submitted here: its
    /// journaled parameters, confirmed at acceptance if it had to be.
    async fn recheck(
        &self,
        row: &CommandRow,
        action: &Action,
    ) -> Result<closedloop_plant::Params, (crate::contract::ErrorCode, String)> {
        let args = row.params.as_object().cloned().unwrap_or_default();
        let params = action
            .check_params(&args)
            .map_err(|e| (crate::contract::ErrorCode::InvalidParams, e.to_string()))?;
        let sub = Submission {
            device: row.device.clone(),
            action: row.action.clone(),
            args,
            request_id: Some(row.request_id.clone()),
            idempotency_key: row.idempotency_key.clone(),
            caller: row.caller.clone(),
            wait: Duration::ZERO,
            confirmed: true,
            confirmed_by: None,
            denied: None,
            command_id: Some(row.command_id.clone()),
            traceparent: None,
        };
        self.admit(&sub, action, &params, None).await?;
        Ok(params)
    }

    /// Ends a taken-over command before it ran, as the machine decides on `event`; journaled
    /// and announced like any end (`Context::record`), then let go.
    async fn end_adopted(
        &self,
        cmd: &Arc<LiveCommand>,
        mut machine: Machine,
        event: Event,
        detail: String,
    ) {
        let Some(Effect::Finish(o)) = machine.on(event).pop() else {
            unreachable!("a queued command refused or expired always ends at once");
        };
        let end = Ending::new(o, Some(detail), None);
        self.ctx.record(cmd, |r| end.apply(r), end.events()).await;
        self.ctx.forget(cmd);
    }
}

/// The timeline entry a gateway that does not run a command adds when asked to cancel it: the
/// gateway that takes the command over later ends it `cancelled` instead of running it.
pub(crate) const CANCEL_REQUESTED: &str = "cancel_requested";

/// Reads the feed until the engine is gone; re-opens it (after a pause) when it fails.
async fn feed_loop(engine: Weak<Engine>) {
    loop {
        let opened = match engine.upgrade() {
            Some(e) => e.ctx.journal.feed().await,
            None => return,
        };
        let mut feed = match opened {
            Ok(Some(feed)) => {
                // Listening again: what was announced while it was not is read from the journal.
                match engine.upgrade() {
                    Some(e) => e.cancels_missed().await,
                    None => return,
                }
                feed
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the journal's change feed cannot be opened; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            let change = match feed.next().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "the journal's change feed failed; re-opening it");
                    break;
                }
            };
            let Some(engine) = engine.upgrade() else {
                return;
            };
            engine.on_change(change).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl Engine {
    /// Cancel requests announced while this gateway was not listening (before its feed opened,
    /// while it was re-opened after a drop, or over a connection that died silently): every
    /// live command here whose timeline holds a `cancel_requested` entry is cancelled, as the
    /// lost announcement would have done. Run when the feed opens and every keeper round; a
    /// read that fails is tried again the next round.
    pub(crate) async fn cancels_missed(&self) {
        let live = self.ctx.live_ids();
        if live.is_empty() {
            return;
        }
        let asked = match self.ctx.journal.with_event(&live, CANCEL_REQUESTED).await {
            Ok(asked) => asked,
            Err(e) => {
                return tracing::warn!(error = %e, "cannot read the journal for missed cancel requests");
            }
        };
        for id in asked {
            if let Some(cmd) = self.ctx.live(&id) {
                tracing::info!(command_id = %id, "a cancel request announced while the feed was away");
                cmd.request_cancel();
            }
        }
    }

    /// One announcement on the feed: a cancel request for a command this gateway runs is
    /// carried out; a change is passed on unless it is this gateway's own command (already
    /// announced here), and the command taken over when it waits for this gateway.
    async fn on_change(self: &Arc<Self>, announced: closedloop_journal::Announcement) {
        let change = match announced {
            closedloop_journal::Announcement::Cancel(id) => {
                if let Some(cmd) = self.ctx.live(&id) {
                    cmd.request_cancel();
                }
                return;
            }
            closedloop_journal::Announcement::Renew(id) => {
                if let Some(cmd) = self.ctx.live(&id) {
                    cmd.renew();
                }
                return;
            }
            closedloop_journal::Announcement::Lapse { command_id, why } => {
                if self.ctx.live(&command_id).is_some() {
                    self.lapse(&command_id, &why);
                }
                return;
            }
            closedloop_journal::Announcement::Changed(change) => change,
        };
        let id = &change.command_id;
        if self.ctx.live(id).is_some() || self.ctx.finished.contains(id) {
            return;
        }
        let waiting = change.status == "accepted" && !change.dispatched;
        let _ = self.ctx.changes.send(Change::Command {
            command_id: change.command_id.clone(),
            device: change.device.clone(),
            status: change.status,
            elsewhere: true,
        });
        if waiting && matches!(self.ctx.ownership.fence(&change.device), Ok(Some(_))) {
            self.spawn_adoption(change.command_id);
        }
    }
}
