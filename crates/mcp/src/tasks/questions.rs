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
    ElicitRequest, ElicitResult, ElicitationAction, InputRequest, InputRequests, InputResponses,
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

/// What a yes to the question `key` is kept as: the checklist item's text, not its position,
/// so that an answer never counts for another item if the plant's list changed meanwhile (a
/// gateway restarted on a new plant file between two answers: the changed item is asked again).
pub(super) fn recorded(key: &str, checklist: &[String]) -> String {
    let index = key
        .strip_prefix("check_")
        .and_then(|i| i.parse::<usize>().ok());
    match index.and_then(|i| checklist.get(i.wrapping_sub(1))) {
        Some(item) => item.clone(),
        None => key.to_string(),
    }
}

/// The keys of `p`'s questions not yet answered yes.
pub(super) fn open(p: &Pending, checklist: &[String]) -> Vec<String> {
    let mut keys = keys(checklist);
    keys.retain(|k| !p.checked.contains(&recorded(k, checklist)));
    keys
}

/// What the person is asked for `p`: the task's status message and the forms of the questions
/// still open.
pub(super) fn ask(p: &Pending, checklist: &[String]) -> Result<(String, InputRequests), McpError> {
    let call = crate::elicit::call_text(&p.device, &p.action, &p.args);
    let items: Vec<Option<&String>> = match checklist {
        [] => vec![None],
        items => items.iter().map(Some).collect(),
    };
    let mut requests = InputRequests::new();
    for (key, item) in keys(checklist).into_iter().zip(items) {
        if p.checked.contains(&recorded(&key, checklist)) {
            continue;
        }
        let message = match item {
            Some(item) => {
                format!("closedloop: before {call} runs, check: {item}. Confirm only if it holds.")
            }
            None => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        };
        requests.insert(key, form(message)?);
    }
    let message = match checklist.len() {
        0 => format!("closedloop: run {call}? Nothing moves unless you confirm."),
        n => format!(
            "closedloop: run {call}? {} of {n} checks still to confirm; nothing moves until \
             every one is.",
            requests.len()
        ),
    };
    Ok((message, requests))
}

/// A form with one required boolean, `confirm`.
fn form(message: String) -> Result<InputRequest, McpError> {
    let fields = vec![(CONFIRM_KEY.into(), serde_json::json!({"type": "boolean"}))];
    let params = crate::elicit::form_params(message, fields)?;
    Ok(InputRequest::Elicitation(ElicitRequest::new(params)))
}

/// Whether an elicitation answer is a yes: accepted, with "confirm" ticked.
fn is_yes(answer: &ElicitResult) -> bool {
    answer.action == ElicitationAction::Accept && ticked(answer, CONFIRM_KEY)
}

/// Whether the box `key` of an answered form is ticked (`true`, not merely present).
pub(crate) fn ticked(answer: &ElicitResult, key: &str) -> bool {
    let value = answer.content.as_ref().and_then(|c| c.get(key));
    value.and_then(|v| v.as_bool()) == Some(true)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(checked: &[&str]) -> Pending {
        Pending {
            command_id: "c1".into(),
            device: "press".into(),
            action: "stroke".into(),
            args: Default::default(),
            caller: "agent".into(),
            key: None,
            checked: checked.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_yes_counts_for_its_item_not_its_position() {
        let before = ["guard closed".to_string(), "die clamped".to_string()];
        let p = waiting(&["guard closed"]);
        assert_eq!(open(&p, &before), ["check_2"]);
        // The plant's list changed between two answers: the reordered item still counts, a
        // reworded one is asked again.
        let reordered = ["die clamped".to_string(), "guard closed".to_string()];
        assert_eq!(open(&p, &reordered), ["check_1"]);
        let reworded = ["guard shut".to_string(), "die clamped".to_string()];
        assert_eq!(open(&p, &reworded), ["check_1", "check_2"]);
        assert_eq!(open(&waiting(&[]), &[]), ["confirm"]);
    }
}
