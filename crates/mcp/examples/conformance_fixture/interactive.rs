//! The suite's tools that talk back while they run: log and progress notifications, list-change
//! announcements, and questions to the client (sampling, elicitation, an SEP-2322 input request).

use crate::mrtr::{Responses, ask, caps_json, has, need, sample};
use crate::tools::text;
use crate::{Change, Fixture};
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateMessageRequestParams,
    ElicitRequestParams, ErrorCode, JsonObject, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, SamplingMessage,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;

type Answer = Option<Result<CallToolResponse, McpError>>;

/// Sends one log message (level info, logger `conformance-fixture`).
pub(crate) async fn log(cx: &RequestContext<RoleServer>, msg: &str) {
    let _ = cx
        .peer
        .notify_logging_message(
            LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(msg))
                .with_logger("conformance-fixture"),
        )
        .await;
}

impl Fixture {
    /// The tools that notify the client (or just take their time); `None` for any other.
    pub(crate) async fn notifying(&self, name: &str, cx: &RequestContext<RoleServer>) -> Answer {
        Some(Ok(match name {
            "test_tool_with_logging" => {
                let steps = [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ];
                for (i, m) in steps.iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    log(cx, m).await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = cx.meta.get_progress_token();
                for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(t) = &token {
                        let note = ProgressNotificationParam::new(t.clone(), p)
                            .with_total(100.0)
                            .with_message(format!("Completed step {p} of 100"));
                        let _ = cx.peer.notify_progress(note).await;
                    }
                }
                text("Progress test completed")
            }
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text("Reconnection test completed successfully.")
            }
            "test_logging_tool" => {
                if cx.meta.log_level().is_some() {
                    log(cx, "test_logging_tool ran").await;
                }
                text("logged only if asked")
            }
            "test_trigger_tool_change" => {
                let _ = self.changes.send(Change::Tools);
                let _ = cx.peer.notify_tool_list_changed().await;
                text("tool list changed")
            }
            "test_trigger_prompt_change" => {
                let _ = self.changes.send(Change::Prompts);
                let _ = cx.peer.notify_prompt_list_changed().await;
                text("prompt list changed")
            }
            _ => return None,
        }))
    }
}

/// The tools that ask the client something; `None` for any other.
pub(crate) async fn asking(
    name: &str,
    args: &JsonObject,
    responses: &Responses,
    cx: &RequestContext<RoleServer>,
) -> Answer {
    let arg = |k: &str, or: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or(or)
            .to_string()
    };
    Some(Ok(match name {
        "test_sampling" => {
            let ask = CreateMessageRequestParams::new(
                vec![SamplingMessage::user_text(arg("prompt", "Hello"))],
                100,
            );
            match cx.peer.create_message(ask).await {
                Ok(r) => {
                    let reply = serde_json::to_value(&r).unwrap_or_default();
                    let t = reply
                        .pointer("/content/text")
                        .or_else(|| reply.pointer("/content/0/text"))
                        .and_then(Value::as_str)
                        .unwrap_or("No response");
                    text(format!("LLM response: {t}"))
                }
                Err(e) => failed(format!("sampling failed: {e}")),
            }
        }
        "test_elicitation" => {
            let schema = json!({"type": "object", "properties": {"response": {"type": "string", "description": "User's response"}}, "required": ["response"]});
            let form = json!({"mode": "form", "message": arg("message", "Please respond"), "requestedSchema": schema});
            elicit(cx, form).await
        }
        "test_elicitation_sep1034_defaults" => elicit(cx, defaults_form()).await,
        "test_elicitation_sep1330_enums" => elicit(cx, enums_form()).await,
        "test_missing_capability" => {
            if caps_json(cx.client_capabilities())
                .get("sampling")
                .is_none()
            {
                return Some(Err(McpError::new(
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "test_missing_capability needs the sampling client capability",
                    Some(json!({"requiredCapabilities": {"sampling": {}}})),
                )));
            }
            need(vec![("answer", sample("Say hello", 20))], None)
        }
        "test_streaming_elicitation" => match has(responses, "confirm") {
            true => text("confirmed"),
            false => need(vec![("confirm", ask("Continue?", "ok", "boolean"))], None),
        },
        _ => return None,
    }))
}

fn failed(t: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(t)]).into()
}

/// Asks the user with a form (a server-to-client request) and reports what they answered.
async fn elicit(cx: &RequestContext<RoleServer>, params: Value) -> CallToolResponse {
    let params: ElicitRequestParams = match serde_json::from_value(params) {
        Ok(p) => p,
        Err(e) => return text(format!("bad elicitation: {e}")),
    };
    match cx.peer.create_elicitation(params).await {
        Ok(r) => text(format!(
            "Elicitation completed: action={}, content={}",
            serde_json::to_value(&r.action)
                .unwrap_or_default()
                .as_str()
                .unwrap_or("?"),
            r.content
                .map(|c| c.to_string())
                .unwrap_or_else(|| "{}".into())
        )),
        Err(e) => failed(format!("elicitation failed: {e}")),
    }
}

/// SEP-1034: a form whose fields all have defaults.
fn defaults_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        }, "required": []}
    })
}

/// SEP-1330: a form with every kind of enum field.
fn enums_form() -> Value {
    json!({
        "mode": "form",
        "message": "Please select options from the enum fields",
        "requestedSchema": {"type": "object", "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
        }, "required": []}
    })
}
