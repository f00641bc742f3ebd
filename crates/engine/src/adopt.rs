//! The owner's side of a handed command (`handover.rs`): a gateway that holds a device's lease
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
//! - One gateway takes a command over once: it is registered live before anything is awaited.
//! - The queue wait counts from the acceptance at the other gateway (`queue_timeout_s`).

use crate::context::Change;
use crate::engine::{Engine, profile};
use crate::live::LiveCommand;
use crate::machine::{Effect, Event, Machine};
use crate::terminal::Ending;
use crate::{EngineError, Submission};
use closedloop_journal::{CommandRow, EventRow};
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

    /// The commands other gateways accepted for devices this one holds and nobody took over
    /// yet: each is taken over (the feed's backstop, every keeper round).
    pub(crate) async fn adopt_waiting(self: &Arc<Self>) -> Result<(), EngineError> {
        for row in self.ctx.journal.unfinished().await? {
            if self.mine_to_take(&row) {
                let events = self.ctx.journal.events(&row.command_id).await?;
                if handed(&events) {
                    self.spawn_adoption(row, events);
                }
            }
        }
        Ok(())
    }

    /// Whether `row` waits for a gateway to run it and this one may: accepted, never
    /// dispatched, not running here, on a device whose lease this gateway holds and settled.
    pub(crate) fn mine_to_take(&self, row: &CommandRow) -> bool {
        let own = &self.ctx.ownership;
        row.status == "accepted"
            && !row.dispatched
            && self.ctx.live(&row.command_id).is_none()
            && !own.recovering(&row.device)
            && matches!(own.fence(&row.device), Ok(Some(_)))
    }

    /// Takes a command over in a task of its own (its checks may wait for the device).
    pub(crate) fn spawn_adoption(self: &Arc<Self>, row: CommandRow, events: Vec<EventRow>) {
        let engine = Arc::clone(self);
        self.spawn_task(async move {
            if let Err(e) = engine.adopt(row, events).await {
                tracing::error!(error = %e, "taking over a command failed; tried again next round");
            }
        });
    }

    /// Takes one command over: registers it, journals `claimed` under this gateway's lease,
    /// runs the admission checks that need the device's values, and runs the command — or
    /// ends it `failed` with the refusing check's code, nothing written.
    pub(crate) async fn adopt(
        &self,
        row: CommandRow,
        events: Vec<EventRow>,
    ) -> Result<(), EngineError> {
        let Ok(Some(fence)) = self.ctx.ownership.fence(&row.device) else {
            return Ok(());
        };
        let accepted = self.ctx.clock.instant_of(row.accepted_at_ms);
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
        tracing::info!(command_id = %row.command_id, device = %row.device, epoch = fence.epoch,
                       "command taken over from the gateway that accepted it");
        let action = self
            .ctx
            .plant
            .device(&row.device)
            .and_then(|d| d.action(&row.action));
        let checked = match action {
            Some(a) => self.recheck(&row, a).await.map(|p| (a, p)),
            None => Err((
                crate::contract::ErrorCode::InvalidParams,
                format!(
                    "this gateway's plant has no action {} on {}: the gateways' plant files \
                     differ; nothing was written.",
                    row.action, row.device
                ),
            )),
        };
        let mut machine = Machine::new(action.map_or_else(inert_profile, profile));
        machine.on(Event::Accept);
        match checked {
            Ok((action, params)) => self.supervise(cmd, action, params, machine, accepted),
            Err((code, detail)) => self.refuse_adopted(&cmd, machine, code, detail).await?,
        }
        Ok(())
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
        self.admit(&sub, action, &params).await?;
        Ok(params)
    }

    /// Ends a taken-over command the owner's checks refused: `failed` with the code.
    async fn refuse_adopted(
        &self,
        cmd: &Arc<LiveCommand>,
        mut machine: Machine,
        code: crate::contract::ErrorCode,
        detail: String,
    ) -> Result<(), EngineError> {
        let detail = format!("Refused by the gateway that drives the device: {detail}");
        let Some(Effect::Finish(o)) = machine
            .on(Event::Reject {
                code,
                detail: detail.clone(),
            })
            .pop()
        else {
            unreachable!("a queued command refused always ends at once");
        };
        let end = Ending::new(o, Some(detail), None);
        self.ctx
            .record_or_fail(cmd, |r| end.apply(r), end.events())
            .await?;
        self.ctx.forget(cmd);
        Ok(())
    }
}

/// Whether a command was handed to its device's owner by the gateway that accepted it (its
/// `accepted` entry names the gateway it was handed to).
pub(crate) fn handed(events: &[EventRow]) -> bool {
    events
        .iter()
        .any(|e| e.event == "accepted" && e.data.get("handed_to").is_some())
}

/// The profile of an action this gateway's plant lacks: only ever refused.
fn inert_profile() -> crate::machine::Profile {
    crate::machine::Profile {
        check: crate::machine::Check::Feedback,
        idempotent: false,
        has_cancel: false,
        has_started_when: false,
        hold_ms: 0,
        max_attempts: 1,
    }
}

/// Reads the feed until the engine is gone; re-opens it (after a pause) when it fails.
async fn feed_loop(engine: Weak<Engine>) {
    loop {
        let opened = match engine.upgrade() {
            Some(e) => e.ctx.journal.feed().await,
            None => return,
        };
        let mut feed = match opened {
            Ok(Some(feed)) => feed,
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
    /// One change announced on the feed: passed on unless it is this gateway's own command
    /// (already announced here), and taken over when it waits for this gateway.
    async fn on_change(self: &Arc<Self>, change: closedloop_journal::CommandChange) {
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
        if !waiting || !matches!(self.ctx.ownership.fence(&change.device), Ok(Some(_))) {
            return;
        }
        let Ok(Some(row)) = self.ctx.journal.get(&change.command_id).await else {
            return;
        };
        if !self.mine_to_take(&row) {
            return;
        }
        if let Ok(events) = self.ctx.journal.events(&row.command_id).await
            && handed(&events)
        {
            self.spawn_adoption(row, events);
        }
    }
}
