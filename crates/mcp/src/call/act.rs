//! Calls that act: an action's own tool and `run_action`; the person's confirmation a
//! `confirm = true` action needs before anything is sent, and `confirm_command`, are in
//! [`super::confirming`].

use super::{command_result, engine_error, opt_str, take_wait, unknown_device};
use crate::{Caller, Server};
use closedloop_engine::{EngineError, Submission};
use closedloop_plant::TaskSupport;
use rmcp::model::{CallToolResult, ErrorCode, JsonObject, TASKS_EXTENSION_ID as TASKS};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::ops::ControlFlow;

impl Server {
    /// One action of one device: its wait and key read, the person's confirmation when the
    /// action needs one, then the submission.
    pub(super) async fn act(
        &self,
        device: &str,
        action: &str,
        mut args: JsonObject,
        request_id: String,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let tasks_client = crate::tasks::client_wants_tasks(cx);
        // A caller without the device's actuate scope is refused UNAUTHORIZED (journaled) by
        // `submit`, whatever its client can follow.
        if !tasks_client && caller.may_actuate(device) {
            self.refuse_if_task_required(device, action)?;
        }
        // A Tasks client follows its task: its call returns at once unless it asks to wait.
        let default = match tasks_client {
            true => 0.0,
            false => self.default_wait_s(),
        };
        let wait = take_wait(&mut args, "wait_s", default)?;
        let key = take_key(&mut args)?;
        let confirmed_by = match self
            .confirmation(device, action, &mut args, key.as_deref(), caller, cx)
            .await?
        {
            ControlFlow::Continue(confirmed_by) => confirmed_by,
            ControlFlow::Break(answer) => return Ok(answer),
        };
        let sub = Submission {
            device: device.into(),
            action: action.into(),
            args,
            idempotency_key: key,
            wait,
            request_id: Some(request_id),
            confirmed: confirmed_by.is_some(),
            confirmed_by,
            traceparent: traceparent(cx),
            ..Submission::default()
        };
        self.submit(sub, caller).await
    }

    /// Submits for `caller`: named in the journal, and refused `UNAUTHORIZED` (journaled too)
    /// without the device's actuate scope.
    pub(crate) async fn submit(
        &self,
        mut sub: Submission,
        caller: &Caller,
    ) -> Result<CallToolResult, McpError> {
        sub.caller = Some(caller.name.clone());
        sub.denied = (!caller.may_actuate(&sub.device)).then(|| {
            format!(
                "{} has no actuate:{} (or actuate:*, admin) scope; nothing was sent.",
                caller.name, sub.device
            )
        });
        match self.engine.submit(sub).await {
            Ok(r) => Ok(command_result(r)),
            Err(EngineError::UnknownDevice(d)) => Ok(unknown_device(&self.engine, &d)),
            Err(e) => Err(engine_error(e)),
        }
    }

    /// A `task = "required"` action refuses a client that cannot follow a task before anything
    /// is journaled or sent: JSON-RPC -32021 (missing required client capability), naming the
    /// extension in `data.requiredCapabilities` as the Tasks extension specifies.
    fn refuse_if_task_required(&self, device: &str, action: &str) -> Result<(), McpError> {
        let plant = self.engine.plant();
        let Some(a) = plant.device(device).and_then(|d| d.action(action)) else {
            return Ok(());
        };
        if a.task != TaskSupport::Required {
            return Ok(());
        }
        Err(McpError::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "{} runs as an MCP task (task = \"required\" in the plant file): nothing was \
                 sent. Call it from a client that declares the {TASKS} extension in its \
                 capabilities (protocol 2026-07-28 or later).",
                a.tool_name
            ),
            Some(json!({"requiredCapabilities": {"extensions": {(TASKS): {}}}})),
        ))
    }

    /// The plant's `[server] default_wait_s`: how long an action call waits when it says not.
    pub(super) fn default_wait_s(&self) -> f64 {
        self.engine.plant().server.default_wait_s
    }

    /// `run_action(device, action, params, wait_s, idempotency_key, confirmation_token)`.
    pub(super) async fn run_action(
        &self,
        mut args: JsonObject,
        request_id: String,
        caller: &Caller,
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
}

/// The optional `idempotency_key` of an action call, taken out of its arguments.
fn take_key(args: &mut JsonObject) -> Result<Option<String>, McpError> {
    match args.remove("idempotency_key") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 200 => Ok(Some(s)),
        Some(_) => Err(McpError::invalid_params(
            "idempotency_key must be a string of 1 to 200 characters",
            None,
        )),
    }
}

/// The W3C `traceparent` of the request's `_meta`, when it carries a valid one (an invalid
/// one is ignored, as W3C Trace Context says).
fn traceparent(cx: &RequestContext<RoleServer>) -> Option<String> {
    let t = cx.meta.get("traceparent")?.as_str()?;
    crate::otlp::TraceParent::parse(t).map(|_| t.trim().to_string())
}
