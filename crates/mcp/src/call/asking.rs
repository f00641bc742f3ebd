//! Parameters a person answers (`ask = "…"` in the plant file): who signs a batch, the lot number
//! on the label. The model must not make them up, so they are not in the tool's input schema;
//! before anything else happens to the call, closedloop asks the person in one form and puts
//! the answers into the call's arguments, where the engine checks them as any parameter and the
//! journal records them.
//!
//! How the person is asked depends on the client: on protocol 2026-07-28 the call answers an
//! SEP-2322 `InputRequiredResult` (no command, no task yet) and the retry carries the form's
//! answer in `inputResponses`; a 2025 client is sent `elicitation/create`. A client that
//! declares no elicitation cannot ask anyone: JSON-RPC -32021 naming the capability. A value
//! for such a parameter in the arguments is refused (`INVALID_PARAMS`), and a person who
//! declines, cancels or does not answer within 120 s is a `rejected` `INTERLOCK`; nothing is
//! journaled or sent in any of these cases. A keyed retry, or a call again with its
//! `confirmation_token`, asks again: the engine and the token compare the answers with the
//! first call's.
//!
//! An answer is what the client's form returned: closedloop cannot tell a person's typing from
//! a client filling the form itself, and says so in docs/plant-file.md.

use super::confirming::declined_result;
use super::structured;
use crate::{Caller, Server};
use closedloop_engine::ErrorCode;
use closedloop_plant::{Action, ParamSpec, TaskSupport};
use rmcp::model::{
    CallToolResponse, CallToolResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorCode as RpcCode, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::ops::ControlFlow;
use std::time::Duration;

/// The key of the one form that asks an action's `ask` parameters, in `inputRequests`.
pub(crate) const ASK_KEY: &str = "ask";

/// How long a 2025 client's person has to answer the form.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// What asking gave: the form's answer, or the answer to send the client now.
enum Asked {
    Answer(ElicitResult),
    Now(CallToolResponse),
}

impl Server {
    /// Puts the person's answers to the called action's `ask` parameters into `args`, asking
    /// for them first when `responses` holds none. `Break` answers the call at once (the
    /// questions, a refusal, a no). Calls that are refused anyway (no actuate scope, a
    /// task-required action from a client without tasks) pass on untouched, so that the person
    /// is never asked for a call that cannot run.
    pub(super) async fn ask_values(
        &self,
        tool: &str,
        args: &mut JsonObject,
        responses: Option<&InputResponses>,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<ControlFlow<CallToolResponse>, McpError> {
        let Some((device, action)) = self.called_action(tool, args) else {
            return Ok(ControlFlow::Continue(()));
        };
        let asked: Vec<&ParamSpec> = action.asked().collect();
        let task_refused =
            action.task == TaskSupport::Required && !crate::tasks::client_wants_tasks(cx);
        if asked.is_empty() || !caller.may_actuate(device) || task_refused {
            return Ok(ControlFlow::Continue(()));
        }
        let Some(target) = call_params(tool, args) else {
            return Ok(ControlFlow::Continue(()));
        };
        if let Some(p) = asked.iter().find(|p| target.contains_key(&p.name)) {
            let done = supplied_result(device, action, p);
            return Ok(ControlFlow::Break(done.into()));
        }
        let answer = match responses.and_then(|r| r.get(ASK_KEY)) {
            Some(v) => serde_json::from_value::<ElicitResult>(v.clone()).map_err(|_| {
                McpError::invalid_params(
                    format!("inputResponses.{ASK_KEY} must be the answer to the form (an elicitation result)"),
                    None,
                )
            })?,
            None => match ask_now(device, action, &asked, cx).await? {
                Asked::Answer(a) => a,
                Asked::Now(response) => return Ok(ControlFlow::Break(response)),
            },
        };
        if answer.action != ElicitationAction::Accept {
            let why = match answer.action {
                ElicitationAction::Decline => "the person declined to answer",
                _ => "the person cancelled the form",
            };
            let no = declined_result(device, &action.name, "a person's answer", why);
            return Ok(ControlFlow::Break(no.into()));
        }
        let content = answer.content.unwrap_or_default();
        for p in &asked {
            // A missing answer stays missing: the engine refuses it as INVALID_PARAMS.
            if let Some(v) = content.get(p.name.as_str()) {
                target.insert(p.name.clone(), v.clone());
            }
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The device id and action a call of `tool` runs, if it runs one.
    fn called_action<'p>(&'p self, tool: &str, args: &JsonObject) -> Option<(&'p str, &'p Action)> {
        let plant = self.engine.plant();
        // Only the tools this plant's tool mode offers run anything (`dispatch`).
        let (device, action) = match (tool, self.generic()) {
            ("run_action", true) => {
                let d = plant.device(args.get("device")?.as_str()?)?;
                (d, d.action(args.get("action")?.as_str()?)?)
            }
            (_, false) => plant.tool(tool)?,
            (_, true) => return None,
        };
        Some((device.id.as_str(), action))
    }
}

/// The object a call's parameters are in: the arguments themselves, or `run_action`'s `params`
/// (made an object when absent; `None` when it is something else, which `run_action` refuses).
fn call_params<'a>(tool: &str, args: &'a mut JsonObject) -> Option<&'a mut JsonObject> {
    if tool != "run_action" {
        return Some(args);
    }
    let params = args
        .entry("params")
        .or_insert_with(|| Value::Object(JsonObject::new()));
    if params.is_null() {
        *params = Value::Object(JsonObject::new());
    }
    params.as_object_mut()
}

/// Asks the person through the client: the questions as an `InputRequiredResult` for a
/// 2026-07-28 client, an `elicitation/create` for a 2025 one; -32021 for a client that
/// declares no elicitation.
async fn ask_now(
    device: &str,
    action: &Action,
    asked: &[&ParamSpec],
    cx: &RequestContext<RoleServer>,
) -> Result<Asked, McpError> {
    let can = cx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    if !can {
        return Err(cannot_ask(device, action, asked));
    }
    let form = form(device, action, asked)?;
    if crate::tasks::is_modern(cx) {
        let mut requests = InputRequests::new();
        requests.insert(
            ASK_KEY.into(),
            InputRequest::Elicitation(ElicitRequest::new(form)),
        );
        let questions = InputRequiredResult::new(Some(requests), None);
        return Ok(Asked::Now(CallToolResponse::InputRequired(questions)));
    }
    let asking = cx
        .peer
        .create_elicitation_with_timeout(form, Some(ANSWER_TIMEOUT));
    match asking.await {
        Ok(answer) => Ok(Asked::Answer(answer)),
        Err(e) => {
            let why = format!("the question got no answer ({e})");
            let no = declined_result(device, &action.name, "a person's answer", &why);
            Ok(Asked::Now(no.into()))
        }
    }
}

/// The form that asks the person every `ask` parameter: one field each, required, typed and
/// ranged as the parameter is, titled with its question.
fn form(
    device: &str,
    action: &Action,
    asked: &[&ParamSpec],
) -> Result<ElicitRequestParams, McpError> {
    let fields = (asked.iter())
        .map(|p| {
            let mut field = p.json_schema();
            field.insert("title".into(), json!(p.ask));
            (p.name.clone(), Value::Object(field))
        })
        .collect();
    let message = match asked {
        [one] => format!(
            "{} ({device} {})",
            one.ask.as_deref().unwrap_or(&one.name),
            action.name
        ),
        _ => format!(
            "closedloop: {device} {} needs your answers before it runs.",
            action.name
        ),
    };
    crate::elicit::form_params(message, fields)
}

/// -32021: the action needs a person's answer and this client cannot ask one.
fn cannot_ask(device: &str, action: &Action, asked: &[&ParamSpec]) -> McpError {
    let names: Vec<&str> = asked.iter().map(|p| p.name.as_str()).collect();
    McpError::new(
        RpcCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        format!(
            "{device} {} asks the person for {} (ask in the plant file), and this client \
             declares no elicitation, so nobody can be asked: nothing was sent. Call it from a \
             client that supports elicitation forms.",
            action.name,
            names.join(" and ")
        ),
        Some(json!({"requiredCapabilities": {"elicitation": {}}})),
    )
}

/// The caller passed a value the person must give: `INVALID_PARAMS`, nothing journaled or sent.
fn supplied_result(device: &str, action: &Action, p: &ParamSpec) -> CallToolResult {
    let code = ErrorCode::InvalidParams;
    let detail = format!(
        "{} is answered by the person, not passed in the call: {device} {} asks \"{}\" itself; \
         nothing was sent.",
        p.name,
        action.name,
        p.ask.as_deref().unwrap_or_default()
    );
    let hint = format!("Call {} again without {}.", action.tool_name, p.name);
    let v = json!({"status": "rejected", "device": device, "action": action.name,
                   "error_code": code.as_str(), "detail": detail, "hint": hint});
    structured(
        v,
        true,
        format!("Rejected (INVALID_PARAMS): {detail} {hint}"),
    )
}
