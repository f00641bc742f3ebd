//! Where the hash chain stands in the database: its head, which the writer loads at open, and
//! its anchor, which prune moves forward and verify starts from.

use crate::JournalError;
use crate::chain::{Chain, GENESIS};
use sqlx::{Sqlite, SqliteExecutor, Transaction};

/// Where the remaining chain starts after a prune deleted its oldest events.
///
/// Prune deletes only a prefix of the chain (every event below some `seq`), so the events left
/// must start exactly here: the first of them links to `prev_hash`. A row missing after the
/// anchor is then a broken link, like one missing anywhere else.
#[derive(Debug, Clone, PartialEq)]
pub struct Anchor {
    /// Every event below this `seq` was pruned.
    pub seq: i64,
    /// The hash of the last pruned event, which the first remaining one links to; `None` when
    /// that event was written before the chain began (it had no hash).
    pub prev_hash: Option<String>,
}

/// The anchor, if the journal was ever pruned since the chain began.
pub(super) async fn read(db: impl SqliteExecutor<'_>) -> Result<Option<Anchor>, JournalError> {
    let row: Option<(i64, Option<String>)> =
        sqlx::query_as("SELECT seq, prev_hash FROM chain_anchor WHERE id = 1")
            .fetch_optional(db)
            .await?;
    Ok(row.map(|(seq, prev_hash)| Anchor { seq, prev_hash }))
}

/// Records that every event below `anchor.seq` is gone, in the transaction that deleted them.
pub(super) async fn set(
    tx: &mut Transaction<'_, Sqlite>,
    anchor: &Anchor,
) -> Result<(), JournalError> {
    sqlx::query(
        "INSERT INTO chain_anchor (id, seq, prev_hash) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, prev_hash = excluded.prev_hash",
    )
    .bind(anchor.seq)
    .bind(&anchor.prev_hash)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The committed head of the chain, for the writer to continue from: the next event's `seq`
/// follows the highest the table ever had (SQLite's AUTOINCREMENT record, which survives
/// deletion) and it links to the newest event's hash — or, when prune left no event, to the
/// anchor's, or to [`GENESIS`] when the chain has not begun.
pub(crate) async fn load_head(db: &sqlx::SqlitePool) -> Result<Chain, JournalError> {
    let newest: Option<(i64, Option<String>)> =
        sqlx::query_as("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            .fetch_optional(db)
            .await?;
    let reserved: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
            .fetch_optional(db)
            .await?;
    let anchor = read(db).await?;
    let newest_seq = newest.as_ref().map_or(0, |(seq, _)| *seq);
    let anchored_seq = anchor.as_ref().map_or(0, |a| a.seq - 1);
    let last_hash = match (newest, anchor) {
        (Some((_, Some(hash))), _) => hash,
        // A legacy newest event: the chain begins with the next one.
        (Some((_, None)), _) => GENESIS.to_string(),
        (
            None,
            Some(Anchor {
                prev_hash: Some(hash),
                ..
            }),
        ) => hash,
        (None, _) => GENESIS.to_string(),
    };
    Ok(Chain {
        last_seq: newest_seq.max(reserved.unwrap_or(0)).max(anchored_seq),
        last_hash,
        key: None,
    })
}
