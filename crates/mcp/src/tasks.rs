//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), served from the journal.
//!
//! For a client that declares the extension, an action tool answers with a task whose `taskId` is
//! the `command_id`. `tasks/get` reads the command from the engine (memory while it is live, the
//! journal after), so a task survives a gateway restart. Mapping (docs/architecture.md): `working`
//! until the command is terminal; `completed` carrying the tool result for completed, sent,
//! rejected, failed and timeout (the last three with `isError: true`); `cancelled` for cancelled;
//! task `failed` only for protocol errors: a command closedloop itself failed to supervise (its
//! supervisor panicked; `failed INTERRUPTED` with an `internal_error` timeline entry) is a
//! failed task whose error is JSON-RPC -32603 with the command's detail, its result as `data`.
//!
//! A task's `ttlMs` says how long `tasks/get` keeps answering for it: a confirmation waiting for
//! its answer lives `[server] confirm_ttl_s`; a command lives in the journal until `[server]
//! retain` prunes it (null, unlimited, without `retain`).
//!
//! A confirmation task asks one thing, under the key `confirm`, or one per item of the action's
//! `checklist` (`tasks/questions.rs`): elicitation forms with one boolean each, answered with
//! `tasks/update`, all at once or one at a time; `tasks/cancel` of a task still waiting is a "no".
//! Answers to keys it never asked, or sent after it stopped asking, are ignored and acknowledged
//! (SEP-2663: a client may answer in parts, and only outstanding keys count); an answer under
//! `confirm` that is not an elicitation result is refused; a task id closedloop does not know is
//! `-32602`.

pub(crate) mod questions;
mod view;

use crate::confirm::{Pending, Redeemer, Refusal};
use crate::{Caller, Server};
use closedloop_engine::{CommandResult, EngineError, Submission};
use closedloop_journal::Ticket;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CreateTaskResult, DetailedTask, ErrorCode, GetTaskParams,
    GetTaskResult, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::time::Duration;
use view::{detailed, task_of, waiting_task};

