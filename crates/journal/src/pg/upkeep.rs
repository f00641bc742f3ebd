//! The PostgreSQL store's prune and verify: the SQLite store's rules (`store::prune`,
//! `store::verify`) — prune deletes only a prefix of the hash chain and moves its anchor, verify
//! walks the chain from the anchor in one snapshot — with the chain's head row standing for
//! SQLite's AUTOINCREMENT record of the highest `seq` ever written.

use super::PgStore;
use crate::store::{Stored, Walk};
use crate::{Anchor, JournalError, VerifyReport};
use sqlx::{PgConnection, Row};

/// Commands deleted per transaction.
const CHUNK: i64 = 1000;

/// Events deleted per transaction (a command has a handful).
const EVENT_CHUNK: i64 = 5000;

/// Rows read per query by verify.
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
    /// the first broken link.
    pub(crate) async fn verify(&self) -> Result<VerifyReport, JournalError> {
        let mut tx = self.reader.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .execute(&mut *tx)
            .await?;
        let anchor: Option<(i64, Option<String>)> =
            sqlx::query_as("SELECT seq, prev_hash FROM chain_anchor WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await?;
        let mut walk = Walk::new(anchor.map(|(seq, prev_hash)| Anchor { seq, prev_hash }));
        if !walk_pages(&mut tx, &mut walk).await? {
            return Ok(walk.report);
        }
        let reserved: i64 = sqlx::query_scalar("SELECT seq FROM chain_head WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        walk.finish(Some(reserved));
        Ok(walk.report)
    }
}

/// Feeds every event to `walk` a page at a time: `false` once the walk stopped at a break.
async fn walk_pages(db: &mut PgConnection, walk: &mut Walk) -> Result<bool, JournalError> {
    let mut after = i64::MIN;
    loop {
        let rows = sqlx::query(
            "SELECT seq, command_id, at_ms, event, data, hash, prev_hash
             FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(after)
        .bind(PAGE)
        .fetch_all(&mut *db)
        .await?;
        for r in &rows {
            let row = Stored {
                seq: r.try_get("seq")?,
                command_id: r.try_get("command_id")?,
                at_ms: r.try_get("at_ms")?,
                event: r.try_get("event")?,
                data: r.try_get("data")?,
                hash: r.try_get("hash")?,
                prev_hash: r.try_get("prev_hash")?,
            };
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
