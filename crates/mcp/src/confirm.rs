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
//! person.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most this many tokens wait at once; the oldest is dropped beyond it.
const CAPACITY: usize = 1024;
/// At most this many tokens wait per caller; beyond it the caller's own oldest is dropped, so
/// one caller asking again and again can never evict another caller's pending confirmation.
const PER_CALLER: usize = 32;

/// A confirmation waiting for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// Device id.
    pub device: String,
    /// Action name.
    pub action: String,
    /// The arguments the token is bound to (without `wait_s`, `idempotency_key`, the token).
    pub args: Map<String, Value>,
    /// The caller the token was issued to.
    pub caller: String,
    /// The id the command will have once confirmed (a Tasks client sees it as the task id now).
    pub command_id: String,
    /// The call's `idempotency_key`: the confirmed command carries it, so a retry of the call
    /// finds the command instead of making a second one.
    pub key: Option<String>,
    issued: Instant,
    expires: Instant,
}

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
            Refusal::NotConfirmer(names) => write!(f, "this plant's [server] confirm_by lets only {} confirm an action, with confirm_command; the caller that asked cannot confirm its own action, and nothing was run", names.join(", ")),
        }
    }
}

/// The tokens of one server.
#[derive(Debug)]
pub struct Confirmations {
    ttl: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    used: Mutex<HashMap<String, Instant>>,
}

impl Confirmations {
    /// Tokens valid for `ttl`.
    pub fn new(ttl: Duration) -> Confirmations {
        Confirmations {
            ttl,
            pending: Mutex::new(HashMap::new()),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// Issues a token for this exact request; returns it with its lifetime and the command id
    /// the command will get once confirmed.
    pub fn issue(
        &self,
        device: &str,
        action: &str,
        args: &Map<String, Value>,
        caller: &str,
        key: Option<&str>,
    ) -> (String, Duration, String) {
        let command_id = uuid::Uuid::now_v7().to_string();
        // 244 random bits from the operating system's generator: nothing of the clock in it.
        let token = format!(
            "cfm_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let now = Instant::now();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|_, v| v.expires > now);
        let mine = p.values().filter(|v| v.caller == caller).count();
        let full = p.len() >= CAPACITY;
        if (mine >= PER_CALLER || full)
            && let Some(oldest) = p
                .iter()
                .filter(|(_, v)| v.caller == caller || (full && mine == 0))
                .min_by_key(|(_, v)| v.issued)
                .map(|(k, _)| k.clone())
        {
            p.remove(&oldest);
        }
        p.insert(
            token.clone(),
            Pending {
                device: device.into(),
                action: action.into(),
                args: args.clone(),
                caller: caller.into(),
                command_id: command_id.clone(),
                key: key.map(str::to_string),
                issued: now,
                expires: now + self.ttl,
            },
        );
        (token, self.ttl, command_id)
    }

    /// The waiting confirmation whose command will have this id, with its token.
    pub fn by_command(&self, command_id: &str) -> Option<(String, Pending)> {
        let now = Instant::now();
        let p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.iter()
            .find(|(_, v)| v.command_id == command_id && v.expires > now)
            .map(|(k, v)| (k.clone(), v.clone()))
    }

    /// Consumes a token. With `expect`, the token must have been issued for exactly that device,
    /// action and arguments; a mismatch refuses without consuming it.
    pub fn redeem(
        &self,
        token: &str,
        by: Redeemer<'_>,
        expect: Option<(&str, &str, &Map<String, Value>)>,
    ) -> Result<Pending, Refusal> {
        let now = Instant::now();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = p.get(token) else {
            let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            return Err(if used.contains_key(token) {
                Refusal::Used
            } else {
                Refusal::Unknown
            });
        };
        if entry.expires <= now {
            p.remove(token);
            return Err(Refusal::Expired);
        }
        if let Redeemer::Asker(caller) = by
            && entry.caller != caller
        {
            return Err(Refusal::Mismatch("a different caller".into()));
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
        let pending = p.remove(token).ok_or(Refusal::Unknown)?;
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        used.retain(|_, at| now.duration_since(*at) < self.ttl * 2);
        if used.len() < CAPACITY * 4 {
            used.insert(token.to_string(), now);
        }
        Ok(pending)
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
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn one_caller_asking_again_and_again_never_evicts_another_caller_s_token() {
        let c = Confirmations::new(Duration::from_secs(60));
        let (theirs, _, _) = c.issue("slide", "move_to", &Map::new(), "operator", None);
        let mut mine = Vec::new();
        for _ in 0..(PER_CALLER * 3) {
            mine.push(c.issue("slide", "move_to", &Map::new(), "agent", None).0);
        }
        assert!(
            c.redeem(&theirs, Redeemer::Asker("operator"), None).is_ok(),
            "the operator's token survived"
        );
        // The agent keeps its newest PER_CALLER tokens; its oldest went.
        assert_eq!(
            c.redeem(&mine[0], Redeemer::Asker("agent"), None),
            Err(Refusal::Unknown)
        );
        assert!(
            c.redeem(mine.last().unwrap(), Redeemer::Asker("agent"), None)
                .is_ok()
        );
        // Tokens are long and random, not a clock reading.
        assert_eq!(mine[1].len(), 4 + 64);
        assert_ne!(mine[1][4..20], mine[2][4..20]);
    }

    #[test]
    fn a_token_runs_once_for_the_same_arguments_and_caller() {
        let c = Confirmations::new(Duration::from_secs(60));
        let a = args(json!({"target_mm": 150}));
        let (t, _, id) = c.issue("slide", "move_to", &a, "ops", Some("k1"));
        assert_eq!(c.by_command(&id).map(|(tok, _)| tok), Some(t.clone()));
        let other = args(json!({"target_mm": 151}));
        assert!(matches!(
            c.redeem(
                &t,
                Redeemer::Asker("ops"),
                Some(("slide", "move_to", &other))
            ),
            Err(Refusal::Mismatch(_))
        ));
        assert!(matches!(
            c.redeem(&t, Redeemer::Asker("intruder"), None),
            Err(Refusal::Mismatch(_))
        ));
        let same = args(json!({"target_mm": 150.0}));
        assert_eq!(
            c.redeem(
                &t,
                Redeemer::Asker("ops"),
                Some(("slide", "move_to", &same))
            )
            .unwrap()
            .args,
            a
        );
        assert_eq!(
            c.redeem(&t, Redeemer::Asker("ops"), None),
            Err(Refusal::Used)
        );
        assert_eq!(
            c.redeem("cfm_nope", Redeemer::Asker("ops"), None),
            Err(Refusal::Unknown)
        );
    }

    #[test]
    fn a_confirmer_redeems_another_caller_s_token_and_only_once() {
        let c = Confirmations::new(Duration::from_secs(60));
        let (t, _, _) = c.issue("slide", "move_to", &Map::new(), "agent", None);
        let p = c.redeem(&t, Redeemer::Confirmer("operator"), None).unwrap();
        assert_eq!(p.caller, "agent", "the command stays the asker's");
        assert_eq!(
            c.redeem(&t, Redeemer::Confirmer("operator"), None),
            Err(Refusal::Used)
        );
    }

    #[test]
    fn an_expired_token_is_refused() {
        let c = Confirmations::new(Duration::from_millis(1));
        let (t, _, _) = c.issue("slide", "move_to", &Map::new(), "ops", None);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            c.redeem(&t, Redeemer::Asker("ops"), None),
            Err(Refusal::Expired)
        );
    }
}
