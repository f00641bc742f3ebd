//! Two-step confirmation for actions declared `confirm = true`.
//!
//! Nothing moves until confirmed: the first call returns `status: "needs_confirmation"` with a
//! `confirmation_token` bound to the caller and to a fingerprint of the exact arguments. The agent
//! asks its user, then calls `confirm_command(confirmation_token)` (or the same tool again with the
//! same arguments plus `confirmation_token`). A token is valid for `[server] confirm_ttl_s` and is
//! consumed by its first successful use.
//!
//! With `[server] confirm_by = ["operator"]`, over HTTP, the token that asked can no longer
//! confirm: only `confirm_command` called with one of the named tokens redeems a confirmation
//! (a [`Redeemer::Confirmer`]), so an agent holding an actuate scope cannot talk itself past a
//! person — and a `confirm_by` token that asked cannot confirm its own request either: another
//! of them must ([`Refusal::OwnRequest`]).
//!
//! One gateway keeps its tokens in memory. Gateways sharing a PostgreSQL journal keep them in
//! the database instead (`closedloop_journal::SharedConfirmations`): behind one endpoint the
//! call that asks and the call that answers may reach two gateways, and a token issued by one
//! is redeemed at any other, once in all of them.

use closedloop_journal::{Held, SharedConfirmations, Ticket};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many tokens wait at once in memory; the oldest is dropped beyond it.
const CAPACITY: usize = 1024;
/// At most this many tokens wait per caller; beyond it the caller's own oldest is dropped, so
/// one caller asking again and again can never evict another caller's pending confirmation.
const PER_CALLER: usize = 32;

/// A confirmation waiting for its answer: device, action, the arguments the token is bound to
/// (without `wait_s`, `idempotency_key`, the token), the caller it was issued to, the id the
/// command will have once confirmed (a Tasks client sees it as the task id now), and the call's
/// `idempotency_key` (the confirmed command carries it, so a retry finds the command).
pub type Pending = closedloop_journal::ConfirmationRow;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such token was issued (or it was dropped for capacity).
    Unknown,
    /// It was already used.
    Used,
    /// Its time ran out.
    Expired,
    /// The arguments (or the tool, or the caller) differ from what the token was issued for.
    Mismatch(String),
    /// `[server] confirm_by` names who confirms, and this caller is not among them.
    NotConfirmer(Vec<String>),
    /// A `confirm_by` token confirming the request it made itself: another must.
    OwnRequest(String),
    /// The shared journal holding the tokens did not answer: nothing was judged, nothing run.
    Unavailable(String),
}

/// Who is redeeming a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redeemer<'a> {
    /// The caller that asked, after asking its user: it must be the token's own caller.
    Asker(&'a str),
    /// A person's token named in `[server] confirm_by`: it confirms any caller's token.
    Confirmer(&'a str),
}

impl Redeemer<'_> {
    /// The name of the caller redeeming.
    pub fn name(&self) -> &str {
        match self {
            Redeemer::Asker(n) | Redeemer::Confirmer(n) => n,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unknown => f.write_str("this confirmation_token was never issued (or has been dropped); call the tool again to get a new one"),
            Refusal::Used => f.write_str("this confirmation_token was already used; each confirmation runs the action once"),
            Refusal::Expired => f.write_str("this confirmation_token has expired; call the tool again and ask the user again"),
            Refusal::Mismatch(what) => write!(f, "this confirmation_token was issued for other {what}; nothing was run"),
            Refusal::Unavailable(why) => write!(f, "the confirmation could not be checked, the journal did not answer ({why}); nothing was run, call again"),
            Refusal::NotConfirmer(names) => write!(f, "this plant's [server] confirm_by lets only {} confirm an action, with confirm_command; the caller that asked cannot confirm its own action, and nothing was run", names.join(", ")),
            Refusal::OwnRequest(name) => write!(f, "{name} asked for this action and cannot confirm its own request, though [server] confirm_by names it: another token of confirm_by must; nothing was run"),
        }
    }
}

/// The tokens of one server: in memory, or in the journal several gateways share.
#[derive(Debug)]
pub struct Confirmations {
    ttl: Duration,
    memory: Memory,
    shared: Option<SharedConfirmations>,
}

