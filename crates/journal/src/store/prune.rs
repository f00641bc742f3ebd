//! Retention: finished commands older than a cut-off leave the journal with their timelines,
//! without breaking the hash chain.
//!
//! Only commands in a terminal status go; `accepted` and `running` ones stay whatever their age,
//! because recovery needs them after a restart. And only a *prefix* of the chain goes: the events
//! below the oldest event of any command that stays, with the chain's anchor moved to where the
//! rest begins, so `verify` still checks every remaining row and a row deleted anywhere else is
//! a broken link. A finished, old command with an event above that line stays until a later
//! prune finds the line past it. The work is done in transactions of at most [`EVENT_CHUNK`]
//! events and [`CHUNK`] commands, so a first prune of a large journal never holds the writer
//! (and the commands waiting on it) for long.

use super::SqliteStore;
use super::anchor::{self, Anchor};
use crate::JournalError;

/// Commands deleted per transaction.
const CHUNK: i64 = 1000;

/// Events deleted per transaction (a command has a handful).
const EVENT_CHUNK: i64 = 5000;

/// The statuses a command never leaves (`Status::is_terminal` in the engine).
const TERMINAL: &str = "('rejected', 'completed', 'failed', 'timeout', 'sent', 'cancelled')";

impl SqliteStore {
    /// Deletes the commands that ended before `before_ms` (wall-clock ms, their `updated_at_ms`)
    /// with their timelines, as far as the hash chain allows: every event below the oldest
    /// event of a command that stays goes, and the chain's anchor records where the remaining
    /// events start. Returns how many commands went. Unfinished commands are never deleted; a
    /// finished one whose timeline reaches past the oldest kept event waits for a later prune.
    pub(crate) async fn prune(&self, before_ms: i64) -> Result<u64, JournalError> {
        let line = self.prune_line(before_ms).await?;
        while self.prune_events_below(line).await? == EVENT_CHUNK as u64 {}
        let mut total = 0;
        loop {
            let gone = self.prune_commands(before_ms).await?;
            total += gone;
            if gone < CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    /// The `seq` below which every event belongs to a command that may go: the oldest event of
    /// a command that stays, or one past the newest event when none stays. Events written after
    /// this is read are above it, so it holds for the whole prune.
    async fn prune_line(&self, before_ms: i64) -> Result<i64, JournalError> {
        let line: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COALESCE(
                (SELECT e.seq FROM events e JOIN commands c ON c.command_id = e.command_id
                 WHERE NOT (c.status IN {TERMINAL} AND c.updated_at_ms < ?1)
                 ORDER BY e.seq LIMIT 1),
                (SELECT MAX(seq) + 1 FROM events),
                0)"
        )))
        .bind(before_ms)
        .fetch_one(&self.writer)
        .await?;
        Ok(line)
    }

    /// Deletes the oldest events below `line`, [`EVENT_CHUNK`] at most, and moves the anchor
    /// past them in the same transaction. How many went.
    async fn prune_events_below(&self, line: i64) -> Result<u64, JournalError> {
        // IMMEDIATE: it reads, then deletes; a group commit in between would void it.
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let last: Option<(i64, Option<String>)> = sqlx::query_as(
            "SELECT seq, hash FROM (SELECT seq, hash FROM events WHERE seq < ?1 ORDER BY seq
             LIMIT ?2) ORDER BY seq DESC LIMIT 1",
        )
        .bind(line)
        .bind(EVENT_CHUNK)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((seq, hash)) = last else {
            return Ok(0);
        };
        let gone = sqlx::query("DELETE FROM events WHERE seq <= ?1")
            .bind(seq)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let to = Anchor {
            seq: seq + 1,
            prev_hash: hash,
        };
        anchor::set(&mut tx, &to).await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Deletes up to [`CHUNK`] commands that ended before `before_ms` and have no event left.
    async fn prune_commands(&self, before_ms: i64) -> Result<u64, JournalError> {
        let gone = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM commands WHERE command_id IN (
                SELECT command_id FROM commands c WHERE status IN {TERMINAL}
                AND updated_at_ms < ?1
                AND NOT EXISTS (SELECT 1 FROM events e WHERE e.command_id = c.command_id)
                LIMIT {CHUNK})"
        )))
        .bind(before_ms)
        .execute(&self.writer)
        .await?
        .rows_affected();
        Ok(gone)
    }
}
