//! Confirmations waiting for a person's answer, shared by the gateways on one PostgreSQL
//! journal: a `confirmation_token` issued by one gateway is redeemed at any other, and only
//! once in all of them.
//!
//! One gateway keeps its confirmations in memory (closedloop_mcp's `confirm`); behind a load
//! balancer the call that asks and the call that answers may reach two gateways, and the second
//! would call a good token "never issued". Here the database holds them instead.
//!
//! # Invariants
//! - A token is stored only as its SHA-256: whoever reads the table cannot redeem what it lists.
//! - Every time is the database's (`now()`): a token expires at the same instant for every
//!   gateway, whatever their clocks say.
//! - Redeeming is one conditional `UPDATE` (unused and unexpired): of two gateways redeeming one
//!   token at once, exactly one succeeds.
//! - A caller keeps at most `per_caller` unanswered tokens: issuing one more drops its oldest, so
//!   one caller asking again and again never crowds out another's; rows past their expiry by more
//!   than their lifetime are deleted as tokens are issued.

use super::PgStore;
use crate::{Journal, JournalError};
use sha2::{Digest, Sha256};
use sqlx::postgres::PgPool;
use std::time::Duration;

/// The confirmations table of a PostgreSQL journal.
#[derive(Clone, Debug)]
pub struct SharedConfirmations {
    pool: PgPool,
}

/// What a confirmation was issued for.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmationRow {
    /// The id the command will have once confirmed.
    pub command_id: String,
    /// Device id.
    pub device: String,
    /// Action name.
    pub action: String,
    /// The arguments the token is bound to, as a JSON object.
    pub args: serde_json::Map<String, serde_json::Value>,
    /// The caller the token was issued to.
    pub caller: String,
    /// The call's `idempotency_key`, which the confirmed command carries.
    pub key: Option<String>,
    /// The items of the action's `checklist` the person already answered yes (answered one at
    /// a time, kept by their text), sorted.
    pub checked: Vec<String>,
}

/// Where a confirmation stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// Waiting for its answer.
    Pending(ConfirmationRow),
    /// Redeemed already (by the name given).
    Used(String),
    /// Its time ran out unanswered.
    Expired,
}

