//! In-protocol confirmation: for clients that declare the elicitation capability (2025-06-18 and
//! 2025-11-25 sessions), a `confirm = true` action asks the user directly with a one-field form
//! ("confirm": yes/no), or one box per item of its `checklist`, before anything moves. Clients without it — and 2026-07-28 clients, to
//! which rmcp 3.11 refuses server-to-client requests — get the two-step token instead.

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, JsonObject};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
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
    let fields = (keys.into_iter().enumerate())
        .map(|(i, key)| {
            let title = checklist.get(i).map_or("Confirm", String::as_str);
            (key, json!({"type": "boolean", "title": title}))
        })
        .collect();
    let message = match checklist.is_empty() {
        true => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        false => format!(
            "closedloop: run {call}? Tick each check only if it holds; nothing moves unless \
             every one is ticked."
        ),
    };
    form_params(message, fields)
}

/// An elicitation form asking `message`, with `fields` (each a key and its JSON Schema) in the
/// order given, every one of them required: the one way every question closedloop asks is
/// built. The order is kept on the wire (a JSON object here sorts its keys: `check_10` would
/// come second).
pub(crate) fn form_params(
    message: String,
    fields: Vec<(String, Value)>,
) -> Result<ElicitRequestParams, McpError> {
    let order: Vec<String> = fields.iter().map(|(k, _)| k.clone()).collect();
    let properties: JsonObject = fields.into_iter().collect();
    let form = json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": order},
    });
    let mut params = serde_json::from_value(form).map_err(|e| {
        McpError::internal_error(
            format!("could not build the form asking {order:?}: {e}"),
            None,
        )
    })?;
    if let ElicitRequestParams::FormElicitationParams {
        requested_schema, ..
    } = &mut params
    {
        requested_schema.property_order = Some(order);
    }
    Ok(params)
}

/// A call as a person reads it in a question: "slide move_to with target_mm = 150".
pub(crate) fn call_text(device: &str, action: &str, args: &JsonObject) -> String {
    let shown: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    match shown.is_empty() {
        true => format!("{device} {action}"),
        false => format!("{device} {action} with {}", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ten_item_checklist_asks_its_boxes_in_the_plant_s_order() {
        let items: Vec<String> = (1..=10).map(|i| format!("check {i} holds")).collect();
        let params = form("press", "stroke", &JsonObject::new(), &items).unwrap();
        let wire = serde_json::to_value(&params).unwrap();
        let schema = &wire["requestedSchema"];
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        let expected: Vec<String> = (1..=10).map(|i| format!("check_{i}")).collect();
        let text = serde_json::to_string(&params).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":{{")).unwrap();
        let positions: Vec<usize> = expected.iter().map(|k| at(k)).collect();
        assert!(positions.is_sorted(), "boxes out of order: {text}");
        assert_eq!(keys.len(), 10);
        assert_eq!(schema["required"], json!(expected));
        assert_eq!(schema["properties"]["check_10"]["title"], "check 10 holds");
    }
}
