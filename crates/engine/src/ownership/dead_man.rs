//! Dead-man actions (`keepalive_s`) run by another gateway: a call taken here is handed to the
//! device's owner like any other, while its caller keeps asking *here*. Each `get_command_status`
//! (or `keep_alive`) here is announced on the journal's feed as a renewal, and the end of the
//! caller's MCP session here as a lapse, for the gateway that runs the command to apply.
//!
//! A renewal announced while the running gateway's listener is away is lost: the command may
//! then lapse early — the motion stops, the safe side. A lost lapse leaves the command to its
//! keepalive, which runs out within `keepalive_s` since nobody renews it any more.

use crate::context::Context;
use crate::engine::Engine;
use closedloop_journal::EventRow;
use serde_json::json;

/// The timeline entry a gateway adds to a dead-man command another gateway runs (or has yet to
/// take over) when its caller's session ends there: the one that takes it over later ends it
/// unsent instead of starting a motion nobody can keep going.
pub(crate) const LAPSE_REQUESTED: &str = "lapse_requested";

/// Whether the journal holds `command_id` unfinished, as a dead-man action of this plant; a
/// read that fails is logged and answers no.
async fn running_dead_man(ctx: &Context, command_id: &str) -> bool {
    running_dead_man_of(ctx, command_id, None).await
}

/// [`running_dead_man`], and started by `asker` when one is named.
async fn running_dead_man_of(ctx: &Context, command_id: &str, asker: Option<&str>) -> bool {
    let row = match ctx.journal.get(command_id).await {
        Ok(Some(row)) => row,
        Ok(None) => return false,
        Err(e) => {
            tracing::warn!(command_id, error = %e, "cannot read a command another gateway runs");
            return false;
        }
    };
    let dead_man = (ctx.plant.device(&row.device))
        .and_then(|d| d.action(&row.action))
        .is_some_and(|a| a.keepalive_s.is_some());
    let running = !matches!(
        row.status.as_str(),
        "completed" | "failed" | "timeout" | "cancelled" | "rejected"
    );
    let mine = asker.is_none_or(|a| row.caller.as_deref() == Some(a));
    dead_man && running && mine
}

impl Engine {
    /// Renews the dead-man command `command_id` at the gateway that runs it, when it is not
    /// this one (a shared journal): announced when the journal holds it unfinished and its
    /// action has a `keepalive_s`.
    /// Only `asker`'s asking renews, when one is named (the requester, [`Engine::status_by`]).
    pub(crate) async fn renew_elsewhere_by(&self, command_id: &str, asker: Option<&str>) {
        if !self.ctx.ownership.shared() || self.ctx.finished.contains(command_id) {
            return;
        }
        if running_dead_man_of(&self.ctx, command_id, asker).await
            && let Err(e) = self.ctx.journal.announce_renew(command_id).await
        {
            tracing::warn!(command_id, error = %e, "a renewal could not be announced");
        }
    }

    /// Tells the gateway that runs `command_id` (not this one) that its caller is gone: a
    /// dead-man command there ends now, `why` opening its detail. Done in the background (the
    /// caller is a session being dropped): a `lapse_requested` entry on its timeline, for a
    /// gateway that has yet to take it over, then the announcement, for the one running it.
    /// Nothing when the journal is not shared or the command ended here.
    pub(crate) fn lapse_elsewhere(&self, command_id: &str, why: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.ctx.ownership.shared() || self.ctx.finished.contains(command_id) {
            return;
        }
        let (ctx, id, why) = (
            std::sync::Arc::clone(&self.ctx),
            command_id.to_string(),
            why.to_string(),
        );
        let gateway = self.ctx.ownership.instance().to_string();
        runtime.spawn(async move {
            if !running_dead_man(&ctx, &id).await {
                return;
            }
            let entry = EventRow {
                at_ms: ctx.clock.now_ms(),
                event: LAPSE_REQUESTED.into(),
                data: json!({"gateway": gateway, "why": why}),
            };
            let told = match ctx.journal.append(&id, &[entry]).await {
                Ok(()) => ctx.journal.announce_lapse(&id, &why).await,
                Err(e) => Err(e),
            };
            if let Err(e) = told {
                tracing::warn!(command_id = %id, error = %e, "a lapse could not be told; the keepalive ends it");
            }
        });
    }

    /// Whether `command_id` may still be running somewhere: live here and not ended, or not known
    /// here at all on a shared journal (another gateway may run it).
    pub fn may_be_running(&self, command_id: &str) -> bool {
        match self.ctx.live(command_id) {
            Some(cmd) => !cmd.status().is_terminal(),
            None => self.ctx.ownership.shared() && !self.ctx.finished.contains(command_id),
        }
    }
}
