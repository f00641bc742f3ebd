//! The SQLite store behind [`crate::Journal`], the embedded default: opening and closing it
//! here, one transaction of writes in `batch`, its reads in `reads`, the hash chain's head and
//! anchor in `anchor`, its check in `verify`, retention in `prune`.

pub(crate) mod anchor;
pub(crate) mod batch;
#[cfg(test)]
mod chain_tests;
mod checkpoint;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod group_tests;
mod prune;
pub(crate) mod reads;
#[cfg(test)]
mod tests;
mod verify;

pub use anchor::Anchor;
pub use reads::{AuditFilter, AuditRow};
pub use verify::{Break, BrokenLink, VerifyReport};
pub(crate) use verify::{Stored, Walk};

use crate::JournalError;
use crate::chain::Chain;
use crate::group::{self, Committer};
use crate::schema::MIGRATIONS;
use crate::writes::Write;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

/// The SQLite store.
///
/// # Invariants
/// All writes go through the group-commit writer (`crate::group`) on `writer`, a pool of exactly
/// one connection, so transactions never race for SQLite's write lock and writes waiting together
/// share one commit; reads use `reader` and see committed data only (WAL).
#[derive(Clone, Debug)]
pub(crate) struct SqliteStore {
    pub(crate) writer: SqlitePool,
    pub(crate) reader: SqlitePool,
    /// `sqlite::memory:` only: an idle connection that keeps the shared in-memory database alive.
    /// SQLite drops an in-memory database with its last connection, and the pool closes a
    /// connection whose query was cancelled; without this the writer would reopen on an empty
    /// database ("no such table: commands") and every command would be lost.
    _anchor: Option<SqlitePool>,
    /// On disk: the connection and thread that checkpoint the WAL (`checkpoint`), so the
    /// writer never does.
    checkpointer: Option<std::sync::Arc<checkpoint::Checkpointer>>,
}

/// What the group-commit writer commits SQLite writes with: the one writing connection and the
/// head of the hash chain, loaded when the journal opened. A transaction links its events on a
/// copy of the head, which replaces it only once the transaction committed.
pub(crate) struct SqliteCommitter {
    pool: SqlitePool,
    chain: Chain,
}

impl SqliteCommitter {
    /// A committer on `pool` (the one writing connection) continuing the chain from `chain`.
    pub(crate) fn new(pool: SqlitePool, chain: Chain) -> SqliteCommitter {
        SqliteCommitter { pool, chain }
    }

    /// The chain's committed head, as this committer holds it.
    #[cfg(test)]
    pub(crate) fn chain(&self) -> &Chain {
        &self.chain
    }
}

impl Committer for SqliteCommitter {
    async fn run_committed(
        &mut self,
        writes: &[&Write],
    ) -> Result<Vec<Result<(), JournalError>>, JournalError> {
        let mut next = self.chain.clone();
        let mut tx = self.pool.begin().await?;
        let outcomes = batch::run(&mut tx, writes, &mut next).await?;
        tx.commit().await?;
        self.chain = next;
        Ok(outcomes)
    }
}

/// Which commands `list` returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this device.
    pub device: Option<String>,
    /// Only this status.
    pub status: Option<String>,
    /// At most this many (the caller bounds it).
    pub limit: u32,
}

impl SqliteStore {
    /// Opens (creating if needed) the journal at `url`: `sqlite://PATH`, `sqlite:PATH` or
    /// `sqlite::memory:` (for tests: lost when the journal is dropped); with the writer that
    /// commits to it.
    pub(crate) async fn open(url: &str) -> Result<(SqliteStore, group::Writer), JournalError> {
        let memory = url.contains(":memory:");
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(if memory {
                SqliteJournalMode::Memory
            } else {
                SqliteJournalMode::Wal
            })
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("wal_autocheckpoint", checkpoint::BACKSTOP_PAGES);
        let writer = one_lasting_connection(options.clone()).await?;
        let anchor = if memory {
            Some(one_lasting_connection(options.clone()).await?)
        } else {
            None
        };
        migrate(&writer).await?;
        let head = anchor::load_head(&writer).await?;
        let reader = if memory {
            // An in-memory database exists per connection: readers must share the writer's.
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .connect_with(options.clone().read_only(true))
                .await?
        };
        let committer = SqliteCommitter::new(writer.clone(), head);
        let group =
            group::Writer::start(Box::new(move || Box::pin(async move { Ok(committer) }))).await?;
        let checkpointer = if memory {
            None
        } else {
            let pool = one_lasting_connection(options).await?;
            let c = checkpoint::Checkpointer::start(pool, group.commits())
                .map_err(|e| JournalError::Writer(format!("cannot start its checkpoints: {e}")))?;
            Some(std::sync::Arc::new(c))
        };
        let store = SqliteStore {
            writer,
            reader,
            _anchor: anchor,
            checkpointer,
        };
        Ok((store, group))
    }

    /// Opens an existing journal to read it only (`closedloop commands`, `trace`): nothing is
    /// created, no migration runs, and every write fails, so a person reading a plant's history
    /// never changes it. A missing file is an error.
    pub(crate) async fn open_read_only(
        url: &str,
    ) -> Result<(SqliteStore, group::Writer), JournalError> {
        let options = SqliteConnectOptions::from_str(url)?
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(10));
        let reader = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await?;
        // Every write fails on a read-only connection: the chain's head is never used.
        let committer = SqliteCommitter::new(reader.clone(), Chain::default());
        let group =
            group::Writer::start(Box::new(move || Box::pin(async move { Ok(committer) }))).await?;
        let store = SqliteStore {
            writer: reader.clone(),
            reader,
            _anchor: None,
            checkpointer: None,
        };
        Ok((store, group))
    }

    /// Closes every connection, the writer last, after folding the WAL into the database and
    /// truncating it: sqlx closes each SQLite handle on its own worker thread, possibly after
    /// `close` returned, and when a read-only reader happens to be the last handle to close,
    /// SQLite leaves the WAL file as it was (seen once in CI: 3.4 MB left behind).
    pub(crate) async fn close(&self) {
        self.reader.close().await;
        if let Some(c) = &self.checkpointer {
            c.close().await;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.writer)
            .await
        {
            tracing::debug!(error = %e, "final WAL checkpoint at close failed");
        }
        self.writer.close().await;
        if let Some(anchor) = &self._anchor {
            anchor.close().await;
        }
    }
}

/// A pool of exactly one connection that is never closed for being idle or old: the writer
/// (see [`SqliteStore`]'s invariants), and the anchor of an in-memory database.
///
/// Not pinged before each use: a local SQLite handle cannot go stale the way a network
/// connection does, and the ping was one more round trip to sqlx's worker thread in front of
/// every group commit. A failing handle still fails the statement it runs.
async fn one_lasting_connection(options: SqliteConnectOptions) -> Result<SqlitePool, JournalError> {
    Ok(SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .test_before_acquire(false)
        .connect_with(options)
        .await?)
}

/// Brings the schema up to the newest of [`MIGRATIONS`], one transaction per migration.
async fn migrate(pool: &SqlitePool) -> Result<(), JournalError> {
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .execute(pool)
        .await?;
    let current: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_version")
        .fetch_one(pool)
        .await?;
    let current = current.unwrap_or(0);
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let mut tx = pool.begin().await?;
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_version (version) VALUES (?)")
            .bind(version)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
    }
    Ok(())
}
