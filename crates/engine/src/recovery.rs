//! Start-up recovery (docs/architecture.md): what the journal says was unfinished when the gateway
//! stopped.

use crate::EngineError;
use crate::clock::rfc3339;
use crate::context::live::LiveCommand;
use crate::contract::Status;
use crate::engine::Engine;
use crate::machine::profile::profile;
use crate::machine::{Effect, Event, Found, Machine};
use crate::supervision::Supervisor;
use crate::supervision::terminal::Ending;
use serde_json::json;
use std::sync::Arc;

impl Engine {
    /// Start-up recovery (docs/architecture.md): a command whose write the device acknowledged
    /// keeps being supervised until its journaled deadline; one accepted but never acknowledged is
    /// never sent (again) late: it ends `failed INTERRUPTED`. On a journal several gateways
    /// share, nothing is recovered here: each device's commands are recovered by the gateway
    /// that takes its lease ([`Engine::recover_device`]).
    pub(crate) async fn recover(&self) -> Result<(), EngineError> {
        if self.ctx.ownership.shared() {
            return Ok(());
        }
        let rows = self.ctx.journal.unfinished().await?;
        self.recover_rows(rows).await
    }

    /// Recovery of one device whose lease this gateway just took: its unfinished commands that
    /// no task here supervises under this lease (a dead or paused owner's, or this gateway's
    /// own under a lease it lost since), by the same rules as at start-up — except the ones
    /// accepted and never dispatched: nothing was written for those, and they move to this
    /// gateway with the device (taken over once it is recovered, `ownership/adopt.rs`), as queued
    /// commands should.
    pub(crate) async fn recover_device(&self, device: &str) -> Result<(), EngineError> {
        let epoch = self
            .ctx
            .ownership
            .fence(device)
            .ok()
            .flatten()
            .map(|f| f.epoch);
        let rows = self.ctx.journal.unfinished().await?;
        let mut mine = Vec::new();
        for row in rows.into_iter().filter(|r| r.device == device) {
            match self.ctx.live(&row.command_id) {
                Some(cmd) if cmd.epoch() == epoch => continue,
                // Its task can no longer write (its lease is gone): the journal says the rest.
                Some(stale) => self.ctx.drop_fenced(&stale),
                None => {}
            }
            mine.push(row);
        }
        // Accepted and never dispatched: left to the take-over that follows every recovery
        // (`Engine::adopt_waiting`, the same keeper round), retried every round until it runs.
        mine.retain(|r| r.status != Status::Accepted.as_str() || r.dispatched);
        self.recover_rows(mine).await
    }

    async fn recover_rows(
        &self,
        rows: Vec<closedloop_journal::CommandRow>,
    ) -> Result<(), EngineError> {
        for row in rows {
            let events = self.ctx.journal.events(&row.command_id).await?;
            let recovery = self.recovery_of(&events);
            let events_for_rule = events.clone();
            let fence = self.ctx.ownership.fence(&row.device).ok().flatten();
            let cmd = Arc::new(LiveCommand::new(
                row.clone(),
                events,
                fence.as_ref().map(|f| f.epoch),
            ));
            let found = self
                .ctx
                .plant
                .device(&row.device)
                .and_then(|d| d.action(&row.action).map(|a| (d, a)));
            let params = found
                .and_then(|(_, a)| row.params.as_object().and_then(|m| a.check_params(m).ok()));
            // Only a write the device acknowledged (`running`) is supervised after a restart: one
            // that was on its way when the gateway stopped may or may not have arrived, and
            // nothing read now can tell which.
            let acked = row.status == Status::Running.as_str();
            if let (Some((_, action)), Some(params), false, true) =
                (found, params.clone(), acked, row.dispatched)
                && !action.cancel.is_empty()
            {
                // The write may have arrived and set the axis moving: stop it, hold the device.
                self.stop_unconfirmed(cmd, action, params, recovery);
                continue;
            }
            let (Some((_, action)), Some(params), true, Some(deadline_ms)) =
                (found, params, acked, row.deadline_ms)
            else {
                let found = if acked {
                    Found::Undeclared
                } else if row.dispatched {
                    Found::InFlight
                } else {
                    Found::NotSent
                };
                self.end_unsupervised(&cmd, found, &recovery).await?;
                continue;
            };
            let found = (action, params, deadline_ms);
            let at = (&events_for_rule[..], fence.as_ref());
            self.supervise_recovered(&row, cmd, at, found, recovery)
                .await?;
        }
        Ok(())
    }

