//! Submission: from a tool call to an accepted (journaled) or rejected command, in small steps
//! — scope, idempotency key, parameters, the operation rate, then the device's ownership (a
//! device another gateway drives: the call is handed to it, `ownership/handover.rs`), then
//! `Engine::admit`'s checks in order (`admission.rs`) — each returning the reason nothing will
//! be written, or passing on.

use crate::admission::refusal::Refusal;
use crate::api::new_row;
use crate::context::Change;
use crate::context::live::LiveCommand;
use crate::contract::{ErrorCode, Status};
use crate::engine::{Engine, MAX_WAIT};
use crate::machine::profile::profile;
use crate::machine::{Event, Machine};
use crate::supervision::Supervisor;
use crate::views::result::CommandResult;
use crate::{EngineError, Submission};
use closedloop_journal::{CommandRow, EventRow};
use closedloop_plant::{Action, Params, Scope};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Engine {
    /// Submits a command. Returns the result object: `rejected` (journaled, nothing sent), or
    /// `accepted` — durably journaled before this returns — possibly advanced further if
    /// `wait` allowed. Errors are only for requests that name no action, or a broken journal.
    pub async fn submit(&self, sub: Submission) -> Result<CommandResult, EngineError> {
        // One lock per idempotency key (lookup to insert), and one per device with an
        // operation-rate limit (count to insert; on a shared journal, the database's as well,
        // for every gateway): concurrent calls can neither make two commands of one key nor
        // both spend the last allowed operation.
        let wait = sub.wait.min(MAX_WAIT);
        // The call answers within its wait, however long admission took (a first answer).
        let answer_by = tokio::time::Instant::now() + wait;
        let asker = sub.caller.clone();
        let rated = self.ctx.plant.device(&sub.device).is_some_and(|d| {
            d.max_rate.is_some() || d.action(&sub.action).is_some_and(|a| a.max_rate.is_some())
        });
        let names: Vec<String> = sub
            .idempotency_key
            .iter()
            .cloned()
            .chain(rated.then(|| format!("\u{0}rate:{}", sub.device)))
            .collect();
        let locks: Vec<_> = {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            names
                .iter()
                .map(|k| Arc::clone(keys.entry(k.clone()).or_default()))
                .collect()
        };
        let result = {
            let mut held = Vec::with_capacity(locks.len());
            for l in &locks {
                held.push(l.lock().await);
            }
            // Gateways sharing the journal count one budget: the database's lock, too.
            let shared = match rated {
                true => self.ctx.journal.rate_lock(&sub.device).await?,
                false => None,
            };
            // Held until the command is journaled, not through the caller's wait below.
            let result = self
                .submit_once(
                    Submission {
                        wait: Duration::ZERO,
                        ..sub
                    },
                    wait,
                )
                .await;
            if let Some(lock) = shared {
                lock.release().await;
            }
            result
        };
        drop(locks);
        {
            let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
            for k in names {
                if keys.get(&k).is_some_and(|l| Arc::strong_count(l) <= 1) {
                    keys.remove(&k);
                }
            }
        }
        let first = result?;
        let wait = answer_by.saturating_duration_since(tokio::time::Instant::now());
        if wait.is_zero() || first.status.is_terminal() {
            return Ok(first);
        }
        self.status_of(&first.command_id, wait, asker.as_deref())
            .await
    }

    /// The status as `asker` (the submission's caller) asks for it: only the command's own
    /// requester renews a dead-man action — a replayed key may name another caller's command.
    async fn status_of(
        &self,
        id: &str,
        wait: Duration,
        asker: Option<&str>,
    ) -> Result<CommandResult, EngineError> {
        match asker {
            Some(asker) => self.status_by(id, wait, asker).await,
            None => self.status(id, wait).await,
        }
    }

    /// One submission, its wait zero; `first_answer`: the call's own wait, which bounds the
    /// wait for a device never heard to answer a first time.
    async fn submit_once(
        &self,
        sub: Submission,
        first_answer: Duration,
    ) -> Result<CommandResult, EngineError> {
        let device = self
            .ctx
            .plant
            .device(&sub.device)
            .ok_or_else(|| EngineError::UnknownDevice(sub.device.clone()))?;
        let action = device
            .action(&sub.action)
            .ok_or_else(|| EngineError::UnknownAction(sub.device.clone(), sub.action.clone()))?;
        let wait = sub.wait.min(MAX_WAIT);
        let request_id = sub
            .request_id
            .clone()
            .unwrap_or_else(|| format!("req_{}", uuid::Uuid::now_v7()));
        if let Some(why) = &sub.denied {
            let (code, why) = (ErrorCode::Unauthorized, why.clone());
            return self
                .reject(&sub, &request_id, action, Refusal::freed(code, why))
                .await;
        }
        if let Some(key) = &sub.idempotency_key
            && let Some(prev) = self.ctx.journal.by_idempotency_key(key).await?
        {
            return self.replay(&sub, &request_id, action, prev, wait).await;
        }
        let params = match action.check_params(&sub.args) {
            Ok(p) => p,
            Err(e) => {
                let code = ErrorCode::InvalidParams;
                return self
                    .reject(
                        &sub,
                        &request_id,
                        action,
                        Refusal::kept(code, e.to_string()),
                    )
                    .await;
            }
        };
        if let Some((wait_s, detail)) =
            crate::admission::rules::rate_wait(&self.ctx, device, action).await?
        {
            // A transient refusal: the key stays free, so the same call can be made again later.
            return self
                .reject(
                    &sub,
                    &request_id,
                    action,
                    Refusal::rate_limited(detail, wait_s),
                )
                .await;
        }
        if let Err(refusal) = self.owned(&sub.device) {
            // Another gateway drives the device (or this one is still settling it): the call is
            // accepted here and run there (`ownership/handover.rs`), or refused naming where to send it.
            return match self.hand_to(device) {
                Some(owner) => {
                    self.hand(sub, request_id, action, params, wait, owner)
                        .await
                }
                None => self.reject(&sub, &request_id, action, refusal).await,
            };
        }
        if let Err((code, detail)) = self.admit(&sub, action, &params, Some(first_answer)).await {
            return self
                .reject(&sub, &request_id, action, Refusal::kept(code, detail))
                .await;
        }
        self.accept(sub, request_id, action, params, wait).await
    }

    /// A keyed call whose key is taken: the same call (same device, action and arguments, as
    /// given or once normalised) gets the command — or the rejection — it had; anything else
    /// is refused `INVALID_PARAMS` and the key stays with its command.
    pub(crate) async fn replay(
        &self,
        sub: &Submission,
        request_id: &str,
        action: &Action,
        prev: CommandRow,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        // As a rejection journals them (normalised, or a digest of what did not validate).
        let args = crate::admission::refusal::journaled_args(action, &sub.args);
        if prev.device == sub.device && prev.action == sub.action && prev.params == args {
            return (self.status_of(&prev.command_id, wait, sub.caller.as_deref())).await;
        }
        let detail = format!(
            "idempotency_key {:?} was already used for command {} with other arguments; use a new key for a new command.",
            prev.idempotency_key.as_deref().unwrap_or_default(),
            prev.command_id
        );
        let code = ErrorCode::InvalidParams;
        self.reject(sub, request_id, action, Refusal::freed(code, detail))
            .await
    }

    /// Journals the command as accepted (durable before the caller hears of it) and starts its
    /// supervisor. The command already holds its place in the group's queue.
    async fn accept(
        &self,
        sub: Submission,
        request_id: String,
        action: &Action,
        params: Params,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        let mut machine = Machine::new(profile(action));
        machine.on(Event::Accept);
        let now = self.ctx.clock.now_ms();
        let row = new_row(&sub, &request_id, action, &params, Status::Accepted, now);
        // This gateway's own: the journal's feed announces the insert before the command is
        // registered below, and no take-over here may run it meanwhile.
        let taking = crate::context::Taking::new(&self.ctx, &row.command_id);
        let events = vec![
            EventRow {
                at_ms: now,
                event: "received".into(),
                data: received(&sub, &request_id),
            },
            EventRow {
                at_ms: now,
                event: "accepted".into(),
                data: match &sub.confirmed_by {
                    Some(by) => json!({"confirmed_by": by}),
                    None => serde_json::Value::Null,
                },
            },
        ];
        let epoch = match self.insert_owned(&row, &events).await {
            Ok(epoch) => epoch,
            Err(e) => {
                self.ctx.dequeued(&action.exclusive);
                let Some(refusal) =
                    crate::admission::lease_lost(&e, self.ctx.ownership.instance(), &sub.device)
                else {
                    return Err(e.into());
                };
                return self.reject(&sub, &request_id, action, refusal).await;
            }
        };
        tracing::info!(request_id = %row.request_id, command_id = %row.command_id, device = %row.device,
                       action = %row.action, params = %row.params, "command accepted");
        let id = row.command_id.clone();
        let cmd = Arc::new(LiveCommand::new(row, events, epoch));
        let registered = self.ctx.remember_new(Arc::clone(&cmd));
        drop(taking);
        if !registered {
            // Unreachable while `taking` holds the id; were it not, whoever registered first
            // runs the command, and the caller follows it.
            self.ctx.dequeued(&action.exclusive);
            return self.follow(&id, wait).await;
        }
        self.supervise(Arc::clone(&cmd), action, params, machine, Instant::now());
        if !wait.is_zero() {
            cmd.wait_terminal(Instant::now() + wait).await;
        }
        Ok(cmd.result())
    }

    /// Starts the task of a command journaled `accepted` and registered live (here, or by
    /// another gateway and taken over: `accepted` is when its queue wait began), with its
    /// estimate, announced.
    pub(crate) fn supervise(
        &self,
        cmd: Arc<LiveCommand>,
        action: &Action,
        params: Params,
        machine: Machine,
        accepted: Instant,
    ) {
        let row = cmd.row();
        let dev = Arc::clone(&self.ctx.devices[&row.device]);
        // Until dispatch re-evaluates it, the estimate is the expected duration from now.
        let signals = dev.usable_values(&dev.current(), self.ctx.clock.now_ms());
        let devices = self.ctx.scope_for(action);
        let scope = Scope {
            signals: &signals,
            params: &params,
            devices: &devices,
            extra_strings: &[],
        };
        // A queued command starts when the commands ahead of it are done.
        let start = self
            .ctx
            .group_free_at(&action.exclusive)
            .map_or_else(Instant::now, |t| t.max(Instant::now()));
        if let Some(end) = crate::admission::rules::expected_duration(action, &scope)
            .ok()
            .and_then(|s| start.checked_add(Duration::from_secs_f64(s)))
        {
            cmd.set_expected_end(end);
        }
        let _ = self.ctx.changes.send(Change::Command {
            command_id: row.command_id,
            device: row.device,
            status: "accepted".into(),
            elsewhere: false,
        });
        let action = Arc::new(action.clone());
        let mut sup = Supervisor::new(Arc::clone(&self.ctx), cmd, dev, action, params, machine);
        sup.accepted = accepted;
        self.spawn(sup);
    }

    /// Whether a command (or a rejection) already carries this idempotency key: the MCP layer
    /// asks before a confirmation, so a retried keyed call is answered with its command instead
    /// of a second confirmation.
    pub async fn knows_key(&self, key: &str) -> Result<bool, EngineError> {
        Ok(self.ctx.journal.by_idempotency_key(key).await?.is_some())
    }
}

/// The data of a command's `received` entry: the request id, and the caller's `traceparent`
/// when it sent one (its trace span is then a child of the caller's).
pub(crate) fn received(sub: &Submission, request_id: &str) -> serde_json::Value {
    match &sub.traceparent {
        Some(t) => json!({"request_id": request_id, "traceparent": t}),
        None => json!({"request_id": request_id}),
    }
}