/// The tokens one gateway keeps to itself.
#[derive(Debug, Default)]
struct Memory {
    pending: Mutex<HashMap<String, Waiting>>,
    used: Mutex<HashMap<String, Instant>>,
}

/// A token held in memory.
#[derive(Debug)]
struct Waiting {
    pending: Pending,
    issued: Instant,
    expires: Instant,
}

fn unavailable(e: closedloop_journal::JournalError) -> Refusal {
    Refusal::Unavailable(e.to_string())
}

impl Confirmations {
    /// Tokens valid for `ttl`, kept in `shared` when given (a journal several gateways share),
    /// else in memory.
    pub fn new(ttl: Duration, shared: Option<SharedConfirmations>) -> Confirmations {
        Confirmations {
            ttl,
            memory: Memory::default(),
            shared,
        }
    }

    /// Issues a token for this exact request; returns it with its lifetime and the command id
    /// the command will get once confirmed. Shared, the token is in the journal before this
    /// returns; `Err` ([`Refusal::Unavailable`]) when the journal did not take it.
    pub async fn issue(
        &self,
        device: &str,
        action: &str,
        args: &Map<String, Value>,
        caller: &str,
        key: Option<&str>,
    ) -> Result<(String, Duration, String), Refusal> {
        let command_id = uuid::Uuid::now_v7().to_string();
        // 244 random bits from the operating system's generator: nothing of the clock in it.
        let token = format!(
            "cfm_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let pending = Pending {
            command_id: command_id.clone(),
            device: device.into(),
            action: action.into(),
            args: args.clone(),
            caller: caller.into(),
            key: key.map(str::to_string),
            checked: Vec::new(),
        };
        match &self.shared {
            Some(shared) => shared
                .put(&token, &pending, self.ttl, PER_CALLER)
                .await
                .map_err(unavailable)?,
            None => self.memory.put(token.clone(), pending, self.ttl),
        }
        Ok((token, self.ttl, command_id))
    }