    /// An acknowledged command of a declared action, supervised again until its journaled
    /// deadline: `recovered` journaled (by whom, under which lease), the device's permit taken
    /// back, and the early rule kept ("already so" counts only on reads `expect_s` after the ack).
    async fn supervise_recovered(
        &self,
        row: &closedloop_journal::CommandRow,
        cmd: Arc<LiveCommand>,
        (events_for_rule, fence): (
            &[closedloop_journal::EventRow],
            Option<&closedloop_journal::Fence>,
        ),
        (action, params, deadline_ms): (&closedloop_plant::Action, closedloop_plant::Params, i64),
        recovery: crate::views::detail::Recovery,
    ) -> Result<(), EngineError> {
        // Among gateways, which one recovered it and under which lease: the timeline of a
        // move whose owner died says who judged the rest.
        let mut recovered = json!({"deadline": rfc3339(deadline_ms)});
        if let Some(f) = fence {
            recovered["by"] = json!(f.owner);
            recovered["epoch"] = json!(f.epoch);
        }
        self.ctx
            .record_or_fail(&cmd, |_| {}, vec![("recovered", recovered)])
            .await?;
        let action = Arc::new(action.clone());
        let dev = Arc::clone(&self.ctx.devices[&row.device]);
        let permit = self.ctx.group(&action.exclusive).try_acquire();
        self.ctx.remember(Arc::clone(&cmd));
        let machine = Machine::recovered(profile(&action));
        // The "already so" rule survives the restart: without the values from before the
        // write, a done_when that holds counts only on reads taken expect_s after the ack.
        let ack_ms = cmd_events_at(events_for_rule, "device_ack").unwrap_or(row.accepted_at_ms);
        let expect_s = events_for_rule
            .iter()
            .find(|e| e.event == "dispatched")
            .and_then(|e| e.data.get("expect_s"))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0);
        let mut sup = Supervisor::new(Arc::clone(&self.ctx), cmd, dev, action, params, machine);
        sup.deadline = Some(self.ctx.clock.instant_of(deadline_ms));
        sup.cmd.set_deadline(self.ctx.clock.instant_of(deadline_ms));
        crate::supervision::hold(&sup.permit, permit);
        sup.baseline_done = true;
        sup.recovery = recovery;
        sup.expect_s = expect_s;
        sup.settle_until_ms = ack_ms + (expect_s * 1000.0).round() as i64;
        self.spawn(sup);
        Ok(())
    }
}

impl Engine {
    /// A command journaled `dispatched` but never acknowledged, whose action has a cancel plan:
    /// its device takes no other command until the stop is written and `stopped_when` holds
    /// (docs/architecture.md, recovery stops what it cannot confirm).
    fn stop_unconfirmed(
        &self,
        cmd: Arc<LiveCommand>,
        action: &closedloop_plant::Action,
        params: closedloop_plant::Params,
        recovery: crate::views::detail::Recovery,
    ) {
        let action = Arc::new(action.clone());
        let row = cmd.row();
        let dev = Arc::clone(&self.ctx.devices[&row.device]);
        let permit = self.ctx.group(&action.exclusive).try_acquire();
        self.ctx.remember(Arc::clone(&cmd));
        // A new machine: `stop_after_restart` tells it what was found (`Found::InFlight`).
        let machine = Machine::new(profile(&action));
        let mut sup = Supervisor::new(Arc::clone(&self.ctx), cmd, dev, action, params, machine);
        sup.recovery = recovery;
        crate::supervision::hold(&sup.permit, permit);
        let remains = crate::supervision::crash::Remains::of(&sup);
        self.spawn_task(crate::supervision::crash::ended_if_it_panics(
            remains,
            sup.stop_after_restart(),
        ));
    }
}

impl Engine {
    /// Ends a command recovery cannot supervise, as the machine decides (`failed
    /// INTERRUPTED`, saying what was found); no device is touched.
    async fn end_unsupervised(
        &self,
        cmd: &LiveCommand,
        found: Found,
        recovery: &crate::views::detail::Recovery,
    ) -> Result<(), EngineError> {
        // No cancel plan is known here (the action may be gone): the machine cannot ask for one.
        let mut machine = Machine::new(crate::machine::profile::inert());
        let Some(Effect::Finish(o)) = machine.on(Event::Restarted(found)).pop() else {
            unreachable!("an unsupervised restart always ends at once");
        };
        let end = Ending::new(
            o,
            Some(crate::views::detail::restart_text(found, recovery)),
            None,
        );
        self.ctx
            .record_or_fail(cmd, |r| end.apply(r), end.events())
            .await?;
        Ok(())
    }
}

impl Engine {
    /// Who recovers a command with this timeline: this gateway at its start, or — when the
    /// gateway that last ran it (the `by` of its last `dispatched`, `claimed` or `recovered`
    /// entry) is another — this gateway taking the device over from it.
    fn recovery_of(
        &self,
        events: &[closedloop_journal::EventRow],
    ) -> crate::views::detail::Recovery {
        let here = self.ctx.ownership.instance();
        let ran = ["dispatched", "claimed", "recovered"];
        let by = (events.iter().rev())
            .filter(|e| ran.contains(&e.event.as_str()))
            .find_map(|e| e.data.get("by")?.as_str());
        match by {
            Some(from) if from != here => crate::views::detail::Recovery::TakenOver {
                from: from.to_string(),
                here: here.to_string(),
            },
            _ => crate::views::detail::Recovery::AtStart,
        }
    }
}

/// When the first `event` of a timeline happened.
fn cmd_events_at(events: &[closedloop_journal::EventRow], event: &str) -> Option<i64> {
    events.iter().find(|e| e.event == event).map(|e| e.at_ms)
}
