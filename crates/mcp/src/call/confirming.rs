//! The person's confirmation a `confirm = true` action needs before anything is sent: a token
//! redeemed, a question asked in-protocol (elicitation), or a `needs_confirmation` answer with
//! a token; and `confirm_command`, which redeems one. With `[server] confirm_by`, only the
//! named tokens confirm, over HTTP.

use super::{engine_error, structured, take_wait};
use crate::confirm::{Redeemer, Refusal};
use crate::{Caller, Server};
use closedloop_engine::{ErrorCode, Submission};
use closedloop_journal::Ticket;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::ops::ControlFlow;
use std::time::Duration;

impl Server {
    /// The confirmation step of [`Server::act`], so that `act` reads as a sequence of steps.
    /// `Continue(confirmed_by)` passes the call on: `None` when no confirmation is asked (the
    /// action needs none, the caller may not actuate the device and is refused by `submit`, or
    /// a keyed retry the engine answers), else who confirmed. `Break` answers at once: a refused token, a person's
    /// no, or a needs_confirmation result; nothing was sent.
    pub(super) async fn confirmation(
        &self,
        device: &str,
        action: &str,
        args: &mut JsonObject,
        key: Option<&str>,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<ControlFlow<CallToolResult, Option<String>>, McpError> {
        let needs_confirmation = self
            .engine
            .plant()
            .device(device)
            .and_then(|d| d.action(action))
            .is_some_and(|a| a.confirm);
        // A retried keyed call whose command exists is answered with that command (or refused
        // for other arguments) by the engine: nobody is asked to confirm it twice.
        let replay = match key {
            Some(k) => self.engine.knows_key(k).await.map_err(engine_error)?,
            None => false,
        };
        if !(needs_confirmation && caller.may_actuate(device) && !replay) {
            return Ok(ControlFlow::Continue(None));
        }
        match args.remove("confirmation_token") {
            Some(Value::String(token)) => {
                let expect = Some((device, action, &*args));
                let redeemed = match self.redeemer(caller, cx) {
                    Ok(by) => self
                        .confirmations
                        .redeem(Ticket::Token(&token), by, expect)
                        .await
                        .map(|_| by.name().to_string()),
                    Err(refusal) => Err(refusal),
                };
                match redeemed {
                    Ok(by) => Ok(ControlFlow::Continue(Some(by))),
                    Err(refusal) => confirmation_refused(&refusal).map(ControlFlow::Break),
                }
            }
            Some(_) => Err(McpError::invalid_params(
                "confirmation_token must be a string",
                None,
            )),
            None => self.ask_person(device, action, args, key, caller, cx).await,
        }
    }

    /// A call without a token: asks the person in-protocol (elicitation) when the client can;
    /// otherwise answers needs_confirmation with a token to redeem once the user agreed.
    async fn ask_person(
        &self,
        device: &str,
        action: &str,
        args: &JsonObject,
        key: Option<&str>,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<ControlFlow<CallToolResult, Option<String>>, McpError> {
        let confirmers = &self.engine.plant().server.confirm_by;
        if self.confirmers_required(cx) {
            // The asker's own client answering would be the agent confirming itself. A Tasks
            // client follows the command, once confirmed, as the task it gets now.
            let task = crate::tasks::client_wants_tasks(cx);
            let call = (device, action, args);
            let answer = self.token_answer(call, caller, key, confirmers, task);
            return Ok(ControlFlow::Break(answer.await?));
        }
        let checklist = self.checklist_of(device, action);
        Ok(
            match crate::elicit::ask(cx, device, action, args, checklist).await {
                crate::elicit::Answer::Confirmed => {
                    ControlFlow::Continue(Some(caller.name.clone()))
                }
                crate::elicit::Answer::Declined(why) => {
                    let needed = "a person's confirmation";
                    ControlFlow::Break(declined_result(device, action, needed, &why))
                }
                crate::elicit::Answer::Unavailable => {
                    // A Tasks client gets a task in input_required under the id the command
                    // will have; it answers with tasks/update.
                    let task = crate::tasks::client_wants_tasks(cx);
                    let call = (device, action, args);
                    ControlFlow::Break(self.token_answer(call, caller, key, &[], task).await?)
                }
            },
        )
    }

    /// Issues a confirmation token for `call` (device, action, arguments) and answers
    /// needs_confirmation with it: redeemable by one of `confirmers`, or by the asker when
    /// there are none; with `task`, under the Tasks task the command will be.
    async fn token_answer(
        &self,
        (device, action, args): (&str, &str, &JsonObject),
        caller: &Caller,
        key: Option<&str>,
        confirmers: &[String],
        task: bool,
    ) -> Result<CallToolResult, McpError> {
        let (token, ttl, command_id) = self
            .confirmations
            .issue(device, action, args, &caller.name, key)
            .await
            .map_err(|r| unavailable(&r))?;
        let asked = Asked {
            device,
            action,
            args,
            token: &token,
            ttl,
            task: task.then_some(command_id),
            checklist: self.checklist_of(device, action),
        };
        Ok(needs_confirmation_result(&asked, confirmers))
    }

    /// `confirm_command(confirmation_token, wait_s)`: runs what the token was issued for.
    pub(super) async fn confirm_command(
        &self,
        mut args: JsonObject,
        request_id: String,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let wait = take_wait(&mut args, "wait_s", self.default_wait_s())?;
        let Some(Value::String(token)) = args.get("confirmation_token") else {
            return Err(McpError::invalid_params(
                "confirmation_token (a string) is required",
                None,
            ));
        };
        let redeemed = match self.redeemer(caller, cx) {
            Ok(by) => self
                .confirmations
                .redeem(Ticket::Token(token), by, None)
                .await
                .map(|p| (by, p)),
            Err(refusal) => Err(refusal),
        };
        match redeemed {
            Ok((by, p)) => {
                let runs_as = self.runs_as(by, caller, &p.caller);
                let sub = Submission {
                    command_id: Some(p.command_id),
                    device: p.device,
                    action: p.action,
                    args: p.args,
                    idempotency_key: p.key,
                    wait,
                    request_id: Some(request_id),
                    confirmed: true,
                    confirmed_by: Some(by.name().to_string()),
                    ..Submission::default()
                };
                self.submit(sub, &runs_as).await
            }
            Err(refusal) => confirmation_refused(&refusal),
        }
    }

    /// Who redeems a confirmation in this request: the caller that asked, or, with `[server]
    /// confirm_by` over HTTP, only one of the named tokens.
    pub(crate) fn redeemer<'a>(
        &self,
        caller: &'a Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<Redeemer<'a>, Refusal> {
        if !self.confirmers_required(cx) {
            return Ok(Redeemer::Asker(&caller.name));
        }
        let by = &self.engine.plant().server.confirm_by;
        match by.contains(&caller.name) {
            true => Ok(Redeemer::Confirmer(&caller.name)),
            false => Err(Refusal::NotConfirmer(by.clone())),
        }
    }

    /// Who a redeemed confirmation's command runs as: the caller that asked, with its scopes —
    /// also when a confirmer's yes (`[server] confirm_by`) redeems it, since the confirmer only
    /// agrees; `asker` is the name the confirmation was issued to.
    pub(crate) fn runs_as(&self, by: Redeemer<'_>, caller: &Caller, asker: &str) -> Caller {
        match by {
            Redeemer::Asker(_) => caller.clone(),
            Redeemer::Confirmer(_) => self.token_caller(asker),
        }
    }

    /// Whether confirmations come from `[server] confirm_by` tokens in this request: only over
    /// HTTP, where callers are tokens (over stdio the one caller is whoever started the process).
    pub(crate) fn confirmers_required(&self, cx: &RequestContext<RoleServer>) -> bool {
        !self.engine.plant().server.confirm_by.is_empty() && crate::http::caller_from(cx).is_some()
    }

    /// Who may confirm under `[server] confirm_by`, for a sentence: "operator or shift_lead".
    pub(crate) fn confirmers_text(&self) -> String {
        self.engine.plant().server.confirm_by.join(" or ")
    }

    /// What the person checks before confirming `device` `action` (its `checklist`; empty for
    /// a plain yes).
    pub(crate) fn checklist_of(&self, device: &str, action: &str) -> &[String] {
        let plant = self.engine.plant();
        let action = plant.device(device).and_then(|d| d.action(action));
        action.map_or(&[], |a| a.checklist.as_slice())
    }

    /// The caller of the plant token `name`, with its scopes (none if the plant has no such token).
    fn token_caller(&self, name: &str) -> Caller {
        let scopes = self
            .engine
            .plant()
            .server
            .tokens
            .iter()
            .find(|t| t.name == name);
        Caller {
            name: name.to_string(),
            scopes: scopes.map(|t| t.scopes.clone()).unwrap_or_default(),
        }
    }
}

/// A confirmation token just issued, and what for.
struct Asked<'a> {
    device: &'a str,
    action: &'a str,
    args: &'a JsonObject,
    token: &'a str,
    ttl: Duration,
    task: Option<String>,
    checklist: &'a [String],
}

/// The first answer to a `confirm = true` action: nothing was sent; a person must agree first.
/// With `confirmers` (`[server] confirm_by`), one of them confirms, not the asker.
fn needs_confirmation_result(asked: &Asked<'_>, confirmers: &[String]) -> CallToolResult {
    let Asked {
        device,
        action,
        args,
        token,
        ttl,
        ..
    } = *asked;
    let shown: Vec<String> = args.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    let detail = format!(
        "{device} {action} ({}) needs a person's confirmation before anything moves; nothing was sent.",
        if shown.is_empty() {
            "no parameters".to_string()
        } else {
            shown.join(", ")
        }
    );
    // In the detail, which a confirmation task's message passes on to whoever confirms.
    let checks = match asked.checklist {
        [] => String::new(),
        items => format!(
            " Before confirming, the person checks each of: {}.",
            items.join("; ")
        ),
    };
    let detail = format!("{detail}{checks}");
    let hint = match confirmers {
        [] => format!(
            "Ask the user whether to run {device} {action} with exactly these parameters. Only if they agree, call confirm_command with this confirmation_token within {:.0} s.",
            ttl.as_secs_f64()
        ),
        names => format!(
            "You cannot confirm this yourself. Give this confirmation_token to a person holding the {} token; they run it with confirm_command within {:.0} s. Then follow the command with get_command_status.",
            names.join(" or "),
            ttl.as_secs_f64()
        ),
    };
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
    if let Some(id) = &asked.task {
        v["confirmation_task"] = json!(id);
    }
    structured(v, false, format!("Needs confirmation: {detail} {hint}"))
}

/// The person said no, or gave no answer, to what was asked in-protocol (`needed`: "a
/// person's confirmation", "a person's answer"): `rejected INTERLOCK`; nothing was sent.
pub(super) fn declined_result(
    device: &str,
    action: &str,
    needed: &str,
    why: &str,
) -> CallToolResult {
    let code = ErrorCode::Interlock;
    let detail = format!("{device} {action} needs {needed} and {why}; nothing was sent.");
    let v = json!({"status": "rejected", "device": device, "action": action, "error_code": code.as_str(), "detail": detail,
                   "hint": "The person did not agree. Do not retry unless they ask for it."});
    structured(v, true, format!("Rejected (INTERLOCK): {detail}"))
}

/// A refused confirmation token: an `isError` result, nothing run.
fn confirmation_refused(refusal: &Refusal) -> Result<CallToolResult, McpError> {
    if let Refusal::Unavailable(_) = refusal {
        return Err(unavailable(refusal));
    }
    let code = ErrorCode::InvalidParams;
    let detail = refusal.to_string();
    let v = json!({"status": "rejected", "error_code": code.as_str(), "detail": detail, "hint": "Call the action tool again to get a new confirmation_token, and ask the user again."});
    Ok(structured(
        v,
        true,
        format!("Rejected (INVALID_PARAMS): {detail}"),
    ))
}

/// A confirmation the shared journal could not issue or check: a protocol error (nothing was
/// judged, nothing run), as any other journal failure is.
pub(crate) fn unavailable(refusal: &Refusal) -> McpError {
    McpError::internal_error(refusal.to_string(), None)
}
