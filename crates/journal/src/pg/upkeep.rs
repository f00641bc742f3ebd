//! The PostgreSQL store's prune and verify: the SQLite store's rules (`store::prune`,
//! `store::verify`, `store::verify_rows`) — prune deletes only a prefix of the hash chain and
//! moves its anchor, verify walks the chain from the anchor and then checks every command row
//! against the digest the chain recorded, in one snapshot — with the chain's head row standing
//! for SQLite's AUTOINCREMENT record of the highest `seq` ever written.

use super::PgStore;
use crate::store::{ROWS_PAGE, Walk, stored, stored_row};
use crate::{Anchor, JournalError, VerifyReport};
use sqlx::PgConnection;

/// Commands deleted per transaction.
const CHUNK: i64 = 1000;

/// Events deleted per transaction (a command has a handful).
const EVENT_CHUNK: i64 = 5000;

/// Events read per query by verify.
const PAGE: i64 = 1000;

/// The statuses a command never leaves (`Status::is_terminal` in the engine).
const TERMINAL: &str = "('rejected', 'completed', 'failed', 'timeout', 'sent', 'cancelled')";

impl PgStore {
    /// Deletes the commands that ended before `before_ms` with their timelines, as far as the
    /// hash chain allows; how many went (see `store::prune`).
    pub(crate) async fn prune(&self, before_ms: i64) -> Result<u64, JournalError> {
        let line: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT COALESCE(
                (SELECT e.seq FROM events e JOIN commands c ON c.command_id = e.command_id
                 WHERE NOT (c.status IN {TERMINAL} AND c.updated_at_ms < $1)
                 ORDER BY e.seq LIMIT 1),
                (SELECT MAX(seq) + 1 FROM events),
                0)"
        )))
        .bind(before_ms)
        .fetch_one(&self.reader)
        .await?;
        while self.prune_events_below(line).await? == EVENT_CHUNK as u64 {}
        let mut total = 0;
        loop {
            let gone = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM commands WHERE command_id IN (
                    SELECT command_id FROM commands c WHERE status IN {TERMINAL}
                    AND updated_at_ms < $1
                    AND NOT EXISTS (SELECT 1 FROM events e WHERE e.command_id = c.command_id)
                    LIMIT {CHUNK})"
            )))
            .bind(before_ms)
            .execute(&self.reader)
            .await?
            .rows_affected();
            total += gone;
            if gone < CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    /// Deletes the oldest events below `line`, [`EVENT_CHUNK`] at most, and moves the anchor
    /// past them in the same transaction. How many went.
    async fn prune_events_below(&self, line: i64) -> Result<u64, JournalError> {
        let mut tx = self.reader.begin().await?;
        let last: Option<(i64, Option<String>)> = sqlx::query_as(
            "SELECT seq, hash FROM (SELECT seq, hash FROM events WHERE seq < $1 ORDER BY seq
             LIMIT $2) AS oldest ORDER BY seq DESC LIMIT 1",
        )
        .bind(line)
        .bind(EVENT_CHUNK)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((seq, hash)) = last else {
            return Ok(0);
        };
        let gone = sqlx::query("DELETE FROM events WHERE seq <= $1")
            .bind(seq)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(
            "INSERT INTO chain_anchor (id, seq, prev_hash) VALUES (1, $1, $2)
             ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, prev_hash = EXCLUDED.prev_hash",
        )
        .bind(seq + 1)
        .bind(hash)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Re-hashes every event in `seq` order from the prune anchor, in one snapshot, and reports
    /// the first broken link; then checks the command rows against the chain.
    pub(crate) async fn verify(
        &self,
        heads: &[(i64, String)],
        key: Option<&std::sync::Arc<crate::chain::JournalKey>>,
    ) -> Result<VerifyReport, JournalError> {
        let mut tx = self.reader.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        // A journal opened read-only is not migrated: an old one has no `row_digest` yet.
        let digests: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema =
             current_schema() AND table_name = 'events' AND column_name = 'row_digest')",
        )
        .fetch_one(&mut *tx)
        .await?;
        let anchor: Option<(i64, Option<String>)> =
            sqlx::query_as("SELECT seq, prev_hash FROM chain_anchor WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await?;
        let mut walk = Walk::new(anchor.map(|(seq, prev_hash)| Anchor { seq, prev_hash }));
        walk.keep(heads);
        walk.key = key.cloned();
        if !walk_pages(&mut tx, &mut walk, digests).await? {
            return Ok(walk.report);
        }
        let reserved: i64 = sqlx::query_scalar("SELECT seq FROM chain_head WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        walk.finish(Some(reserved));
        walk.check_kept();
        walk.check_keyed_head();
        check_rows(&mut tx, &mut walk, digests).await?;
        Ok(walk.report)
    }
}

