//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), served from the journal.
//!
//! For a client that declares the extension, an action tool answers with a task whose `taskId` is
//! the `command_id`. `tasks/get` reads the command from the engine (memory while it is live, the
//! journal after), so a task survives a gateway restart. Mapping (DESIGN §4): `working` until the
//! command is terminal; `completed` carrying the tool result for completed, sent, rejected, failed
//! and timeout (the last three with `isError: true`); `cancelled` for cancelled; task `failed` only
//! for protocol errors.

use crate::Server;
use crate::call::command_result;
use closedloop_engine::{CommandResult, EngineError, Status};
use rmcp::model::{
    CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, JsonObject,
    Task, TaskPayload, TaskStatus,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::time::Duration;

/// Whether this request's client declared the Tasks extension.
pub(crate) fn client_wants_tasks(cx: &RequestContext<RoleServer>) -> bool {
    cx.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// How often a client should poll: a quarter of the expected remaining time, within 50 ms–2 s.
fn poll_interval_ms(r: &CommandResult) -> u64 {
    let remaining = r.estimated_remaining_seconds.unwrap_or(0.0);
    ((remaining * 1000.0 / 4.0) as u64).clamp(50, 2000)
}

/// The task view of a command.
pub(crate) fn task_of(r: &CommandResult) -> Task {
    let status = match r.status {
        Status::Accepted | Status::Running => TaskStatus::Working,
        Status::Cancelled => TaskStatus::Cancelled,
        _ => TaskStatus::Completed,
    };
    let created = r
        .accepted_at
        .clone()
        .unwrap_or_else(|| r.updated_at.clone());
    let mut task = Task::new(r.command_id.clone(), status, created, r.updated_at.clone())
        .with_status_message(r.summary());
    if status == TaskStatus::Working {
        task = task.with_poll_interval_ms(poll_interval_ms(r));
    }
    task
}

/// The `CreateTaskResult` an action tool returns to a Tasks client.
pub(crate) fn created(r: &CommandResult) -> CreateTaskResult {
    CreateTaskResult::new(task_of(r))
}

fn detailed(r: &CommandResult) -> DetailedTask {
    let task = task_of(r);
    let payload = match task.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => {
            let result = serde_json::to_value(command_result(r)).unwrap_or_default();
            TaskPayload::Completed {
                result: result.as_object().cloned().unwrap_or_else(JsonObject::new),
            }
        }
    };
    DetailedTask::new(task, payload)
}

fn task_error(e: EngineError) -> McpError {
    match e {
        EngineError::UnknownCommand(id) => {
            McpError::invalid_params(format!("no task {id:?}: no command has this id"), None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

impl Server {
    /// `tasks/get`.
    pub(crate) async fn get_task_impl(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        if !self.caller(&cx).may_read() {
            return Err(McpError::invalid_request(
                "this caller may not read commands (no read scope)",
                None,
            ));
        }
        let r = self
            .engine
            .status(&request.task_id, Duration::ZERO)
            .await
            .map_err(task_error)?;
        Ok(GetTaskResult::new(detailed(&r)))
    }

    /// `tasks/cancel`: `cancel_command` by another name.
    pub(crate) async fn cancel_task_impl(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&cx);
        let r = self
            .engine
            .status(&request.task_id, Duration::ZERO)
            .await
            .map_err(task_error)?;
        if !caller.may_actuate(&r.device) {
            return Err(McpError::invalid_request(
                format!("{} may not cancel commands of {}", caller.name, r.device),
                None,
            ));
        }
        self.engine
            .cancel(&request.task_id)
            .await
            .map_err(task_error)?;
        Ok(())
    }
}
