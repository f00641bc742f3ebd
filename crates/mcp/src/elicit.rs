//! In-protocol confirmation: for clients that declare the elicitation capability (2025-06-18 and
//! 2025-11-25 sessions), a `confirm = true` action asks the user directly with a one-field form
//! ("confirm": yes/no) before anything moves. Clients without it — and 2026-07-28 clients, to
//! which rmcp 3.11 refuses server-to-client requests — get the two-step token instead.

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, JsonObject};
use rmcp::service::RequestContext;
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

/// Asks the user, when the client can be asked.
pub(crate) async fn ask(
    cx: &RequestContext<RoleServer>,
    device: &str,
    action: &str,
    args: &JsonObject,
) -> Answer {
    let can = cx
        .client_capabilities()
        .is_some_and(|c| c.elicitation.is_some());
    if !can {
        return Answer::Unavailable;
    }
    let Ok(schema) = ElicitationSchema::builder()
        .required_bool("confirm")
        .build()
    else {
        return Answer::Unavailable;
    };
    let shown: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let message = format!(
        "closedloop: run {device} {action}{}? Nothing moves unless you confirm.",
        if shown.is_empty() {
            String::new()
        } else {
            format!(" with {}", shown.join(", "))
        }
    );
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    match cx
        .peer
        .create_elicitation_with_timeout(params, Some(ANSWER_TIMEOUT))
        .await
    {
        Ok(r) => match r.action {
            ElicitationAction::Accept => {
                if r.content
                    .as_ref()
                    .and_then(|c| c.get("confirm"))
                    .and_then(|v| v.as_bool())
                    == Some(true)
                {
                    Answer::Confirmed
                } else {
                    Answer::Declined("the user did not tick confirm".into())
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