/// Feeds every event to `walk` a page at a time: `false` once the walk stopped at a break.
async fn walk_pages(
    db: &mut PgConnection,
    walk: &mut Walk,
    digests: bool,
) -> Result<bool, JournalError> {
    let row_digest = if digests { "row_digest" } else { "NULL::TEXT" };
    // Built from constants only: every value is bound.
    let sql = format!(
        "SELECT seq, command_id, at_ms, event, data, hash, prev_hash, {row_digest} AS row_digest
         FROM events WHERE seq > $1 ORDER BY seq LIMIT $2"
    );
    let mut after = i64::MIN;
    loop {
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(after)
            .bind(PAGE)
            .fetch_all(&mut *db)
            .await?;
        for r in &rows {
            let row = stored(r)?;
            after = row.seq;
            if !walk.on(row) {
                return Ok(false);
            }
        }
        if (rows.len() as i64) < PAGE {
            return Ok(true);
        }
    }
}

/// The page of command rows after `$1` (all from the first when `after` is false), `$2` (or
/// `$1`) at most, with the digest their command's last event carrying one recorded
/// (`store::verify_rows`'s query): a search of `events_by_command` per row, never a scan.
fn rows_sql(after: bool) -> String {
    let (from, limit) = if after {
        ("WHERE c.command_id > $1", "$2")
    } else {
        ("", "$1")
    };
    format!(
        "SELECT c.command_id, c.caller, c.device, c.action, c.params, c.idempotency_key,
            c.status, c.error_code, c.verified::INT::BIGINT AS verified,
            e.seq AS recorded_seq, e.row_digest AS recorded,
            EXISTS (SELECT 1 FROM events WHERE command_id = c.command_id)::INT::BIGINT AS has_events
        FROM commands c
        LEFT JOIN LATERAL (SELECT seq, row_digest FROM events WHERE command_id = c.command_id
                           AND row_digest IS NOT NULL ORDER BY seq DESC LIMIT 1) e ON true
        {from} ORDER BY c.command_id LIMIT {limit}"
    )
}

/// Checks every command row when [`Walk::rows_due`]; otherwise counts them as not covered.
async fn check_rows(
    db: &mut PgConnection,
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
    let (first, next) = (rows_sql(false), rows_sql(true));
    let mut after: Option<String> = None;
    loop {
        // Built from constants only: every value is bound.
        let rows = match &after {
            None => sqlx::query(sqlx::AssertSqlSafe(first.as_str())),
            Some(id) => sqlx::query(sqlx::AssertSqlSafe(next.as_str())).bind(id),
        }
        .bind(ROWS_PAGE)
        .fetch_all(&mut *db)
        .await?;
        for r in &rows {
            let row = stored_row(r)?;
            if !walk.on_row(&row) {
                return Ok(());
            }
            after = Some(row.command_id);
        }
        if (rows.len() as i64) < ROWS_PAGE {
            break;
        }
    }
    let missing: Option<(i64, String)> = sqlx::query_as(
        "SELECT e.seq, e.command_id FROM events e
         WHERE e.row_digest IS NOT NULL AND e.seq >= $1
           AND NOT EXISTS (SELECT 1 FROM commands c WHERE c.command_id = e.command_id)
         ORDER BY e.seq LIMIT 1",
    )
    .bind(walk.report.covered_from)
    .fetch_optional(&mut *db)
    .await?;
    walk.on_missing(missing);
    Ok(())
}