/// Which confirmation: by its token, or by the command id it will give its command.
#[derive(Debug, Clone, Copy)]
pub enum Ticket<'a> {
    /// The `confirmation_token` as the caller holds it.
    Token(&'a str),
    /// The command id (a Tasks client's task id).
    Command(&'a str),
}

impl Journal {
    /// The shared confirmations, when the journal is on PostgreSQL (several gateways may share
    /// it); `None` on SQLite, whose one gateway keeps them in memory.
    pub fn confirmations(&self) -> Option<SharedConfirmations> {
        match &self.store {
            crate::journal::Store::Postgres(p) => Some(p.confirmations()),
            crate::journal::Store::Sqlite(_) => None,
        }
    }
}

impl PgStore {
    pub(crate) fn confirmations(&self) -> SharedConfirmations {
        SharedConfirmations {
            pool: self.reader.clone(),
        }
    }
}

/// The stored form of a token: its SHA-256 in hex.
fn digest(token: &str) -> String {
    crate::chain::hex(&Sha256::digest(token.as_bytes()))
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// A confirmation by its token's digest, in [`from_columns`]' order.
const BY_TOKEN: &str = "SELECT command_id, device, action, args, caller, idempotency_key, used_by,
        expires_at <= now(), checked FROM confirmations WHERE token_sha256 = $1";
/// A confirmation still waiting, by its command id, in [`from_columns`]' order.
const BY_COMMAND: &str = "SELECT command_id, device, action, args, caller, idempotency_key,
        used_by, expires_at <= now(), checked FROM confirmations
    WHERE command_id = $1 AND used_by IS NULL AND expires_at > now()";
/// Redeems by token digest ($1) for $2.
const TAKE_BY_TOKEN: &str = "UPDATE confirmations SET used_by = $2, used_at = now()
    WHERE token_sha256 = $1 AND used_by IS NULL AND expires_at > now()";
/// Adds the answered keys $2 to the confirmation still waiting under command id $1.
const CHECK_OFF: &str = "UPDATE confirmations
    SET checked = ARRAY(SELECT DISTINCT k FROM unnest(checked || $2::text[]) AS k ORDER BY k)
    WHERE command_id = $1 AND used_by IS NULL AND expires_at > now() RETURNING checked";
/// Redeems by command id ($1) for $2.
const TAKE_BY_COMMAND: &str = "UPDATE confirmations SET used_by = $2, used_at = now()
    WHERE command_id = $1 AND used_by IS NULL AND expires_at > now()";

type Columns = (
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    bool,
    Vec<String>,
);

fn from_columns(c: Columns) -> Result<Held, JournalError> {
    let (command_id, device, action, args, caller, key, used_by, expired, checked) = c;
    if let Some(by) = used_by {
        return Ok(Held::Used(by));
    }
    if expired {
        return Ok(Held::Expired);
    }
    let args = serde_json::from_str(&args).map_err(|e| JournalError::Corrupt {
        command_id: command_id.clone(),
        reason: format!("its confirmation's arguments: {e}"),
    })?;
    Ok(Held::Pending(ConfirmationRow {
        command_id,
        device,
        action,
        args,
        caller,
        key,
        checked,
    }))
}

impl SharedConfirmations {
    /// Stores `row` under `token` for `ttl`, dropping the caller's oldest unanswered tokens
    /// beyond `per_caller` and the rows long expired. Durable before it returns: any gateway
    /// can redeem the token from then on.
    pub async fn put(
        &self,
        token: &str,
        row: &ConfirmationRow,
        ttl: Duration,
        per_caller: usize,
    ) -> Result<(), JournalError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO confirmations (token_sha256, command_id, device, action, args, caller,
                 idempotency_key, issued_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp(),
                 now() + interval '1 millisecond' * $8)",
        )
        .bind(digest(token))
        .bind(&row.command_id)
        .bind(&row.device)
        .bind(&row.action)
        .bind(serde_json::Value::Object(row.args.clone()).to_string())
        .bind(&row.caller)
        .bind(&row.key)
        .bind(ms(ttl))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM confirmations WHERE token_sha256 IN (
                 SELECT token_sha256 FROM confirmations
                 WHERE caller = $1 AND used_by IS NULL AND expires_at > now()
                 ORDER BY issued_at DESC OFFSET $2)
             OR expires_at < now() - interval '1 millisecond' * $3",
        )
        .bind(&row.caller)
        .bind(per_caller as i64)
        .bind(ms(ttl))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Where the confirmation `ticket` names stands; `None` when none was issued (or it was
    /// dropped). By command id, only one still waiting is found.
    pub async fn find(&self, ticket: Ticket<'_>) -> Result<Option<Held>, JournalError> {
        let (sql, key) = match ticket {
            Ticket::Token(token) => (BY_TOKEN, digest(token)),
            Ticket::Command(id) => (BY_COMMAND, id.to_string()),
        };
        let row: Option<Columns> = sqlx::query_as(sql)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.map(from_columns).transpose()
    }

    /// Records `keys` as answered yes on the confirmation still waiting under `command_id`
    /// and returns every key answered so far; `None` when none waits (used, expired, never
    /// issued). One statement: of two gateways recording answers at once, the later sees both.
    pub async fn check_off(
        &self,
        command_id: &str,
        keys: &[String],
    ) -> Result<Option<Vec<String>>, JournalError> {
        let row: Option<(Vec<String>,)> = sqlx::query_as(CHECK_OFF)
            .bind(command_id)
            .bind(keys)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|(checked,)| checked))
    }

    /// Redeems the confirmation `ticket` names for `by`, if it is still unused and unexpired:
    /// `true` for exactly one of any number of gateways trying at once.
    pub async fn take(&self, ticket: Ticket<'_>, by: &str) -> Result<bool, JournalError> {
        let (sql, key) = match ticket {
            Ticket::Token(token) => (TAKE_BY_TOKEN, digest(token)),
            Ticket::Command(id) => (TAKE_BY_COMMAND, id.to_string()),
        };
        let done = sqlx::query(sql)
            .bind(key)
            .bind(by)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}
