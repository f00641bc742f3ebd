//! What a confirmation task asks the person, and how their answers read.
//!
//! A confirmation asks one question under the key `confirm`. An action with a `checklist` asks
//! one question per item instead (`check_1`, `check_2`, …): each its own yes, which a client may
//! send one at a time (SEP-2663 partial fulfilment). `tasks/get` shows only the questions still
//! open; the task stays `input_required` until every one is answered yes, and one no ends it.
//! Every question is an elicitation form with one required boolean, `confirm`.

use crate::confirm::Pending;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputResponses,
};

/// The key of a confirmation's one question, and the boolean every question's form asks.
pub(crate) const CONFIRM_KEY: &str = "confirm";

/// The keys of the questions a confirmation asks: `confirm`, or one per checklist item.
pub(crate) fn keys(checklist: &[String]) -> Vec<String> {
    match checklist.len() {
        0 => vec![CONFIRM_KEY.to_string()],
        n => (1..=n).map(|i| format!("check_{i}")).collect(),
    }
}

/// The keys of `p`'s questions not yet answered yes.
pub(super) fn open(p: &Pending, checklist: &[String]) -> Vec<String> {
    let mut keys = keys(checklist);
    keys.retain(|k| !p.checked.contains(k));
    keys
}

/// What the person is asked for `p`: the task's status message and the forms of the questions
/// still open.
pub(super) fn ask(p: &Pending, checklist: &[String]) -> Result<(String, InputRequests), McpError> {
    let shown: Vec<String> = p.args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let call = format!(
        "{} {}{}",
        p.device,
        p.action,
        if shown.is_empty() {
            String::new()
        } else {
            format!(" with {}", shown.join(", "))
        }
    );
    let open = open(p, checklist);
    let mut requests = InputRequests::new();
    for key in &open {
        let message = match key
            .strip_prefix("check_")
            .and_then(|i| i.parse::<usize>().ok())
        {
            Some(i) => format!(
                "closedloop: before {call} runs, check: {}. Confirm only if it holds.",
                checklist[i - 1]
            ),
            None => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        };
        requests.insert(key.clone(), form(message)?);
    }
    let message = match checklist.len() {
        0 => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        n => format!(
            "closedloop: run {call}? {} of {n} checks still to confirm; nothing moves until \
             every one is.",
            open.len()
        ),
    };
    Ok((message, requests))
}

/// A form with one required boolean, `confirm`.
fn form(message: String) -> Result<InputRequest, McpError> {
    let schema = ElicitationSchema::builder()
        .required_bool(CONFIRM_KEY)
        .build()
        .map_err(|_| McpError::internal_error("could not build the confirmation form", None))?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    Ok(InputRequest::Elicitation(ElicitRequest::new(params)))
}

/// Whether an elicitation answer is a yes: accepted, with "confirm" ticked.
fn is_yes(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|c| c.get(CONFIRM_KEY))
            .and_then(|v| v.as_bool())
            == Some(true)
}

/// The answers in `responses` to the `open` questions, as (key, yes); answers to any other key
/// are ignored (SEP-2663). An answer that is not an elicitation result is refused.
pub(super) fn answers(
    responses: &InputResponses,
    open: &[String],
) -> Result<Vec<(String, bool)>, McpError> {
    let mut out = Vec::new();
    for key in open {
        let Some(answer) = responses.get(key) else {
            continue;
        };
        let answer: ElicitResult = serde_json::from_value(answer.clone()).map_err(|_| {
            McpError::invalid_params(
                format!("tasks/update needs an elicitation result under {key:?}"),
                None,
            )
        })?;
        out.push((key.clone(), is_yes(&answer)));
    }
    Ok(out)
}