/// Whether this request's client speaks the Tasks extension: it declared it, on protocol
/// 2026-07-28 (the extension's protocol). A 2025 session that lists the extension in its
/// capabilities still gets plain tool results, which is what 2025 clients (the MCP Inspector in
/// its default mode among them) can read.
pub(crate) fn client_wants_tasks(cx: &RequestContext<RoleServer>) -> bool {
    is_modern(cx) && cx.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// Whether this request's session speaks protocol 2026-07-28 or later, where a server asks
/// its client with an `InputRequiredResult`, never with a request of its own.
pub(crate) fn is_modern(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version().is_some_and(|v| !v.has_initialize())
}

fn task_error(e: EngineError) -> McpError {
    match e {
        EngineError::UnknownCommand(id) => {
            McpError::invalid_params(format!("no task {id:?}: no command has this id"), None)
        }
        other => McpError::internal_error(other.to_string(), None),
    }
}

impl Server {
    /// How long the journal keeps a command, so its task: `[server] retain`, which prunes
    /// commands that *finished* longer ago, so each lives at least that long from its creation.
    fn command_ttl(&self) -> Option<Duration> {
        self.engine.plant().server.retain
    }

    /// How long a confirmation waits for its answer: `[server] confirm_ttl_s`.
    fn confirmation_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.engine.plant().server.confirm_ttl_s)
    }

    /// The `CreateTaskResult` an action tool returns to a Tasks client.
    pub(crate) fn created_task(&self, r: &CommandResult) -> CreateTaskResult {
        CreateTaskResult::new(task_of(r, self.command_ttl()))
    }

    /// For a `needs_confirmation` result made for a Tasks client: the task, in `input_required`,
    /// under the id the command will have once the user confirms — or, when only a `[server]
    /// confirm_by` token may confirm, `working` with the token to pass on in its message (the
    /// asker's own answer could not count).
    pub(crate) fn confirmation_task(
        &self,
        r: &CallToolResult,
        cx: &RequestContext<RoleServer>,
    ) -> Option<CreateTaskResult> {
        let v = r.structured_content.as_ref()?;
        if v["status"] != "needs_confirmation" {
            return None;
        }
        let id = v["confirmation_task"].as_str()?.to_string();
        let detail = v["detail"]
            .as_str()
            .unwrap_or("needs a person's confirmation");
        let ttl = self.confirmation_ttl();
        if !self.confirmers_required(cx) {
            let task = waiting_task(id, TaskStatus::InputRequired, detail.into(), ttl);
            return Some(CreateTaskResult::new(task));
        }
        let token = v["confirmation_token"].as_str().unwrap_or_default();
        let message = format!(
            "{detail} You cannot confirm it yourself: give confirmation_token {token} to a person \
             holding the {} token, who runs it with confirm_command within {:.0} s; this task \
             then follows the command.",
            self.confirmers_text(),
            ttl.as_secs_f64()
        );
        let task = waiting_task(id, TaskStatus::Working, message, ttl);
        Some(CreateTaskResult::new(task))
    }

    /// `tasks/get`.
    pub(crate) async fn get_task_impl(
        &self,
        request: GetTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        if !self.caller(&cx).may_read() {
            return Err(McpError::invalid_request(
                "this caller may not read commands (no read scope)",
                None,
            ));
        }
        let asker = self.caller(&cx).name;
        match (self.engine)
            .status_by(&request.task_id, Duration::ZERO, &asker)
            .await
        {
            Ok(r) => Ok(GetTaskResult::new(detailed(&r, self.command_ttl()))),
            Err(EngineError::UnknownCommand(id)) => {
                // Not a command yet: maybe a confirmation waiting for the user.
                let Some(p) = self.waiting(&id).await? else {
                    return Err(task_error(EngineError::UnknownCommand(id)));
                };
                if self.confirmers_required(&cx) {
                    let message = format!(
                        "{} {} waits for a person holding the {} token to confirm it with \
                         confirm_command; nothing was sent.",
                        p.device,
                        p.action,
                        self.confirmers_text()
                    );
                    let ttl = self.confirmation_ttl();
                    let task = waiting_task(id, TaskStatus::Working, message, ttl);
                    return Ok(GetTaskResult::new(DetailedTask::new(
                        task,
                        TaskPayload::Working,
                    )));
                }
                let (message, input_requests) =
                    questions::ask(&p, self.checklist_of(&p.device, &p.action))?;
                let ttl = self.confirmation_ttl();
                let task = waiting_task(id, TaskStatus::InputRequired, message, ttl);
                Ok(GetTaskResult::new(DetailedTask::new(
                    task,
                    TaskPayload::InputRequired { input_requests },
                )))
            }
            Err(e) => Err(task_error(e)),
        }
    }

    /// `tasks/cancel`: `cancel_command` by another name; a confirmation still waiting for its
    /// answer is answered "no" (journaled as rejected `INTERLOCK`: nothing moved). A task that
    /// already ended is acknowledged as it is.
    pub(crate) async fn cancel_task_impl(
        &self,
        request: CancelTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let caller = self.caller(&cx);
        if self.waiting(&request.task_id).await?.is_some() {
            return self
                .answer_confirmation(&request.task_id, false, &caller, &cx)
                .await;
        }
        // Read, never renewed: the scope is checked on it before anything is done.
        let r = (self.engine.peek(&request.task_id))
            .await
            .map_err(task_error)?;
        if !caller.may_actuate(&r.device) {
            return Err(McpError::invalid_request(
                format!("{} may not cancel commands of {}", caller.name, r.device),
                None,
            ));
        }
        self.engine
            .cancel(&request.task_id, Duration::from_secs(5))
            .await
            .map_err(task_error)?;
        Ok(())
    }

    /// `tasks/update`: the user's answer to a confirmation task. Confirmed → the command runs
    /// under the task's id; anything else → the command is journaled as rejected (`INTERLOCK`),
    /// so the task still ends, with `isError`.
    pub(crate) async fn update_task_impl(
        &self,
        request: UpdateTaskParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(p) = self.waiting(&request.task_id).await? else {
            // Asking nothing (any more): a task closedloop knows ignores the answers. Whether it
            // knows it is for a caller that may read commands.
            if !self.caller(&cx).may_read() {
                return Err(McpError::invalid_request(
                    "this caller may not read commands (no read scope)",
                    None,
                ));
            }
            self.engine
                .peek(&request.task_id)
                .await
                .map_err(task_error)?;
            return Ok(());
        };
        self.answer_questions(&p, &request.input_responses, &cx)
            .await
    }

    /// The person's answers to the open questions of the confirmation `p`: a no ends it, the
    /// last yes runs the command, a yes to some of a checklist is kept.
    async fn answer_questions(
        &self,
        p: &Pending,
        responses: &rmcp::model::InputResponses,
        cx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let checklist = self.checklist_of(&p.device, &p.action);
        let open = questions::open(p, checklist);
        let answers = questions::answers(responses, &open)?;
        let caller = self.caller(cx);
        let id = &p.command_id;
        if answers.is_empty() {
            // Answers to keys never asked: ignored; the questions stay open.
            return Ok(());
        }
        if answers.len() == open.len() || answers.iter().any(|(_, yes)| !yes) {
            let yes = answers.iter().all(|(_, yes)| *yes);
            return self.answer_confirmation(id, yes, &caller, cx).await;
        }
        // Some of a checklist's questions: kept; whoever answers the last one runs the command.
        let by = self
            .redeemer(&caller, cx)
            .map_err(|r| McpError::invalid_params(r.to_string(), None))?;
        let items: Vec<String> = answers
            .iter()
            .map(|(k, _)| questions::recorded(k, checklist))
            .collect();
        let checked = self.confirmations.check_off(id, &items, by).await;
        let checked = checked.map_err(refused)?;
        if !checklist.iter().all(|item| checked.contains(item)) {
            return Ok(());
        }
        match self.answer_confirmation(id, true, &caller, cx).await {
            // Another gateway recorded the last answer at the same time and ran the command:
            // this yes counted all the same.
            Err(e) if e.code == ErrorCode::INVALID_PARAMS && self.waiting(id).await?.is_none() => {
                Ok(())
            }
            done => done,
        }
    }

    /// The confirmation still waiting under the task id `command_id`, wherever it was issued.
    async fn waiting(&self, command_id: &str) -> Result<Option<Pending>, McpError> {
        let waiting = self.confirmations.by_command(command_id).await;
        waiting.map_err(|r| crate::call::confirming::unavailable(&r))
    }

    /// Ends a confirmation task with the person's answer: redeems it, then submits the command
    /// under the task's id, confirmed or not (the engine journals an unconfirmed one as
    /// rejected `INTERLOCK`, with nothing sent).
    async fn answer_confirmation(
        &self,
        command_id: &str,
        yes: bool,
        caller: &Caller,
        cx: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let by = match self.redeemer(caller, cx) {
            Ok(by) => by,
            // Under `confirm_by` the asker may still withdraw its own request (`redeem` checks).
            Err(_) if !yes => Redeemer::Asker(&caller.name),
            Err(r) => return Err(McpError::invalid_params(r.to_string(), None)),
        };
        let p = self
            .confirmations
            .redeem(Ticket::Command(command_id), by, None)
            .await
            .map_err(refused)?;
        let runs_as = self.runs_as(by, caller, &p.caller);
        let sub = Submission {
            command_id: Some(p.command_id),
            device: p.device,
            action: p.action,
            args: p.args,
            idempotency_key: p.key,
            request_id: Some(format!("req_{}", uuid::Uuid::now_v7())),
            wait: Duration::ZERO,
            confirmed: yes,
            confirmed_by: yes.then(|| by.name().to_string()),
            ..Submission::default()
        };
        self.submit(sub, &runs_as).await?;
        Ok(())
    }
}

/// A refused answer as a protocol error: the journal's silence as an internal error, anything
/// else as invalid params.
fn refused(r: Refusal) -> McpError {
    match r {
        Refusal::Unavailable(_) => crate::call::confirming::unavailable(&r),
        r => McpError::invalid_params(r.to_string(), None),
    }
}
