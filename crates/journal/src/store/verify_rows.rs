//! The command rows' half of `Journal::verify`: after the events' chain held, every command row
//! is re-digested (`chain::row`) and compared with the digest its command's last event carrying
//! one recorded — the state the chain last saw the command in. A row edited afterwards (its
//! caller, device, action, params, idempotency key, status, error code or verified flag) no
//! longer matches, and the first such row is named with the fields that differ.
//!
//! Rows are read a page at a time in `command_id` order, inside verify's read transaction, each
//! with its recorded digest found through the `events_by_command` index: memory stays bounded
//! whatever the journal's size.

use super::{Break, BrokenLink, Walk};
use crate::JournalError;
use crate::chain::row::CoveredRow;
use sqlx::SqliteConnection;

/// Rows read per query.
pub(crate) const PAGE: i64 = 1000;

/// One command row's covered fields as stored, with what the chain recorded of it.
#[derive(Debug, Clone)]
pub(crate) struct StoredRow {
    pub(crate) command_id: String,
    pub(crate) caller: Option<String>,
    pub(crate) device: String,
    pub(crate) action: String,
    pub(crate) params: String,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) status: String,
    pub(crate) error_code: Option<String>,
    pub(crate) verified: i64,
    /// The `seq` and `row_digest` of the command's last event carrying a digest, if any.
    pub(crate) recorded: Option<(i64, String)>,
    /// Whether any event (hashed or not) names the command.
    pub(crate) has_events: bool,
}

impl StoredRow {
    fn covered(&self) -> CoveredRow<'_> {
        CoveredRow {
            command_id: &self.command_id,
            caller: self.caller.as_deref(),
            device: &self.device,
            action: &self.action,
            params: &self.params,
            idempotency_key: self.idempotency_key.as_deref(),
            status: &self.status,
            error_code: self.error_code.as_deref(),
            verified: self.verified,
        }
    }
}

impl Walk {
    /// Whether command rows are to be checked: the events' chain held, and some event records
    /// a row (a digest on an event before the first v2 one was never hashed: not evidence).
    pub(crate) fn rows_due(&self) -> bool {
        self.report.broken.is_none() && self.report.covered_from.is_some()
    }

    /// Checks one command row against the chain: `false` once it differs (the check stops).
    pub(crate) fn on_row(&mut self, row: &StoredRow) -> bool {
        if !row.has_events && self.report.anchor.is_some() {
            // A prune deletes a command's events and then its row, in two transactions: in a
            // pruned journal a finished row without events may be one a prune is deleting.
            self.report.rows_uncovered += 1;
            return true;
        }
        if !row.has_events {
            self.report.broken = Some(BrokenLink {
                seq: 0,
                command_id: Some(row.command_id.clone()),
                kind: Break::RowInserted,
                detail: "no event of the journal names this command, though every command is journaled with its timeline and pruned with it: the row was inserted afterwards".into(),
            });
            return false;
        }
        let from = self.report.covered_from.unwrap_or(i64::MAX);
        let Some((seq, recorded)) = row.recorded.as_ref().filter(|(seq, _)| *seq >= from) else {
            self.report.rows_uncovered += 1;
            return true;
        };
        let Err(fields) = row.covered().compare(recorded) else {
            self.report.rows_checked += 1;
            return true;
        };
        self.report.broken = Some(BrokenLink {
            seq: *seq,
            command_id: Some(row.command_id.clone()),
            kind: Break::RowChanged,
            detail: differ(&fields, *seq),
        });
        false
    }
}

/// What a changed row's report says: the fields whose tags differ, when the tags tell.
fn differ(fields: &[&str], seq: i64) -> String {
    let recorded = format!("what the chain recorded at seq {seq}");
    match fields {
        [] => format!("its row does not match {recorded}"),
        [one] => format!("field {one} differs from {recorded}"),
        [first @ .., last] => format!(
            "fields {} and {last} differ from {recorded}",
            first.join(", ")
        ),
    }
}

/// A row of a rows query as [`StoredRow`].
pub(crate) fn stored_row<'r, R>(r: &'r R) -> Result<StoredRow, JournalError>
where
    R: sqlx::Row,
    for<'i> &'i str: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let seq: Option<i64> = r.try_get("recorded_seq")?;
    let has_events: i64 = r.try_get("has_events")?;
    let digest: Option<String> = r.try_get("recorded")?;
    Ok(StoredRow {
        command_id: r.try_get("command_id")?,
        caller: r.try_get("caller")?,
        device: r.try_get("device")?,
        action: r.try_get("action")?,
        params: r.try_get("params")?,
        idempotency_key: r.try_get("idempotency_key")?,
        status: r.try_get("status")?,
        error_code: r.try_get("error_code")?,
        verified: r.try_get("verified")?,
        recorded: seq.zip(digest),
        has_events: has_events != 0,
    })
}

