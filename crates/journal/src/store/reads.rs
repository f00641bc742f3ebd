//! The journal's reads. Those a person or a client asks for go to the reader pool; those the
//! engine needs to be current with its own writes (rate limits, recovery, idempotency) go to the
//! writer.

use super::SqliteStore;
use crate::ListFilter;
use crate::{CommandRow, EventRow, JournalError};
use sqlx::{ColumnIndex, Decode, Row, Type};

/// The statuses that are not yet terminal; recovery looks for these at start-up.
pub(crate) const OPEN_STATUSES: [&str; 2] = ["accepted", "running"];

/// Which commands [`Journal::audit`] returns, oldest first: one page of the audit trail.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only commands accepted at or after this (wall-clock ms).
    pub since_ms: i64,
    /// Only this caller (token name, or `stdio`).
    pub caller: Option<String>,
    /// Resume after this `(accepted_at_ms, command_id)`: the last row of the previous page, so
    /// a long trail is read in bounded pages.
    pub after: Option<(i64, String)>,
    /// At most this many (the caller bounds it).
    pub limit: u32,
}

/// One command of the audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// The command as the journal keeps it (its caller, device, action, status, error code).
    pub command: CommandRow,
    /// The token whose confirmation preceded the command: `confirmed_by` in the data of its
    /// `accepted` event, when there.
    pub confirmed_by: Option<String>,
}

impl SqliteStore {
    /// One command, if it exists.
    pub(crate) async fn get(&self, command_id: &str) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE command_id = ?")
            .bind(command_id)
            .fetch_optional(&self.reader)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
    }

    /// A command's timeline, oldest first.
    pub(crate) async fn events(&self, command_id: &str) -> Result<Vec<EventRow>, JournalError> {
        let rows =
            sqlx::query("SELECT at_ms, event, data FROM events WHERE command_id = ? ORDER BY seq")
                .bind(command_id)
                .fetch_all(&self.reader)
                .await?;
        rows.iter()
            .map(|r| {
                let data: String = r.try_get("data")?;
                Ok(EventRow {
                    at_ms: r.try_get("at_ms")?,
                    event: r.try_get("event")?,
                    data: parse_json(command_id, &data)?,
                })
            })
            .collect()
    }

    /// Commands matching `filter`, newest first.
    pub(crate) async fn list(&self, filter: &ListFilter) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands WHERE (?1 IS NULL OR device = ?1) AND (?2 IS NULL OR status = ?2)
             ORDER BY accepted_at_ms DESC, command_id DESC LIMIT ?3",
        )
        .bind(&filter.device)
        .bind(&filter.status)
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// When the commands of `device` (of `action`, if given) that reached the device side —
    /// every status but `rejected`, raw writes left out — were accepted, since `since_ms`,
    /// oldest first: what an operation-rate limit counts, so a restart does not reset it.
    pub(crate) async fn accepted_since(
        &self,
        device: &str,
        action: Option<&str>,
        since_ms: i64,
    ) -> Result<Vec<i64>, JournalError> {
        let rows: Vec<(i64,)> = sqlx::query_as(
            "SELECT accepted_at_ms FROM commands WHERE device = ?1 AND (?2 IS NULL OR action = ?2)
             AND status != 'rejected' AND action != 'raw_write' AND accepted_at_ms >= ?3
             ORDER BY accepted_at_ms",
        )
        .bind(device)
        .bind(action)
        .bind(since_ms)
        .fetch_all(&self.writer)
        .await?;
        Ok(rows.into_iter().map(|(t,)| t).collect())
    }

    /// The commands accepted since `filter.since_ms` (of `filter.caller`, if given), oldest
    /// first, each with who confirmed it: the audit trail `closedloop audit` prints. Raw writes
    /// and rejected calls are commands too (`raw_write`, `rejected`), so they are in it.
    pub(crate) async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>, JournalError> {
        let (after_ms, after_id) = filter.after.clone().unzip();
        let rows = sqlx::query(
            "SELECT c.*, (SELECT CASE WHEN json_valid(e.data)
                                  THEN CAST(json_extract(e.data, '$.confirmed_by') AS TEXT) END
                          FROM events e WHERE e.command_id = c.command_id AND e.event = 'accepted'
                          ORDER BY e.seq LIMIT 1) AS confirmed_by
             FROM commands c
             WHERE c.accepted_at_ms >= ?1 AND (?2 IS NULL OR c.caller = ?2)
               AND (?3 IS NULL OR (c.accepted_at_ms, c.command_id) > (?3, ?4))
             ORDER BY c.accepted_at_ms, c.command_id LIMIT ?5",
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
                Ok(AuditRow {
                    command: command_from_row(r)?,
                    confirmed_by: r.try_get("confirmed_by")?,
                })
            })
            .collect()
    }

    /// Commands that were not terminal when the journal was last written: what start-up recovery
    /// must finish. Oldest first.
    pub(crate) async fn unfinished(&self) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands WHERE status IN (?, ?) ORDER BY accepted_at_ms, command_id",
        )
        .bind(OPEN_STATUSES[0])
        .bind(OPEN_STATUSES[1])
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// The command a caller created with this idempotency key, if any.
    pub(crate) async fn by_idempotency_key(
        &self,
        key: &str,
    ) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE idempotency_key = ? LIMIT 1")
            .bind(key)
            .fetch_optional(&self.writer)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
    }
}

/// Parses a stored JSON column; a column that does not parse marks the row as damaged.
pub(crate) fn parse_json(command_id: &str, text: &str) -> Result<serde_json::Value, JournalError> {
    serde_json::from_str(text).map_err(|e| JournalError::Corrupt {
        command_id: command_id.to_string(),
        reason: e.to_string(),
    })
}

/// A `commands` row as a [`CommandRow`], from either store (their columns decode alike).
pub(crate) fn command_from_row<'r, R>(r: &'r R) -> Result<CommandRow, JournalError>
where
    R: Row,
    for<'i> &'i str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let command_id: String = r.try_get("command_id")?;
    let params: String = r.try_get("params")?;
    let evidence: String = r.try_get("evidence")?;
    Ok(CommandRow {
        params: parse_json(&command_id, &params)?,
        evidence: parse_json(&command_id, &evidence)?,
        request_id: r.try_get("request_id")?,
        device: r.try_get("device")?,
        action: r.try_get("action")?,
        status: r.try_get("status")?,
        verified: r.try_get("verified")?,
        verification: r.try_get("verification")?,
        error_code: r.try_get("error_code")?,
        detail: r.try_get("detail")?,
        hint: r.try_get("hint")?,
        readback_matched: r.try_get("readback_matched")?,
        accepted_at_ms: r.try_get("accepted_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        deadline_ms: r.try_get("deadline_ms")?,
        dispatched: r.try_get("dispatched")?,
        caller: r.try_get("caller")?,
        idempotency_key: r.try_get("idempotency_key")?,
        command_id,
    })
}
