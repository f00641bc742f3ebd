//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), served from the journal.
//!
//! For a client that declares the extension, an action tool answers with a task whose `taskId` is
//! the `command_id`. `tasks/get` reads the command from the engine (memory while it is live, the
//! journal after), so a task survives a gateway restart. Mapping (docs/architecture.md): `working`
//! until the command is terminal; `completed` carrying the tool result for completed, sent,
//! rejected, failed and timeout (the last three with `isError: true`); `cancelled` for cancelled;
//! task `failed` only for protocol errors.

use crate::Server;
use crate::call::command_result;
use closedloop_engine::{CommandResult, EngineError, Status};
use rmcp::model::{
    CallToolResult, CancelTaskParams, CreateTaskResult, DetailedTask, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, GetTaskParams,
    GetTaskResult, InputRequest, InputRequests, JsonObject, Task, TaskPayload, TaskStatus,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::time::Duration;

/// Whether this request's client speaks the Tasks extension: it declared it, on protocol
/// 2026-07-28 (the extension's protocol). A 2025 session that lists the extension in its
/// capabilities still gets plain tool results, which is what 2025 clients (the MCP Inspector in
/// its default mode among them) can read.
pub(crate) fn client_wants_tasks(cx: &RequestContext<RoleServer>) -> bool {
    let modern = cx.protocol_version().is_some_and(|v| !v.has_initialize());
    modern && cx.client_capabilities().is_some_and(|c| c.supports_tasks())
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

/// The key of the one input a confirmation task asks for.
const CONFIRM_KEY: &str = "confirm";

/// For a `needs_confirmation` result made for a Tasks client: the task, in `input_required`,
/// under the id the command will have once the user confirms.
pub(crate) fn confirmation_task(r: &CallToolResult) -> Option<CreateTaskResult> {
    let v = r.structured_content.as_ref()?;
    if v["status"] != "needs_confirmation" {
        return None;
    }
    let id = v["confirmation_task"].as_str()?;
    let now = closedloop_engine::clock::rfc3339(closedloop_engine::clock::Clock::new().now_ms());
    let detail = v["detail"]
        .as_str()
        .unwrap_or("needs a person's confirmation");
    let task =
        Task::new(id, TaskStatus::InputRequired, now.clone(), now).with_status_message(detail);
    Some(CreateTaskResult::new(task))
}

/// The form a confirmation task shows: one boolean, "confirm".
fn confirm_request(message: String) -> Option<InputRequests> {
    let schema = ElicitationSchema::builder()
        .required_bool(CONFIRM_KEY)
        .build()
        .ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    let mut requests = InputRequests::new();
    requests.insert(
        CONFIRM_KEY.into(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    Some(requests)
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
        match self.engine.status(&request.task_id, Duration::ZERO).await {
            Ok(r) => Ok(GetTaskResult::new(detailed(&r))),
            Err(EngineError::UnknownCommand(id)) => {
                // Not a command yet: maybe a confirmation waiting for the user.
                let Some((_, p)) = self.confirmations.by_command(&id) else {
                    return Err(task_error(EngineError::UnknownCommand(id)));
                };
                let shown: Vec<String> = p.args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                let message = format!(
                    "closedloop: run {} {}{}? Nothing moves unless you confirm.",
                    p.device,
                    p.action,
                    if shown.is_empty() {
                        String::new()
                    } else {
                        format!(" with {}", shown.join(", "))
                    }
                );
                let input_requests = confirm_request(message.clone()).ok_or_else(|| {
                    McpError::internal_error("could not build the confirmation form", None)
                })?;
                let now = closedloop_engine::clock::rfc3339(
                    closedloop_engine::clock::Clock::new().now_ms(),
                );
                let task = Task::new(id, TaskStatus::InputRequired, now.clone(), now)
                    .with_status_message(message);
                Ok(GetTaskResult::new(DetailedTask::new(
                    task,
                    TaskPayload::InputRequired { input_requests },
                )))
            }
            Err(e) => Err(task_error(e)),
        }
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
            .cancel(&request.task_id, Duration::from_secs(5))
            .await
            .map_err(task_error)?;
        Ok(())
    }

    /// `tasks/update`: the user's answer to a confirmation task. Confirmed → the command runs under
    /// the task's id; anything else → the command is journaled as rejected (`INTERLOCK`), so the
    /// task still ends, with `isError`.
    pub(crate) async fn update_task_impl(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&cx);
        let (token, _) = self
            .confirmations
            .by_command(&request.task_id)
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("task {:?} is not waiting for input", request.task_id),
                    None,
                )
            })?;
        let answer = request
            .input_responses
            .get(CONFIRM_KEY)
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("tasks/update needs an elicitation result under {CONFIRM_KEY:?}"),
                    None,
                )
            })?;
        let yes = answer.action == ElicitationAction::Accept
            && answer
                .content
                .as_ref()
                .and_then(|c| c.get(CONFIRM_KEY))
                .and_then(|v| v.as_bool())
                == Some(true);
        let by = self
            .redeemer(&caller, &cx)
            .map_err(|r| McpError::invalid_params(r.to_string(), None))?;
        let p = self
            .confirmations
            .redeem(&token, by, None)
            .map_err(|r| McpError::invalid_params(r.to_string(), None))?;
        let request_id = format!("req_{}", uuid::Uuid::now_v7());
        let sub = closedloop_engine::Submission {
            command_id: Some(p.command_id),
            device: p.device,
            action: p.action,
            args: p.args,
            idempotency_key: p.key,
            request_id: Some(request_id),
            confirmed: yes,
            confirmed_by: yes.then(|| by.name().to_string()),
            ..closedloop_engine::Submission::default()
        };
        self.submit(sub, &caller).await?;
        Ok(())
    }
}
