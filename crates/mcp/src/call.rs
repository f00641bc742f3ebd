//! `tools/call`: arguments in, the engine's answer out as MCP content.
//!
//! Statuses `rejected`, `failed` and `timeout` are tool results with `isError: true`; an unknown
//! tool or malformed arguments of the fixed tools are JSON-RPC errors; an unknown `command_id` is
//! an `isError` result with `error_code` `UNKNOWN_COMMAND` (DESIGN §2).

use crate::Server;
use closedloop_engine::{CommandResult, EngineError, ErrorCode, Submission};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ProgressNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;
use tracing::Instrument;

/// Default `wait_s` of `get_command_status`.
const STATUS_WAIT_DEFAULT: f64 = 3.0;
/// How long `cancel_command` waits, by default, for the device to read stopped.
const CANCEL_WAIT_DEFAULT: f64 = 5.0;
/// Largest `limit` of `list_commands`.
const LIST_MAX: u64 = 200;

impl Server {
    /// `tools/call`, under a span that carries the server-minted request id.
    pub(crate) async fn call_tool_impl(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let request_id = format!("req_{}", uuid::Uuid::now_v7());
        let span = tracing::info_span!("tool", request_id = %request_id, tool = %request.name);
        async move {
            let args = request.arguments.unwrap_or_default();
            let caller = self.caller(&cx);
            let name = request.name.as_ref();
            let is_action = self.engine.plant().tool(name).is_some()
                || name == "run_action"
                || name == "confirm_command"
                || name.starts_with("modbus_");
            if !is_action && name != "cancel_command" && !caller.may_read() {
                return Ok(unauthorized(&caller, "read devices and commands").into());
            }
            let result = match name {
                "get_command_status" => self.get_command_status(&args, &cx).await,
                "cancel_command" => self.cancel_command(&args, &caller).await,
                "list_commands" => self.list_commands(&args).await,
                "list_devices" => Ok(structured(
                    json!({"devices": self.engine.devices()}),
                    false,
                    list_text(&self.engine),
                )),
                "get_device_state" => self.get_device_state(&args),
                "list_alarms" if !self.engine.plant().alarms.is_empty() => {
                    let alarms = self.engine.alarms();
                    let active: Vec<&str> = alarms
                        .iter()
                        .filter(|a| a.active)
                        .map(|a| a.name.as_str())
                        .collect();
                    let text = match active.is_empty() {
                        true => format!("No alarm is active ({} declared).", alarms.len()),
                        false => format!("Active: {}.", active.join(", ")),
                    };
                    Ok(structured(json!({"alarms": alarms}), false, text))
                }
                "modbus_read" | "modbus_write"
                    if self.engine.plant().devices.iter().any(|d| d.raw_access) =>
                {
                    self.raw_tool(name, &args, &caller).await
                }
                "can_signals" | "can_decode"
                    if crate::bridge::offered(self.engine.plant(), name) =>
                {
                    self.bridge_tool(name, &args)
                }
                "opcua_browse" | "opcua_read"
                    if crate::bridge::offered(self.engine.plant(), name) =>
                {
                    self.opcua_tool(name, &args).await
                }
                "confirm_command" => {
                    self.confirm_command(args, request_id.clone(), &caller)
                        .await
                }
                "run_action" if self.generic() => {
                    self.run_action(args, request_id.clone(), &caller, &cx)
                        .await
                }
                "describe_device" if self.generic() => self.describe_device(&args),
                name => match self.engine.plant().tool(name).filter(|_| !self.generic()) {
                    Some((device, action)) => {
                        let (d, a) = (device.id.clone(), action.name.clone());
                        self.act(&d, &a, args, request_id.clone(), &caller, &cx)
                            .await
                    }
                    None => Err(McpError::invalid_params(
                        format!(
                            "unknown tool {name:?}; tools/list names the tools this plant offers"
                        ),
                        Some(json!({"tool": name})),
                    )),
                },
            };
            if is_action
                && crate::tasks::client_wants_tasks(&cx)
                && let Ok(r) = &result
                && let Some(task) = crate::tasks::confirmation_task(r)
            {
                return Ok(CallToolResponse::Task(task));
            }
            // A Tasks client gets a task for every command an action created (DESIGN §4).
            if is_action
                && crate::tasks::client_wants_tasks(&cx)
                && let Ok(r) = &result
                && let Some(id) = r
                    .structured_content
                    .as_ref()
                    .and_then(|v| v["command_id"].as_str())
                && let Ok(cmd) = self.engine.status(id, Duration::ZERO).await
            {
                return Ok(CallToolResponse::Task(crate::tasks::created(&cmd)));
            }
            result.map(Into::into)
        }
        .instrument(span)
        .await
    }

