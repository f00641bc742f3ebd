//! The journal's writes: every one goes through the single-connection writer pool, in one
//! transaction, and fails while the `testing` feature's `fail_writes` is on.

use super::Journal;
use crate::{CommandRow, EventRow, JournalError};

impl Journal {
    /// Inserts a new command and its first timeline entries in one transaction.
    ///
    /// When this returns `Ok`, the command is on disk: this is the "accepted is durable before
    /// the caller hears of it" step.
    pub async fn insert(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "INSERT INTO commands (command_id, request_id, device, action, params, status, verified,
                verification, error_code, detail, hint, evidence, readback_matched, accepted_at_ms,
                updated_at_ms, deadline_ms, dispatched, caller, idempotency_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (command_id) DO NOTHING",
        )
        .bind(&cmd.command_id)
        .bind(&cmd.request_id)
        .bind(&cmd.device)
        .bind(&cmd.action)
        .bind(cmd.params.to_string())
        .bind(&cmd.status)
        .bind(cmd.verified)
        .bind(&cmd.verification)
        .bind(&cmd.error_code)
        .bind(&cmd.detail)
        .bind(&cmd.hint)
        .bind(cmd.evidence.to_string())
        .bind(cmd.readback_matched)
        .bind(cmd.accepted_at_ms)
        .bind(cmd.updated_at_ms)
        .bind(cmd.deadline_ms)
        .bind(cmd.dispatched)
        .bind(&cmd.caller)
        .bind(&cmd.idempotency_key)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(JournalError::Duplicate(cmd.command_id.clone()));
        }
        insert_events(&mut tx, &cmd.command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces a command's state and appends timeline entries, atomically.
    pub async fn update(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "UPDATE commands SET status = ?, verified = ?, error_code = ?, detail = ?, hint = ?,
                evidence = ?, readback_matched = ?, updated_at_ms = ?, deadline_ms = ?, dispatched = ?
             WHERE command_id = ?",
        )
        .bind(&cmd.status)
        .bind(cmd.verified)
        .bind(&cmd.error_code)
        .bind(&cmd.detail)
        .bind(&cmd.hint)
        .bind(cmd.evidence.to_string())
        .bind(cmd.readback_matched)
        .bind(cmd.updated_at_ms)
        .bind(cmd.deadline_ms)
        .bind(cmd.dispatched)
        .bind(&cmd.command_id)
        .execute(&mut *tx)
        .await?;
        insert_events(&mut tx, &cmd.command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Appends timeline entries without changing the command's state.
    pub async fn append(&self, command_id: &str, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        insert_events(&mut tx, command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Appends `events` to the timeline of `command_id` inside `tx`.
async fn insert_events(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    command_id: &str,
    events: &[EventRow],
) -> Result<(), JournalError> {
    for e in events {
        sqlx::query("INSERT INTO events (command_id, at_ms, event, data) VALUES (?, ?, ?, ?)")
            .bind(command_id)
            .bind(e.at_ms)
            .bind(&e.event)
            .bind(e.data.to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}
