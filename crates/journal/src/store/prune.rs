//! Retention: finished commands older than a cut-off leave the journal with their timelines.
//!
//! Only commands in a terminal status go; `accepted` and `running` ones stay whatever their age,
//! because recovery needs them after a restart. The work is done in transactions of at most
//! [`CHUNK`] commands, so a first prune of a large journal never holds the writer (and the
//! commands waiting on it) for long.

use super::Journal;
use crate::JournalError;

/// Commands deleted per transaction.
const CHUNK: i64 = 1000;

/// The statuses a command never leaves (`Status::is_terminal` in the engine).
const TERMINAL: &str = "('rejected', 'completed', 'failed', 'timeout', 'sent', 'cancelled')";

impl Journal {
    /// Deletes every command that ended before `before_ms` (wall-clock ms, its `updated_at_ms`)
    /// and its timeline; how many commands went. Unfinished commands are never deleted.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, JournalError> {
        self.writable()?;
        let mut total = 0;
        loop {
            let mut tx = self.writer.begin().await?;
            let ids: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT command_id FROM commands WHERE status IN {TERMINAL} AND updated_at_ms < ?
                 LIMIT {CHUNK}"
            )))
            .bind(before_ms)
            .fetch_all(&mut *tx)
            .await?;
            for id in &ids {
                sqlx::query("DELETE FROM events WHERE command_id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM commands WHERE command_id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            total += ids.len() as u64;
            if (ids.len() as i64) < CHUNK {
                return Ok(total);
            }
        }
    }
}
