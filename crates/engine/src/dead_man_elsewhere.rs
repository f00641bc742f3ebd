//! Dead-man actions (`keepalive_s`) run by another gateway: a call taken here is handed to the
//! device's owner like any other, while its caller keeps asking *here*. Each `get_command_status`
//! (or `keep_alive`) here is announced on the journal's feed as a renewal, and the end of the
//! caller's MCP session here as a lapse, for the gateway that runs the command to apply.
//!
//! A renewal announced while the running gateway's listener is away is lost: the command may
//! then lapse early — the motion stops, the safe side. A lost lapse leaves the command to its
//! keepalive, which runs out within `keepalive_s` since nobody renews it any more.

use crate::engine::Engine;

impl Engine {
    /// Renews the dead-man command `command_id` at the gateway that runs it, when it is not
    /// this one (a shared journal): announced when the journal holds it unfinished and its
    /// action has a `keepalive_s`.
    pub(crate) async fn renew_elsewhere(&self, command_id: &str) {
        if !self.ctx.ownership.shared() || self.ctx.finished.contains(command_id) {
            return;
        }
        let row = match self.ctx.journal.get(command_id).await {
            Ok(Some(row)) => row,
            Ok(None) => return,
            Err(e) => {
                return tracing::warn!(command_id, error = %e, "cannot read a command to renew it");
            }
        };
        let dead_man = (self.ctx.plant.device(&row.device))
            .and_then(|d| d.action(&row.action))
            .is_some_and(|a| a.keepalive_s.is_some());
        let running = !matches!(
            row.status.as_str(),
            "completed" | "failed" | "timeout" | "cancelled" | "rejected"
        );
        if dead_man
            && running
            && let Err(e) = self.ctx.journal.announce_renew(command_id).await
        {
            tracing::warn!(command_id, error = %e, "a renewal could not be announced");
        }
    }

    /// Tells the gateway that runs `command_id` (not this one) that its caller is gone: a
    /// dead-man command there ends now, `why` opening its detail. Announced in the background
    /// (the caller is a session being dropped); nothing when the journal is not shared or the
    /// command ended here.
    pub(crate) fn lapse_elsewhere(&self, command_id: &str, why: &str) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.ctx.ownership.shared() || self.ctx.finished.contains(command_id) {
            return;
        }
        let (journal, id, why) = (
            self.ctx.journal.clone(),
            command_id.to_string(),
            why.to_string(),
        );
        runtime.spawn(async move {
            if let Err(e) = journal.announce_lapse(&id, &why).await {
                tracing::warn!(command_id = %id, error = %e, "a lapse could not be announced; the keepalive ends it");
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
