//! The command tools: `get_command_status`, `keep_alive`, `cancel_command` and `list_commands`.

use super::{
    command_id, command_result, engine_error, opt_str, structured, take_wait, unauthorized,
    unknown_command, unknown_device,
};
use crate::{Caller, Server};
use closedloop_engine::{CommandResult, EngineError, ErrorCode};
use rmcp::model::{CallToolResult, JsonObject, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;

/// Default `wait_s` of `get_command_status`.
const STATUS_WAIT_DEFAULT: f64 = 3.0;
/// How long `cancel_command` waits, by default, for the device to read stopped.
const CANCEL_WAIT_DEFAULT: f64 = 5.0;
/// Largest `limit` of `list_commands`.
const LIST_MAX: u64 = 200;

impl Server {
    /// `get_command_status(command_id, wait_s)`: the result object, waiting up to `wait_s` for
    /// a final status. Renews a dead-man command only when its own requester asks.
    pub(super) async fn get_command_status(
        &self,
        args: &JsonObject,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let mut args = args.clone();
        let wait = take_wait(&mut args, "wait_s", STATUS_WAIT_DEFAULT)?;
        let id = command_id(&args)?;
        let progress = cx.meta.get_progress_token().and_then(|token| {
            let mut watch = self.engine.watch(&id)?;
            let peer = cx.peer.clone();
            let engine = std::sync::Arc::clone(&self.engine);
            let id = id.clone();
            Some(tokio::spawn(async move {
                let mut n = 0.0;
                while watch.changed().await.is_ok() {
                    n += 1.0;
                    let Ok(r) = engine.peek(&id).await else {
                        break;
                    };
                    let msg = format!("{}: {}", r.status, r.summary());
                    let p = ProgressNotificationParam::new(token.clone(), n).with_message(msg);
                    if peer.notify_progress(p).await.is_err() || r.status.is_terminal() {
                        break;
                    }
                }
            }))
        });
        let result = self.engine.status_by(&id, wait, &caller.name).await;
        if let Some(task) = progress {
            task.abort();
        }
        command_answer(result)
    }

    /// `keep_alive(command_id)`: renews a dead-man command (`keepalive_s`) exactly as
    /// `get_command_status` does, and answers at once with its result — for an agent that only
    /// needs the motion to go on, not to wait on it. Only the token that started the command
    /// renews it: anyone else is refused `UNAUTHORIZED`, checked before anything else, so a
    /// motion never outlives the agent that started it.
    pub(super) async fn keep_alive(
        &self,
        args: &JsonObject,
        caller: &Caller,
    ) -> Result<CallToolResult, McpError> {
        let id = command_id(args)?;
        match self.engine.started_by(&id, &caller.name).await {
            Ok(true) => {}
            Ok(false) => {
                return Ok(unauthorized(
                    caller,
                    "renew a command another caller started (only its requester keeps it alive)",
                ));
            }
            Err(EngineError::UnknownCommand(id)) => return Ok(unknown_command(&id)),
            Err(e) => return Err(engine_error(e)),
        }
        command_answer(
            self.engine
                .status_by(&id, Duration::ZERO, &caller.name)
                .await,
        )
    }

    pub(super) async fn cancel_command(
        &self,
        args: &JsonObject,
        caller: &Caller,
    ) -> Result<CallToolResult, McpError> {
        let id = command_id(args)?;
        // Read, never renewed: a caller refused here once kept a dead-man jog alive.
        match self.engine.peek(&id).await {
            Ok(r) if !caller.may_actuate(&r.device) => {
                return Ok(unauthorized(
                    caller,
                    &format!("cancel commands of {}", r.device),
                ));
            }
            Err(EngineError::UnknownCommand(id)) => return Ok(unknown_command(&id)),
            _ => {}
        }
        let wait = take_wait(&mut args.clone(), "wait_s", CANCEL_WAIT_DEFAULT)?;
        command_answer(self.engine.cancel(&id, wait).await)
    }

    pub(super) async fn list_commands(
        &self,
        args: &JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let device = opt_str(args, "device")?;
        let status = opt_str(args, "status")?;
        if let Some(d) = &device
            && self.engine.plant().device(d).is_none()
        {
            return Ok(unknown_device(&self.engine, d));
        }
        if let Some(s) = &status
            && closedloop_engine::Status::parse(s).is_none()
        {
            let code = ErrorCode::InvalidParams;
            let detail = format!(
                "status {s:?} is not a command status; use one of rejected, accepted, running, completed, failed, timeout, sent, cancelled."
            );
            let v = json!({"error_code": code.as_str(), "detail": detail, "hint": code.hint()});
            return Ok(structured(v, true, format!("INVALID_PARAMS: {detail}")));
        }
        let limit = match args.get("limit") {
            None | Some(Value::Null) => 20,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=LIST_MAX).contains(&n) => n,
                _ => {
                    return Err(McpError::invalid_params(
                        format!("limit must be an integer from 1 to {LIST_MAX}"),
                        None,
                    ));
                }
            },
        };
        let list = self
            .engine
            .list(device.as_deref(), status.as_deref(), limit as u32)
            .await
            .map_err(engine_error)?;
        let (rows, omitted) = list_rows(&list);
        let mut text = if list.is_empty() {
            "No commands.".to_string()
        } else {
            list.iter()
                .take(rows.len())
                .map(|r| format!("{} {}.{} {}", r.command_id, r.device, r.action, r.status))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let mut body = json!({"commands": rows});
        if omitted > 0 {
            body["omitted"] = json!(omitted);
            text.push_str(&format!(
                "\n({omitted} older commands left out to keep this answer short: filter by device or status, or lower limit.)"
            ));
        }
        Ok(structured(body, false, text))
    }
}

/// The answer about one command: its result, or `UNKNOWN_COMMAND` as an `isError` result.
fn command_answer(result: Result<CommandResult, EngineError>) -> Result<CallToolResult, McpError> {
    match result {
        Ok(r) => Ok(command_result(r)),
        Err(EngineError::UnknownCommand(id)) => Ok(unknown_command(&id)),
        Err(e) => Err(engine_error(e)),
    }
}

/// Bytes of `list_commands` rows at most: the answer stays under 4 KB for a model.
const LIST_BYTES: usize = 3_500;

/// One short row per command, newest first, while they fit in [`LIST_BYTES`]; and how many
/// were left out. Details, evidence and timelines are one `get_command_status` away.
fn list_rows(list: &[CommandResult]) -> (Vec<Value>, usize) {
    let mut rows = Vec::new();
    let mut bytes = 0;
    for r in list {
        let mut row = json!({
            "command_id": r.command_id, "device": r.device, "action": r.action,
            "params": r.params, "status": r.status, "verified": r.verified,
            "accepted_at": r.accepted_at, "updated_at": r.updated_at,
        });
        if let Some(c) = &r.error_code {
            row["error_code"] = json!(c.as_str());
        }
        bytes += row.to_string().len() + 1;
        if bytes > LIST_BYTES {
            break;
        }
        rows.push(row);
    }
    let omitted = list.len() - rows.len();
    (rows, omitted)
}
