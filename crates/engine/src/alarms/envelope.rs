//! The safety envelope's part of the engine's API: the standing alarms and their change feed,
//! and the end of a dead-man action whose renewals can no longer come. (Rate limits need no API:
//! admission applies them.)

use crate::Engine;
use crate::alarms::AlarmInfo;

impl Engine {
    /// Every standing alarm with its state (`[[alarm]]`).
    pub fn alarms(&self) -> Vec<AlarmInfo> {
        self.ctx.alarms.list(&self.ctx.plant.alarms)
    }

    /// A receiver woken on every raise and clear of a standing alarm (for `alarm://active`
    /// subscribers): whoever shows the alarms learns of a change without polling them.
    pub fn watch_alarms(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ctx.alarms.watch()
    }

    /// Ends a running dead-man action (`keepalive_s`) now, as if its caller had stopped asking:
    /// the cancel plan is written and it ends `cancelled` `DEADMAN`, its detail starting with
    /// `why`. For a transport that knows the caller is gone (the MCP session that started it
    /// ended) — waiting out the keepalive would leave the motion running for nobody.
    ///
    /// Returns whether there was such a command: false for an unknown or finished command and
    /// for one whose action has no `keepalive_s` (nothing is done to it). A command still queued
    /// is dropped instead: nothing was sent.
    ///
    /// A command not known here, on a journal several gateways share, may run at another: the
    /// lapse is announced to it (`ownership/dead_man.rs`), and this returns false.
    pub fn lapse(&self, command_id: &str, why: &str) -> bool {
        let Some(cmd) = self.ctx.live(command_id) else {
            self.lapse_elsewhere(command_id, why);
            return false;
        };
        if cmd.status().is_terminal() {
            return false;
        }
        let row = cmd.row();
        let dead_man = self
            .ctx
            .plant
            .device(&row.device)
            .and_then(|d| d.action(&row.action))
            .is_some_and(|a| a.keepalive_s.is_some());
        if dead_man {
            cmd.lapse(why);
        }
        dead_man
    }
}
