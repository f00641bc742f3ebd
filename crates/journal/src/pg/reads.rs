//! The PostgreSQL store's reads: the SQLite store's queries (`store::reads`) with PostgreSQL's
//! placeholders, all on the read pool.

use super::PgStore;
use crate::store::reads::{OPEN_STATUSES, command_from_row, parse_json};
use crate::{AuditFilter, AuditRow, CommandRow, EventRow, JournalError, ListFilter};
use sqlx::Row;

impl PgStore {
    /// One command, if it exists.
    pub(crate) async fn get(&self, command_id: &str) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE command_id = $1")
            .bind(command_id)
            .fetch_optional(&self.reader)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
    }

    /// A command's timeline, oldest first.
    pub(crate) async fn events(&self, command_id: &str) -> Result<Vec<EventRow>, JournalError> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT at_ms, event, data FROM events WHERE command_id = $1 ORDER BY seq",
        )
        .bind(command_id)
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(at_ms, event, data)| {
                Ok(EventRow {
                    at_ms,
                    event,
                    data: parse_json(command_id, &data)?,
                })
            })
            .collect()
    }

    /// Commands matching `filter`, newest first.
    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands
             WHERE ($1::TEXT IS NULL OR device = $1) AND ($2::TEXT IS NULL OR status = $2)
             ORDER BY accepted_at_ms DESC, command_id DESC LIMIT $3",
        )
        .bind(&filter.device)
        .bind(&filter.status)
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// When the commands of `device` (of `action`) that reached the device side were accepted,
    /// since `since_ms`, oldest first: what an operation-rate limit counts.
    pub(crate) async fn accepted_since(
        &self,
        device: &str,
        action: Option<&str>,
        since_ms: i64,
    ) -> Result<Vec<i64>, JournalError> {
        let rows: Vec<(i64,)> = sqlx::query_as(
            "SELECT accepted_at_ms FROM commands WHERE device = $1
             AND ($2::TEXT IS NULL OR action = $2)
             AND status != 'rejected' AND action != 'raw_write' AND accepted_at_ms >= $3
             ORDER BY accepted_at_ms",
        )
        .bind(device)
        .bind(action)
        .bind(since_ms)
        .fetch_all(&self.reader)
        .await?;
        Ok(rows.into_iter().map(|(t,)| t).collect())
    }

    /// The audit trail from `filter.since_ms`, oldest first, each command with who confirmed
    /// it (`confirmed_by` in the data of its `accepted` event, read here rather than by SQL so
    /// a damaged row shows as no confirmer instead of failing the page).
    pub(crate) async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>, JournalError> {
        let (after_ms, after_id) = filter.after.clone().unzip();
        let rows = sqlx::query(
            "SELECT c.*, (SELECT e.data FROM events e
                          WHERE e.command_id = c.command_id AND e.event = 'accepted'
                          ORDER BY e.seq LIMIT 1) AS accepted_data
             FROM commands c
             WHERE c.accepted_at_ms >= $1 AND ($2::TEXT IS NULL OR c.caller = $2)
               AND ($3::BIGINT IS NULL OR (c.accepted_at_ms, c.command_id) > ($3, $4::TEXT))
             ORDER BY c.accepted_at_ms, c.command_id LIMIT $5",
        )
        .bind(filter.since_ms)
        .bind(&filter.caller)
        .bind(after_ms)
        .bind(after_id)
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                let data: Option<String> = r.try_get("accepted_data")?;
                Ok(AuditRow {
                    command: command_from_row(r)?,
                    confirmed_by: data.as_deref().and_then(confirmer),
                })
            })
            .collect()
    }

    /// Commands not yet terminal: what start-up recovery must finish. Oldest first.
    pub(crate) async fn unfinished(&self) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands WHERE status IN ($1, $2) ORDER BY accepted_at_ms, command_id",
        )
        .bind(OPEN_STATUSES[0])
        .bind(OPEN_STATUSES[1])
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// The command created with this idempotency key, if any.
    pub(crate) async fn by_idempotency_key(
        &self,
        key: &str,
    ) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE idempotency_key = $1 LIMIT 1")
            .bind(key)
            .fetch_optional(&self.reader)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
    }
}

/// `confirmed_by` of an `accepted` event's stored data, when it is a string there.
fn confirmer(data: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    value.get("confirmed_by")?.as_str().map(str::to_string)
}