    /// The waiting confirmation whose command will have this id.
    pub async fn by_command(&self, command_id: &str) -> Result<Option<Pending>, Refusal> {
        let Some(shared) = &self.shared else {
            return Ok(self.memory.by_command(command_id).map(|(_, p)| p));
        };
        match shared.find(Ticket::Command(command_id)).await {
            Ok(Some(Held::Pending(p))) => Ok(Some(p)),
            Ok(_) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Records `keys` (checklist items, by their text) as answered yes by `by` on the
    /// confirmation still waiting under `command_id`; returns every one answered so far, so
    /// that whoever records the last one knows it is time to redeem.
    pub async fn check_off(
        &self,
        command_id: &str,
        keys: &[String],
        by: Redeemer<'_>,
    ) -> Result<Vec<String>, Refusal> {
        let Some(shared) = &self.shared else {
            return self.memory.check_off(command_id, keys, by);
        };
        let pending = self.by_command(command_id).await?.ok_or(Refusal::Unknown)?;
        check(&pending, by, None)?;
        let checked = shared.check_off(command_id, keys).await;
        checked.map_err(unavailable)?.ok_or(Refusal::Used)
    }

    /// Consumes the confirmation `ticket` names (its token, or its command id). With `expect`,
    /// it must have been issued for exactly that device, action and arguments; a mismatch
    /// refuses without consuming it.
    pub async fn redeem(
        &self,
        ticket: Ticket<'_>,
        by: Redeemer<'_>,
        expect: Option<(&str, &str, &Map<String, Value>)>,
    ) -> Result<Pending, Refusal> {
        let Some(shared) = &self.shared else {
            return self.memory.redeem(ticket, by, expect, self.ttl);
        };
        let pending = match shared.find(ticket).await.map_err(unavailable)? {
            None => return Err(Refusal::Unknown),
            Some(Held::Used(_)) => return Err(Refusal::Used),
            Some(Held::Expired) => return Err(Refusal::Expired),
            Some(Held::Pending(p)) => p,
        };
        check(&pending, by, expect)?;
        if shared.take(ticket, by.name()).await.map_err(unavailable)? {
            return Ok(pending);
        }
        // Another gateway redeemed it in between, or it expired in between.
        match shared.find(ticket).await.map_err(unavailable)? {
            Some(Held::Expired) => Err(Refusal::Expired),
            _ => Err(Refusal::Used),
        }
    }
}

/// Whether `by` may redeem `entry` for `expect`.
fn check(
    entry: &Pending,
    by: Redeemer<'_>,
    expect: Option<(&str, &str, &Map<String, Value>)>,
) -> Result<(), Refusal> {
    match by {
        Redeemer::Asker(caller) if entry.caller != caller => {
            return Err(Refusal::Mismatch("a different caller".into()));
        }
        // Nobody confirms their own request, a confirmer's token included.
        Redeemer::Confirmer(name) if entry.caller == name => {
            return Err(Refusal::OwnRequest(name.to_string()));
        }
        _ => {}
    }
    if let Some((device, action, args)) = expect {
        if entry.device != device || entry.action != action {
            return Err(Refusal::Mismatch(format!(
                "a different action ({} {})",
                entry.device, entry.action
            )));
        }
        if !same_args(&entry.args, args) {
            return Err(Refusal::Mismatch("arguments".into()));
        }
    }
    Ok(())
}

impl Memory {
    fn put(&self, token: String, pending: Pending, ttl: Duration) {
        let now = Instant::now();
        let caller = pending.caller.clone();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|_, v| v.expires > now);
        let mine = p.values().filter(|v| v.pending.caller == caller).count();
        let full = p.len() >= CAPACITY;
        if (mine >= PER_CALLER || full)
            && let Some(oldest) = p
                .iter()
                .filter(|(_, v)| v.pending.caller == caller || (full && mine == 0))
                .min_by_key(|(_, v)| v.issued)
                .map(|(k, _)| k.clone())
        {
            p.remove(&oldest);
        }
        let waiting = Waiting {
            pending,
            issued: now,
            expires: now + ttl,
        };
        p.insert(token, waiting);
    }

    fn by_command(&self, command_id: &str) -> Option<(String, Pending)> {
        let now = Instant::now();
        let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.iter()
            .find(|(_, v)| v.pending.command_id == command_id && v.expires > now)
            .map(|(k, v)| (k.clone(), v.pending.clone()))
    }

    fn check_off(
        &self,
        command_id: &str,
        keys: &[String],
        by: Redeemer<'_>,
    ) -> Result<Vec<String>, Refusal> {
        let now = Instant::now();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let entry = p
            .values_mut()
            .find(|v| v.pending.command_id == command_id && v.expires > now)
            .ok_or(Refusal::Unknown)?;
        check(&entry.pending, by, None)?;
        let checked = &mut entry.pending.checked;
        checked.extend(keys.iter().cloned());
        checked.sort();
        checked.dedup();
        Ok(checked.clone())
    }

    fn redeem(
        &self,
        ticket: Ticket<'_>,
        by: Redeemer<'_>,
        expect: Option<(&str, &str, &Map<String, Value>)>,
        ttl: Duration,
    ) -> Result<Pending, Refusal> {
        let token = match ticket {
            Ticket::Token(t) => t.to_string(),
            Ticket::Command(id) => self.by_command(id).ok_or(Refusal::Unknown)?.0,
        };
        let now = Instant::now();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = p.get(&token) else {
            let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            return Err(if used.contains_key(&token) {
                Refusal::Used
            } else {
                Refusal::Unknown
            });
        };
        if entry.expires <= now {
            p.remove(&token);
            return Err(Refusal::Expired);
        }
        check(&entry.pending, by, expect)?;
        let waiting = p.remove(&token).ok_or(Refusal::Unknown)?;
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.retain(|_, at| now.duration_since(*at) < ttl * 2);
        if used.len() < CAPACITY * 4 {
            used.insert(token, now);
        }
        Ok(waiting.pending)
    }
}

/// Argument equality that treats `150` and `150.0` as the same number.
fn same_args(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len()
        && a.iter().all(|(k, va)| match (va, b.get(k)) {
            (Value::Number(x), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
            (x, Some(y)) => x == y,
            (_, None) => false,
        })
}

#[cfg(test)]
mod tests;
