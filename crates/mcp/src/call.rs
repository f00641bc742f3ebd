//! `tools/call`: arguments in, the engine's answer out as MCP content.
//!
//! Statuses `rejected`, `failed` and `timeout` are tool results with `isError: true`; an unknown
//! tool or malformed arguments of the fixed tools are JSON-RPC errors; an unknown `command_id` is
//! an `isError` result with `error_code` `UNKNOWN_COMMAND` (docs/architecture.md).
//!
//! This file routes a call to its tool and holds the result shapes every tool shares; [`act`]
//! answers the tools that act (with [`confirming`] for a person's confirmation), [`commands`] the command tools and [`devices`] the device tools.

pub(crate) mod act;
mod asking;
mod commands;
pub(crate) mod confirming;
mod devices;

use crate::{Caller, Server};
use closedloop_engine::{CommandResult, EngineError, ErrorCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
    JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::ops::ControlFlow;
use std::time::Duration;
use tracing::Instrument;

impl Server {
    /// `tools/call`, under a span that carries the server-minted request id.
    pub(crate) async fn call_tool_impl(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let request_id = format!("req_{}", uuid::Uuid::now_v7());
        let span = tracing::info_span!("tool", request_id = %request_id, tool = %request.name);
        let started = std::time::Instant::now();
        let tool = request.name.clone();
        let answer = async move {
            let mut args = request.arguments.unwrap_or_default();
            let caller = self.caller(&cx);
            let name = request.name.as_ref();
            let is_action = self.is_action_tool(name);
            if !is_action && name != "cancel_command" && !caller.may_read() {
                return Ok(unauthorized(&caller, "read devices and commands").into());
            }
            if is_action {
                let responses = request.input_responses.as_ref();
                let asked = self.ask_values(name, &mut args, responses, &caller, &cx);
                if let ControlFlow::Break(answer) = asked.await? {
                    return Ok(answer);
                }
            }
            let result = self.dispatch(name, args, request_id, &caller, &cx).await;
            if is_action && let Ok(r) = &result {
                self.hold_if_dead_man(r, &cx);
                if let Some(task) = self.task_for(r, &cx).await {
                    return Ok(CallToolResponse::Task(task));
                }
            }
            result.map(Into::into)
        }
        .instrument(span)
        .await;
        self.count_call(&tool, &answer, started.elapsed());
        answer
    }

    /// Counts a call in `/metrics`. A name no tool has is counted as `unknown`: names a client
    /// makes up must not grow the label set.
    fn count_call(&self, tool: &str, answer: &Result<CallToolResponse, McpError>, took: Duration) {
        let outcome = match answer {
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => "error",
            Ok(_) => "ok",
            Err(_) => "protocol_error",
        };
        let known = answer.is_ok() || self.tools.iter().any(|t| t.name == tool);
        crate::metrics::tool_call(if known { tool } else { "unknown" }, outcome, took);
    }

    /// Whether `name` is a tool that acts (so needs no `read` scope, and may answer a Tasks
    /// client with a task).
    fn is_action_tool(&self, name: &str) -> bool {
        self.engine.plant().tool(name).is_some()
            || name == "run_action"
            || name == "confirm_command"
            || name.starts_with("modbus_")
    }

    /// A dead-man command (`keepalive_s`) started in a 2025-era HTTP session is recorded with
    /// the session, which ends it if the session ends first (`session_commands.rs`).
    fn hold_if_dead_man(&self, result: &CallToolResult, cx: &RequestContext<RoleServer>) {
        let Some(v) = result.structured_content.as_ref() else {
            return;
        };
        let (Some(id), Some(device), Some(action)) = (
            v["command_id"].as_str(),
            v["device"].as_str(),
            v["action"].as_str(),
        ) else {
            return;
        };
        let dead_man = self
            .engine
            .plant()
            .device(device)
            .and_then(|d| d.action(action))
            .is_some_and(|a| a.keepalive_s.is_some());
        if dead_man && crate::http::session_of(cx).is_some() {
            self.session_commands.hold(id);
        }
    }

    /// Runs the tool `name`; one the plant does not offer is a JSON-RPC error.
    async fn dispatch(
        &self,
        name: &str,
        args: JsonObject,
        request_id: String,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let plant = self.engine.plant();
        if let Some(refused) = crate::raw::gate(plant, name, &args, caller)? {
            return Ok(refused);
        }
        match name {
            "get_command_status" => self.get_command_status(&args, caller, cx).await,
            "cancel_command" => self.cancel_command(&args, caller).await,
            "list_commands" => self.list_commands(&args).await,
            "list_devices" => self.list_devices(&args),
            "get_device_state" => self.get_device_state(&args),
            "list_alarms" if !plant.alarms.is_empty() => Ok(self.list_alarms()),
            "keep_alive" if crate::tools::has_dead_man(plant) => {
                self.keep_alive(&args, caller).await
            }
            "modbus_read" | "modbus_write" if plant.devices.iter().any(|d| d.raw_access) => {
                self.raw_tool(name, &args, caller).await
            }
            "can_signals" | "can_decode" if crate::bridge::offered(plant, name) => {
                self.bridge_tool(name, &args)
            }
            "opcua_browse" | "opcua_read" if crate::bridge::offered(plant, name) => {
                self.opcua_tool(name, &args).await
            }
            "confirm_command" => self.confirm_command(args, request_id, caller, cx).await,
            "run_action" if self.generic() => self.run_action(args, request_id, caller, cx).await,
            "describe_device" if self.generic() => self.describe_device(&args),
            name => match plant.tool(name).filter(|_| !self.generic()) {
                Some((device, action)) => {
                    let (d, a) = (device.id.clone(), action.name.clone());
                    self.act(&d, &a, args, request_id, caller, cx).await
                }
                None => Err(McpError::invalid_params(
                    format!("unknown tool {name:?}; tools/list names the tools this plant offers"),
                    Some(json!({"tool": name})),
                )),
            },
        }
    }

    /// The task a Tasks client gets instead of an action's result (docs/architecture.md): the
    /// confirmation it is waiting for, or the command the action created; `None` for any other
    /// client.
    async fn task_for(
        &self,
        result: &CallToolResult,
        cx: &RequestContext<RoleServer>,
    ) -> Option<CreateTaskResult> {
        if !crate::tasks::client_wants_tasks(cx) {
            return None;
        }
        if let Some(task) = self.confirmation_task(result, cx) {
            return Some(task);
        }
        let id = result
            .structured_content
            .as_ref()
            .and_then(|v| v["command_id"].as_str())?;
        let cmd = self.engine.peek(id).await.ok()?;
        Some(self.created_task(&cmd))
    }

    pub(super) fn generic(&self) -> bool {
        self.engine.plant().server.tools == closedloop_plant::ToolMode::Generic
    }
}

/// A command's result as a tool result: `isError` for rejected, failed and timeout.
pub(crate) fn command_result(r: CommandResult) -> CallToolResult {
    let text = r.summary();
    let is_error = r.status.is_error();
    let value = serde_json::to_value(r.into_model()).unwrap_or_default();
    structured(value, is_error, text)
}

/// An `isError` result for a caller without the scope (nothing journaled: nothing was asked of
/// a device).
fn unauthorized(caller: &Caller, what: &str) -> CallToolResult {
    let code = ErrorCode::Unauthorized;
    let detail = format!("{} may not {what}.", caller.name);
    let v = json!({"status": "rejected", "error_code": code.as_str(), "detail": detail, "hint": code.hint()});
    structured(v, true, format!("Rejected (UNAUTHORIZED): {detail}"))
}

/// The answer for a device id the plant does not have: an error result a model can act on.
pub(crate) fn unknown_device(engine: &closedloop_engine::Engine, id: &str) -> CallToolResult {
    let code = ErrorCode::UnknownDevice;
    let ids: Vec<&str> = engine
        .plant()
        .devices
        .iter()
        .map(|d| d.id.as_str())
        .collect();
    let detail = format!(
        "No device has id {id:?}; the devices are {}.",
        ids.join(", ")
    );
    let v =
        json!({"device": id, "error_code": code.as_str(), "detail": detail, "hint": code.hint()});
    structured(v, true, format!("UNKNOWN_DEVICE: {detail} {}", code.hint()))
}

fn unknown_command(id: &str) -> CallToolResult {
    let code = ErrorCode::UnknownCommand;
    let v = json!({
        "command_id": id,
        "error_code": code.as_str(),
        "detail": format!("No command has id {id:?}."),
        "hint": code.hint(),
    });
    structured(v, true, format!("Unknown command {id}: {}", code.hint()))
}

fn structured(value: Value, is_error: bool, text: String) -> CallToolResult {
    // Not `CallToolResult::structured`: it serialises the value into a text block that would be
    // replaced at once (a whole `list_devices` page written for nothing).
    let content = vec![ContentBlock::text(text)];
    let mut r = match is_error {
        true => CallToolResult::error(content),
        false => CallToolResult::success(content),
    };
    r.structured_content = Some(value);
    r
}

fn engine_error(e: EngineError) -> McpError {
    match e {
        EngineError::UnknownDevice(_)
        | EngineError::UnknownAction(..)
        | EngineError::UnknownCommand(_) => McpError::invalid_params(e.to_string(), None),
        other => McpError::internal_error(other.to_string(), None),
    }
}

fn take_wait(args: &mut JsonObject, key: &str, default: f64) -> Result<Duration, McpError> {
    match args.remove(key) {
        None | Some(Value::Null) => Ok(Duration::from_secs_f64(default)),
        Some(v) => match v.as_f64() {
            Some(s) if (0.0..=10.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
            _ => Err(McpError::invalid_params(
                format!("{key} must be a number from 0 to 10 (seconds), got {v}"),
                None,
            )),
        },
    }
}

fn command_id(args: &JsonObject) -> Result<String, McpError> {
    match args.get("command_id") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(McpError::invalid_params(
            "command_id (a string) is required",
            None,
        )),
    }
}

fn opt_str(args: &JsonObject, key: &str) -> Result<Option<String>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(McpError::invalid_params(
            format!("{key} must be a string, got {v}"),
            None,
        )),
    }
}
