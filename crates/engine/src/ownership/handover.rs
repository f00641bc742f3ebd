//! One endpoint, any gateway (several gateways on one PostgreSQL journal): a call for a device
//! another gateway drives is accepted here all the same — journaled `accepted` with the gateway
//! it is handed to, which the journal's change feed wakes — and run by the device's owner, which
//! takes it over (`ownership/adopt.rs`). The caller waits here, on the journal.
//!
//! # Invariants
//! - A handed command is journaled before the call returns, like any accepted command, but
//!   without a lease: nothing here writes to its device or journals anything more about it.
//! - Only the checks that need the call itself run here (parameters, rate, confirmation); the
//!   ones that need the device's values run at the owner, which ends the command `failed` with
//!   the code when one refuses (the contract's accepted → failed edge: nothing was written). A
//!   rate limit is counted here from the shared journal under the device's lock in the
//!   database, which every gateway takes, so one budget holds whichever gateway is called.
//! - A call for a device no live gateway may drive is refused: a command handed to nobody
//!   would wait for whoever comes next. One whose lease is between owners goes to the live
//!   gateway it falls to, which claims it within a keeper round. A dead-man action is handed
//!   too: its caller's renewals here and its session's end are announced to the owner
//!   (`ownership/dead_man.rs`).

use crate::admission::refusal::Refusal;
use crate::api::new_row;
use crate::context::Change;
use crate::contract::Status;
use crate::engine::{Engine, MAX_WAIT};
use crate::views::result::CommandResult;
use crate::{EngineError, Submission};
use closedloop_journal::EventRow;
use closedloop_plant::{Action, Device, Params};
use serde_json::json;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// How often a caller waiting on a handed command reads the journal even when no change was
/// announced (a notification can be lost while the listening connection is re-opened).
const RECHECK: Duration = Duration::from_secs(1);

impl Engine {
    /// The gateway a call for `device` is handed to: the other gateway that holds its lease (as
    /// last read), else the live gateway it falls to (the lease between owners: it claims it
    /// within a keeper round), or this one while it settles a device it just took (the call
    /// runs once the device's earlier commands are recovered). `None` — refuse — when no live
    /// gateway may drive it. A rate-limited action is handed like any other (its budget was
    /// counted here, from the shared journal, under the device's lock for every gateway:
    /// `submit`), and so is a dead-man action (its renewals and its lapse announced to the
    /// owner: `ownership/dead_man.rs`).
    pub(crate) fn hand_to(&self, device: &Device) -> Option<String> {
        let own = &self.ctx.ownership;
        if own.recovering(&device.id) {
            Some(own.instance().to_string())
        } else {
            let not = own.fence(&device.id).err()?;
            not.owner.or_else(|| own.desired(&device.id))
        }
    }

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
        let received = crate::admission::submit::received(&sub, &request_id);
        let events =
            [("received", received), ("accepted", accepted)].map(|(event, data)| EventRow {
                at_ms: now,
                event: event.into(),
                data,
            });
        if let Err(e) = self.ctx.journal.insert(&row, &events).await {
            // The same keyed call taken by another gateway at the same moment: its command.
            if let Some(key) = &sub.idempotency_key
                && let Some(prev) = self.ctx.journal.by_idempotency_key(key).await?
            {
                return self.replay(&sub, &request_id, action, prev, wait).await;
            }
            return Err(e.into());
        }
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
                // In steps: a command this gateway lets go of (its lease lost) ends elsewhere.
                cmd.wait_terminal(until.min(Instant::now() + RECHECK)).await;
                if cmd.status().is_terminal() || Instant::now() >= until {
                    return Ok(cmd.result());
                }
                continue;
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

    /// `cancel_command` for a command another gateway runs or will take over: the request is
    /// kept on its timeline (`cancel_requested`, so a gateway that takes it over later ends it
    /// `cancelled` unsent) and announced on the feed (so the one running it cancels it now),
    /// then the command is followed up to `wait`. A request announced while the running
    /// gateway's listener was away is read from the timeline once it listens again
    /// (`Engine::cancels_missed`).
    pub(crate) async fn cancel_elsewhere(
        &self,
        command_id: &str,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        let by = json!({"gateway": self.ctx.ownership.instance()});
        let entry = EventRow {
            at_ms: self.ctx.clock.now_ms(),
            event: crate::ownership::adopt::CANCEL_REQUESTED.into(),
            data: by,
        };
        self.ctx.journal.append(command_id, &[entry]).await?;
        self.ctx.journal.announce_cancel(command_id).await?;
        self.follow(command_id, wait).await
    }
}
