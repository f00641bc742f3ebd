//! In-protocol confirmation: for clients that declare the elicitation capability (2025-06-18 and
//! 2025-11-25 sessions), a `confirm = true` action asks the user directly with a one-field form
//! ("confirm": yes/no), or one box per item of its `checklist`, before anything moves. Clients without it — and 2026-07-28 clients, to
//! which rmcp 3.11 refuses server-to-client requests — get the two-step token instead.

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, JsonObject};
use rmcp::service::RequestContext;
use serde_json::json;
use std::time::Duration;

/// How long the user has to answer the form.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// What the user said.
pub(crate) enum Answer {
    /// They ticked "confirm" and accepted.
    Confirmed,
    /// They declined, cancelled, or accepted without ticking "confirm" (the text says which).
    Declined(String),
    /// The client cannot be asked in-protocol: fall back to the two-step token.
    Unavailable,
}

/// Asks the user, when the client can be asked: to confirm the call, or to tick every item
/// of the action's `checklist`.
pub(crate) async fn ask(
    cx: &RequestContext<RoleServer>,
    device: &str,
    action: &str,
    args: &JsonObject,
    checklist: &[String],
) -> Answer {
    let can = cx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    if !can {
        return Answer::Unavailable;
    }
    let params = match form(device, action, args, checklist) {
        Ok(params) => params,
        Err(e) => {
            tracing::warn!(error = %e.message, "the confirmation form could not be built; using a confirmation token");
            return Answer::Unavailable;
        }
    };
    match cx
        .peer
        .create_elicitation_with_timeout(params, Some(ANSWER_TIMEOUT))
        .await
    {
        Ok(r) => match r.action {
            ElicitationAction::Accept => {
                let keys = crate::tasks::questions::keys(checklist);
                let ticked = |k: &String| crate::tasks::questions::ticked(&r, k);
                match keys.iter().all(ticked) {
                    true => Answer::Confirmed,
                    false if checklist.is_empty() => {
                        Answer::Declined("the user did not tick confirm".into())
                    }
                    false => Answer::Declined("the user did not tick every check".into()),
                }
            }
            ElicitationAction::Decline => Answer::Declined("the user declined".into()),
            _ => Answer::Declined("the user cancelled".into()),
        },
        Err(e) => {
            tracing::info!(error = %e, "in-protocol confirmation unavailable; using a confirmation token");
            Answer::Unavailable
        }
    }
}

/// The confirmation form: one required boolean, `confirm`, or one per checklist item
/// (`check_1`, …, titled with the item).
fn form(
    device: &str,
    action: &str,
    args: &JsonObject,
    checklist: &[String],
) -> Result<ElicitRequestParams, McpError> {
    let call = call_text(device, action, args);
    let keys = crate::tasks::questions::keys(checklist);
    let mut properties = JsonObject::new();
    for (i, key) in keys.iter().enumerate() {
        let title = checklist.get(i).map_or("Confirm", String::as_str);
        properties.insert(key.clone(), json!({"type": "boolean", "title": title}));
    }
    let message = match checklist.is_empty() {
        true => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        false => format!(
            "closedloop: run {call}? Tick each check only if it holds; nothing moves unless \
             every one is ticked."
        ),
    };
    form_params(message, properties)
}

/// An elicitation form asking `message`, with the fields `properties` (JSON Schema, each by its
/// key), every one of them required: the one way every question closedloop asks is built.
pub(crate) fn form_params(
    message: String,
    properties: JsonObject,
) -> Result<ElicitRequestParams, McpError> {
    let required: Vec<&String> = properties.keys().collect();
    let form = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required},
    });
    serde_json::from_value(form).map_err(|e| {
        let keys: Vec<&String> = properties.keys().collect();
        McpError::internal_error(
            format!("could not build the form asking {keys:?}: {e}"),
            None,
        )
    })
}

/// A call as a person reads it in a question: "slide move_to with target_mm = 150".
pub(crate) fn call_text(device: &str, action: &str, args: &JsonObject) -> String {
    let shown: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    match shown.is_empty() {
        true => format!("{device} {action}"),
        false => format!("{device} {action} with {}", shown.join(", ")),
    }
}