/// The page of rows after `command_id` `?1` (`?1` absent on the first page), `?2` at most,
/// with the digest their command's last event carrying one recorded. Columns are read as text
/// (and `verified` as an integer) whatever an edit stored in them, so an edit is reported, not
/// a decode error. Two texts rather than `?1 IS NULL OR …`, which SQLite answers with a scan of
/// the whole table per page instead of a search from `?1`.
fn rows_sql(first: bool) -> String {
    let after = if first {
        ""
    } else {
        "WHERE cmd.command_id > ?1"
    };
    format!(
        "SELECT CAST(c.command_id AS TEXT) AS command_id, CAST(c.caller AS TEXT) AS caller,
            CAST(c.device AS TEXT) AS device, CAST(c.action AS TEXT) AS action,
            CAST(c.params AS TEXT) AS params, CAST(c.idempotency_key AS TEXT) AS idempotency_key,
            CAST(c.status AS TEXT) AS status, CAST(c.error_code AS TEXT) AS error_code,
            CAST(c.verified AS INTEGER) AS verified,
            e.seq AS recorded_seq, CAST(e.row_digest AS TEXT) AS recorded,
            EXISTS (SELECT 1 FROM events WHERE command_id = c.command_id) AS has_events
        FROM (SELECT cmd.*, (SELECT seq FROM events WHERE command_id = cmd.command_id
                             AND row_digest IS NOT NULL ORDER BY seq DESC LIMIT 1) AS last
              FROM commands cmd {after} ORDER BY cmd.command_id LIMIT ?2) AS c
        LEFT JOIN events e ON e.seq = c.last
        ORDER BY c.command_id"
    )
}

/// Checks every command row of a SQLite journal when [`Walk::rows_due`]; otherwise (or without
/// the `row_digest` column: `digests` false) counts them as not covered.
pub(super) async fn sqlite(
    db: &mut SqliteConnection,
    walk: &mut Walk,
    digests: bool,
) -> Result<(), JournalError> {
    if walk.report.broken.is_some() {
        return Ok(());
    }
    if !digests || !walk.rows_due() {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM commands")
            .fetch_one(&mut *db)
            .await?;
        walk.report.rows_uncovered = n as u64;
        return Ok(());
    }
    let (first, next) = (rows_sql(true), rows_sql(false));
    let mut after: Option<String> = None;
    loop {
        // Built from constants only: every value is bound.
        let sql = if after.is_some() { &next } else { &first };
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(after.as_deref().unwrap_or(""))
            .bind(PAGE)
            .fetch_all(&mut *db)
            .await?;
        for r in &rows {
            let row = stored_row(r)?;
            if !walk.on_row(&row) {
                return Ok(());
            }
            after = Some(row.command_id);
        }
        if (rows.len() as i64) < PAGE {
            break;
        }
    }
    let missing: Option<(i64, String)> = sqlx::query_as(MISSING_SQLITE)
        .bind(walk.report.covered_from)
        .fetch_optional(&mut *db)
        .await?;
    walk.on_missing(missing);
    Ok(())
}

/// The first event from the cover's start that records a row no longer in `commands`.
const MISSING_SQLITE: &str = "SELECT e.seq, CAST(e.command_id AS TEXT) FROM events e
    WHERE e.row_digest IS NOT NULL AND e.seq >= ?1
      AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.command_id = e.command_id)
    ORDER BY e.seq LIMIT 1";

impl Walk {
    /// After the rows: an event that records a row whose command is gone breaks the check.
    pub(crate) fn on_missing(&mut self, missing: Option<(i64, String)>) {
        if let Some((seq, command_id)) = missing {
            self.report.broken = Some(BrokenLink {
                seq,
                detail: format!(
                    "the chain records command {command_id}'s row at seq {seq}, but the commands table has no such row: it was deleted afterwards"
                ),
                command_id: Some(command_id),
                kind: Break::RowMissing,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_row_names_its_fields_in_a_sentence() {
        assert_eq!(
            differ(&[], 7),
            "its row does not match what the chain recorded at seq 7"
        );
        assert_eq!(
            differ(&["caller"], 7),
            "field caller differs from what the chain recorded at seq 7"
        );
        assert_eq!(
            differ(&["caller", "params", "status"], 7),
            "fields caller, params and status differ from what the chain recorded at seq 7"
        );
    }
}
