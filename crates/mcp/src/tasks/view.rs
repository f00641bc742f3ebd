//! A command as a task: its status, poll interval and TTL, and the payload `tasks/get`
//! answers with (the tool result, or the JSON-RPC error of a command closedloop failed to
//! supervise).

use crate::call::command_result;
use closedloop_engine::crash::INTERNAL_ERROR;
use closedloop_engine::{CommandResult, Status};
use rmcp::model::{DetailedTask, ErrorCode, JsonObject, Task, TaskPayload, TaskStatus};
use std::time::Duration;

/// How often a client should poll: a quarter of the expected remaining time, within 50 ms–2 s.
fn poll_interval_ms(r: &CommandResult) -> u64 {
    let remaining = r.estimated_remaining_seconds.unwrap_or(0.0);
    ((remaining * 1000.0 / 4.0) as u64).clamp(50, 2000)
}

/// A TTL in the whole, positive milliseconds `ttlMs` takes.
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The task view of a command; `ttl` is how long the journal keeps it (`None`: for good).
pub(super) fn task_of(r: &CommandResult, ttl: Option<Duration>) -> Task {
    let status = match r.status {
        Status::Accepted | Status::Running => TaskStatus::Working,
        Status::Cancelled => TaskStatus::Cancelled,
        _ if crashed(r) => TaskStatus::Failed,
        _ => TaskStatus::Completed,
    };
    let created = r
        .accepted_at
        .clone()
        .unwrap_or_else(|| r.updated_at.clone());
    let mut task = Task::new(r.command_id.clone(), status, created, r.updated_at.clone())
        .with_status_message(r.summary());
    if let Some(ttl) = ttl {
        task = task.with_ttl_ms(ttl_ms(ttl));
    }
    if status == TaskStatus::Working {
        task = task.with_poll_interval_ms(poll_interval_ms(r));
    }
    task
}

/// What `tasks/get` answers for a command: its task and, once it has ended, its tool result
/// or (for a command closedloop failed to supervise) its JSON-RPC error.
pub(super) fn detailed(r: &CommandResult, ttl: Option<Duration>) -> DetailedTask {
    let task = task_of(r, ttl);
    let payload = match task.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        TaskStatus::Failed => TaskPayload::Failed {
            error: internal_error(r),
        },
        _ => {
            let result = serde_json::to_value(command_result(r.clone())).unwrap_or_default();
            TaskPayload::Completed {
                result: result.as_object().cloned().unwrap_or_else(JsonObject::new),
            }
        }
    };
    DetailedTask::new(task, payload)
}

/// Whether closedloop itself failed while supervising the command (`closedloop_engine::crash`):
/// the one end the Tasks extension calls a failed task rather than a completed one whose
/// result says what the device did.
fn crashed(r: &CommandResult) -> bool {
    r.timeline.iter().any(|e| e.event == INTERNAL_ERROR)
}

/// A failed task's error: JSON-RPC "internal error" (-32603) with the command's detail, and
/// the command's result object as `data`, so a client still sees its id and timeline.
fn internal_error(r: &CommandResult) -> JsonObject {
    let message = r.detail.clone().unwrap_or_else(|| r.summary());
    let data = command_result(r.clone())
        .structured_content
        .unwrap_or_default();
    let error = serde_json::json!({
        "code": ErrorCode::INTERNAL_ERROR.0,
        "message": message,
        "data": data,
    });
    error.as_object().cloned().unwrap_or_default()
}

/// The task of a confirmation waiting for its answer, under the id the command will have once
/// confirmed, `status` `input_required` (the person answers it) or `working` (only a `[server]
/// confirm_by` token may confirm, so the asker has nothing to answer, and polls); it lives as
/// long as the confirmation does.
pub(super) fn waiting_task(id: String, status: TaskStatus, message: String, ttl: Duration) -> Task {
    let now = closedloop_engine::clock::rfc3339(closedloop_engine::clock::Clock::new().now_ms());
    let task = Task::new(id, status, now.clone(), now)
        .with_status_message(message)
        .with_ttl_ms(ttl_ms(ttl));
    match status {
        TaskStatus::Working => task.with_poll_interval_ms(1000),
        _ => task,
    }
}
