//! Start-up recovery (DESIGN §2): what the journal says was unfinished when the gateway stopped.

use crate::EngineError;
use crate::clock::rfc3339;
use crate::code::{ErrorCode, Status};
use crate::engine::{Engine, profile};
use crate::live::LiveCommand;
use crate::machine::Machine;
use crate::supervisor::Supervisor;
use serde_json::json;
use std::sync::Arc;

impl Engine {
    /// Start-up recovery (DESIGN §2): a command that was dispatched keeps being supervised until
    /// its journaled deadline; one accepted but never dispatched is never sent late.
    pub(crate) async fn recover(&self) -> Result<(), EngineError> {
        for row in self.ctx.journal.unfinished().await? {
            let events = self.ctx.journal.events(&row.command_id).await?;
            let cmd = Arc::new(LiveCommand::new(row.clone(), events));
            let found = self
                .ctx
                .plant
                .device(&row.device)
                .and_then(|d| d.action(&row.action).map(|a| (d, a)));
            let params = found
                .and_then(|(_, a)| row.params.as_object().and_then(|m| a.check_params(m).ok()));
            let (Some((_, action)), Some(params), true, Some(deadline_ms)) =
                (found, params, row.dispatched, row.deadline_ms)
            else {
                let detail = if row.dispatched {
                    "The gateway restarted and the plant no longer declares this action as it was; its outcome is unknown."
                } else {
                    "Accepted, but the gateway stopped before it was sent; it was not sent late."
                };
                self.ctx
                    .record(
                        &cmd,
                        |r| {
                            r.status = Status::Failed.as_str().into();
                            r.error_code = Some(ErrorCode::Interrupted.as_str().into());
                            r.detail = Some(detail.into());
                            r.hint = Some(ErrorCode::Interrupted.hint().into());
                        },
                        vec![("failed", json!({"code": "INTERRUPTED", "detail": detail}))],
                    )
                    .await;
                continue;
            };
            self.ctx
                .record(
                    &cmd,
                    |_| {},
                    vec![("recovered", json!({"deadline": rfc3339(deadline_ms)}))],
                )
                .await;
            let action = Arc::new(action.clone());
            let dev = Arc::clone(&self.ctx.devices[&row.device]);
            let permit = self.ctx.group(&action.exclusive).try_acquire();
            self.ctx.remember(Arc::clone(&cmd));
            let machine = Machine::recovered(profile(&action));
            let mut sup = Supervisor::new(Arc::clone(&self.ctx), cmd, dev, action, params, machine);
            sup.deadline = Some(self.ctx.clock.instant_of(deadline_ms));
            sup.permit = permit;
            self.spawn(sup);
        }
        Ok(())
    }
}