    async fn act(
        &self,
        device: &str,
        action: &str,
        mut args: JsonObject,
        request_id: String,
        caller: &crate::Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // A Tasks client follows its task: its call returns at once unless it asks to wait.
        let default = match crate::tasks::client_wants_tasks(cx) {
            true => 0.0,
            false => self.default_wait_s(),
        };
        let wait = take_wait(&mut args, "wait_s", default)?;
        let key = match args.remove("idempotency_key") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() && s.len() <= 200 => Some(s),
            Some(_) => {
                return Err(McpError::invalid_params(
                    "idempotency_key must be a string of 1 to 200 characters",
                    None,
                ));
            }
        };
        let needs_confirmation = self
            .engine
            .plant()
            .device(device)
            .and_then(|d| d.action(action))
            .is_some_and(|a| a.confirm);
        let mut confirmed = false;
        // A retried keyed call whose command exists is answered with that command (or refused
        // for other arguments) by the engine: nobody is asked to confirm it twice.
        let replay = match &key {
            Some(k) => self.engine.knows_key(k).await.map_err(engine_error)?,
            None => false,
        };
        if needs_confirmation && caller.may_actuate(device) && !replay {
            match args.remove("confirmation_token") {
                Some(Value::String(token)) => match self.confirmations.redeem(
                    &token,
                    &caller.name,
                    Some((device, action, &args)),
                ) {
                    Ok(_) => confirmed = true,
                    Err(refusal) => return Ok(confirmation_refused(&refusal)),
                },
                Some(_) => {
                    return Err(McpError::invalid_params(
                        "confirmation_token must be a string",
                        None,
                    ));
                }
                None => match crate::elicit::ask(cx, device, action, &args).await {
                    crate::elicit::Answer::Confirmed => confirmed = true,
                    crate::elicit::Answer::Declined(why) => {
                        return Ok(declined_result(device, action, &why));
                    }
                    crate::elicit::Answer::Unavailable => {
                        let (token, ttl, command_id) = self.confirmations.issue(
                            device,
                            action,
                            &args,
                            &caller.name,
                            key.as_deref(),
                        );
                        // A Tasks client gets a task in input_required under the id the command
                        // will have; it answers with tasks/update.
                        let task = crate::tasks::client_wants_tasks(cx).then_some(command_id);
                        return Ok(needs_confirmation_result(
                            device, action, &args, &token, ttl, task,
                        ));
                    }
                },
            }
        }
        let sub = Submission {
            device: device.into(),
            action: action.into(),
            args,
            idempotency_key: key,
            wait,
            request_id: Some(request_id),
            confirmed,
            ..Submission::default()
        };
        self.submit(sub, caller).await
    }

    /// Submits for `caller`: named in the journal, and refused `UNAUTHORIZED` (journaled too)
    /// without the device's actuate scope.
    pub(crate) async fn submit(
        &self,
        mut sub: Submission,
        caller: &crate::Caller,
    ) -> Result<CallToolResult, McpError> {
        sub.caller = Some(caller.name.clone());
        sub.denied = (!caller.may_actuate(&sub.device)).then(|| {
            format!(
                "{} has no actuate:{} (or actuate:*, admin) scope; nothing was sent.",
                caller.name, sub.device
            )
        });
        match self.engine.submit(sub).await {
            Ok(r) => Ok(command_result(&r)),
            Err(EngineError::UnknownDevice(d)) => Ok(unknown_device(&self.engine, &d)),
            Err(e) => Err(engine_error(e)),
        }
    }

    /// `confirm_command(confirmation_token, wait_s)`: runs what the token was issued for.
    async fn confirm_command(
        &self,
        mut args: JsonObject,
        request_id: String,
        caller: &crate::Caller,
    ) -> Result<CallToolResult, McpError> {
        let wait = take_wait(&mut args, "wait_s", self.default_wait_s())?;
        let Some(Value::String(token)) = args.get("confirmation_token") else {
            return Err(McpError::invalid_params(
                "confirmation_token (a string) is required",
                None,
            ));
        };
        match self.confirmations.redeem(token, &caller.name, None) {
            Ok(p) => {
                let sub = Submission {
                    command_id: Some(p.command_id),
                    device: p.device,
                    action: p.action,
                    args: p.args,
                    idempotency_key: p.key,
                    wait,
                    request_id: Some(request_id),
                    confirmed: true,
                    ..Submission::default()
                };
                self.submit(sub, caller).await
            }
            Err(refusal) => Ok(confirmation_refused(&refusal)),
        }
    }

    /// The plant's `[server] default_wait_s`: how long an action call waits when it says not.
    fn default_wait_s(&self) -> f64 {
        self.engine.plant().server.default_wait_s
    }

    fn generic(&self) -> bool {
        self.engine.plant().server.tools == closedloop_plant::ToolMode::Generic
    }

    /// `run_action(device, action, params, wait_s, idempotency_key, confirmation_token)`.
    async fn run_action(
        &self,
        mut args: JsonObject,
        request_id: String,
        caller: &crate::Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let device = opt_str(&args, "device")?
            .ok_or_else(|| McpError::invalid_params("device is required", None))?;
        let action = opt_str(&args, "action")?
            .ok_or_else(|| McpError::invalid_params("action is required", None))?;
        if self.engine.plant().device(&device).is_none() {
            return Ok(unknown_device(&self.engine, &device));
        }
        if self
            .engine
            .plant()
            .device(&device)
            .and_then(|d| d.action(&action))
            .is_none()
        {
            return Err(McpError::invalid_params(
                format!("no action {action:?} on device {device:?}; describe_device lists them"),
                None,
            ));
        }
        let mut call = match args.remove("params") {
            None | Some(Value::Null) => JsonObject::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(McpError::invalid_params("params must be an object", None)),
        };
        for k in ["wait_s", "idempotency_key", "confirmation_token"] {
            if let Some(v) = args.remove(k) {
                call.insert(k.into(), v);
            }
        }
        self.act(&device, &action, call, request_id, caller, cx)
            .await
    }

    /// `describe_device(device)`: what `tools/list` would have said about its actions.
    fn describe_device(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
        let id = opt_str(args, "device")?
            .ok_or_else(|| McpError::invalid_params("device is required", None))?;
        let Some(device) = self.engine.plant().device(&id) else {
            return Ok(unknown_device(&self.engine, &id));
        };
        let liveness = self.engine.device_state(&id).map(|s| s.liveness);
        let v = json!({
            "device": device.id,
            "description": device.description,
            "liveness": liveness,
            "signals": device.signals.iter().map(|s| json!({"name": s.name, "source": s.source.describe(), "unit": s.unit})).collect::<Vec<_>>(),
            "actions": device.actions.iter().map(|a| json!({
                "name": a.name,
                "description": a.tool_description(device),
                "input_schema": a.input_schema(),
                "verification": a.verification.as_str(),
                "idempotent": a.idempotent,
                "destructive": a.destructive,
                "confirm": a.confirm,
            })).collect::<Vec<_>>(),
        });
        let text = format!(
            "{}: {}. Actions: {}.",
            device.id,
            device.description,
            device
                .actions
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(structured(v, false, text))
    }

    async fn get_command_status(
        &self,
        args: &JsonObject,
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
                    let Ok(r) = engine.status(&id, Duration::ZERO).await else {
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
        let result = self.engine.status(&id, wait).await;
        if let Some(task) = progress {
            task.abort();
        }
        match result {
            Ok(r) => Ok(command_result(&r)),
            Err(EngineError::UnknownCommand(id)) => Ok(unknown_command(&id)),
            Err(e) => Err(engine_error(e)),
        }
    }

    async fn cancel_command(
        &self,
        args: &JsonObject,
        caller: &crate::Caller,
    ) -> Result<CallToolResult, McpError> {
        let id = command_id(args)?;
        match self.engine.status(&id, Duration::ZERO).await {
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
        match self.engine.cancel(&id, wait).await {
            Ok(r) => Ok(command_result(&r)),
            Err(EngineError::UnknownCommand(id)) => Ok(unknown_command(&id)),
            Err(e) => Err(engine_error(e)),
        }
    }

    async fn list_commands(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
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

    fn get_device_state(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
        let device = opt_str(args, "device")?
            .ok_or_else(|| McpError::invalid_params("device is required", None))?;
        let Some(state) = self.engine.device_state(&device) else {
            return Ok(unknown_device(&self.engine, &device));
        };
        let values: Vec<String> = state
            .signals
            .iter()
            .map(|(k, s)| {
                format!(
                    "{k} = {}{} ({} ms old)",
                    s.value,
                    s.unit
                        .as_deref()
                        .map(|u| format!(" {u}"))
                        .unwrap_or_default(),
                    s.age_ms
                )
            })
            .collect();
        let liveness = serde_json::to_value(state.liveness).unwrap_or_default();
        let mut text = format!("{device} is {}.", liveness.as_str().unwrap_or(""));
        if !values.is_empty() {
            text.push_str(&format!(" {}.", values.join(", ")));
        }
        if let Some(d) = &state.detail {
            text.push_str(&format!(" {d}"));
        }
        Ok(structured(
            serde_json::to_value(&state).unwrap_or_default(),
            false,
            text,
        ))
    }
}

fn list_text(engine: &closedloop_engine::Engine) -> String {
    engine
        .devices()
        .iter()
        .map(|d| {
            format!(
                "{} ({}): {}",
                d.device,
                serde_json::to_value(d.liveness)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or(""),
                d.description
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A result object as a tool result.
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

pub(crate) fn command_result(r: &CommandResult) -> CallToolResult {
    structured(
        serde_json::to_value(r.for_model()).unwrap_or_default(),
        r.status.is_error(),
        r.summary(),
    )
}

/// The first answer to a `confirm = true` action: nothing was sent; a person must agree first.
fn needs_confirmation_result(
    device: &str,
    action: &str,
    args: &JsonObject,
    token: &str,
    ttl: Duration,
    task: Option<String>,
) -> CallToolResult {
    let shown: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let detail = format!(
        "{device} {action} ({}) needs a person's confirmation before anything moves; nothing was sent.",
        if shown.is_empty() {
            "no parameters".to_string()
        } else {
            shown.join(", ")
        }
    );
    let hint = format!(
        "Ask the user whether to run {device} {action} with exactly these parameters. Only if they agree, call confirm_command with this confirmation_token within {:.0} s.",
        ttl.as_secs_f64()
    );
    let mut v = json!({
        "status": "needs_confirmation",
        "device": device,
        "action": action,
        "params": args,
        "confirmation_token": token,
        "expires_in_s": ttl.as_secs_f64(),
        "verified": false,
        "detail": detail,
        "hint": hint,
    });
    if let Some(id) = task {
        v["confirmation_task"] = json!(id);
    }
    structured(v, false, format!("Needs confirmation: {detail} {hint}"))
}

/// The user said no (in-protocol confirmation): an `isError` result; nothing was sent.
fn declined_result(device: &str, action: &str, why: &str) -> CallToolResult {
    let code = ErrorCode::Interlock;
    let detail =
        format!("{device} {action} needs a person's confirmation and {why}; nothing was sent.");
    let v = json!({"status": "rejected", "device": device, "action": action, "error_code": code.as_str(), "detail": detail,
                   "hint": "The user did not confirm. Do not retry unless they ask for it."});
    structured(v, true, format!("Rejected (INTERLOCK): {detail}"))
}

/// A refused confirmation token: an `isError` result, nothing run.
fn confirmation_refused(refusal: &crate::confirm::Refusal) -> CallToolResult {
    let code = ErrorCode::InvalidParams;
    let detail = refusal.to_string();
    let v = json!({"status": "rejected", "error_code": code.as_str(), "detail": detail, "hint": "Call the action tool again to get a new confirmation_token, and ask the user again."});
    structured(v, true, format!("Rejected (INVALID_PARAMS): {detail}"))
}

/// An `isError` result for a caller without the scope (nothing journaled: nothing was asked of
/// a device).
fn unauthorized(caller: &crate::Caller, what: &str) -> CallToolResult {
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
    let mut r = if is_error {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    };
    r.content = vec![ContentBlock::text(text)];
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
