//! One endpoint, any gateway (several gateways on one PostgreSQL journal): a call for a device
//! another gateway drives is accepted here all the same — journaled `accepted` with the gateway
//! it is handed to, which the journal's change feed wakes — and run by the device's owner, which
//! takes it over (`adopt.rs`). The caller waits here, on the journal.
//!
//! # Invariants
//! - A handed command is journaled before the call returns, like any accepted command, but
//!   without a lease: nothing here writes to its device or journals anything more about it.
//! - Only the checks that need the call itself run here (parameters, rate, confirmation); the
//!   ones that need the device's values run at the owner, which ends the command `failed` with
//!   the code when one refuses (the contract's accepted → failed edge: nothing was written).
//! - A call for a device that no live gateway holds is refused as before: a command handed to
//!   nobody would wait for whoever comes next.

use crate::context::Change;
use crate::contract::Status;
use crate::engine::{Engine, MAX_WAIT};
use crate::refusal::Refusal;
use crate::result::CommandResult;
use crate::submit::new_row;
use crate::{EngineError, Submission};
use closedloop_journal::EventRow;
use closedloop_plant::{Action, Params};
use serde_json::json;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// How often a caller waiting on a handed command reads the journal even when no change was
/// announced (a notification can be lost while the listening connection is re-opened).
const RECHECK: Duration = Duration::from_secs(1);

impl Engine {
    /// Accepts a call for a device `owner` drives: journaled `accepted` (durable before this
    /// returns) with `handed_to` on its `accepted` entry, announced, then waited on up to `wait`.
    pub(crate) async fn hand(
        &self,
        sub: Submission,
        request_id: String,
        action: &Action,
        params: Params,
        wait: Duration,
        owner: String,
    ) -> Result<CommandResult, EngineError> {
        if let Err((code, detail)) = crate::admission::confirmed(&sub, action) {
            return self
                .reject(&sub, &request_id, action, Refusal::kept(code, detail))
                .await;
        }
        let now = self.ctx.clock.now_ms();
        let row = new_row(&sub, &request_id, action, &params, Status::Accepted, now);
        let mut accepted = json!({"gateway": self.ctx.ownership.instance(), "handed_to": owner});
        if let Some(by) = &sub.confirmed_by {
            accepted["confirmed_by"] = json!(by);
        }
        let received = match &sub.traceparent {
            Some(t) => json!({"request_id": request_id, "traceparent": t}),
            None => json!({"request_id": request_id}),
        };
        let events =
            [("received", received), ("accepted", accepted)].map(|(event, data)| EventRow {
                at_ms: now,
                event: event.into(),
                data,
            });
        self.ctx.journal.insert(&row, &events).await?;
        tracing::info!(request_id = %row.request_id, command_id = %row.command_id, device = %row.device,
                       action = %row.action, owner = %owner, "command accepted and handed to the device's owner");
        let _ = self.ctx.changes.send(Change::Command {
            command_id: row.command_id.clone(),
            device: row.device.clone(),
            status: "accepted".into(),
            elsewhere: false,
        });
        self.follow(&row.command_id, wait).await
    }

    /// The result of a command this gateway may not be running, waiting up to `wait` (capped at
    /// [`MAX_WAIT`]) for it to end: read again on each change announced for it (here or, through
    /// the journal's feed, by another gateway) and every [`RECHECK`].
    pub(crate) async fn follow(
        &self,
        command_id: &str,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        let until = Instant::now() + wait.min(MAX_WAIT);
        let mut changes = self.ctx.changes.subscribe();
        loop {
            if let Some(cmd) = self.ctx.live(command_id) {
                cmd.wait_terminal(until).await;
                return Ok(cmd.result());
            }
            let result = self.peek(command_id).await?;
            if result.status.is_terminal() || Instant::now() >= until {
                return Ok(result);
            }
            let next = until.min(Instant::now() + RECHECK);
            loop {
                let change = tokio::select! {
                    c = changes.recv() => c,
                    _ = tokio::time::sleep_until(next) => break,
                };
                match change {
                    Ok(Change::Command { command_id: id, .. }) if id == command_id => break,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => {
                        tokio::time::sleep_until(next).await;
                        break;
                    }
                }
            }
        }
    }
}
