//! The SQLite store behind [`Journal`]: opening and closing it here, its writes in `writes`, its
//! reads in `reads`, the hash chain's head and anchor in `anchor`, its check in `verify`.

mod anchor;
mod batch;
#[cfg(test)]
mod chain_tests;
#[cfg(test)]
mod fixtures;
mod group;
#[cfg(test)]
mod group_tests;
mod prune;
mod reads;
#[cfg(test)]
mod tests;
mod verify;
mod writes;

pub use anchor::Anchor;
pub use reads::{AuditFilter, AuditRow};
pub use verify::{Break, BrokenLink, VerifyReport};

use crate::JournalError;
use crate::schema::MIGRATIONS;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

/// A handle on the journal. Cheap to clone; safe to share between tasks.
///
/// # Invariants
/// All writes go through `group`, one thread on `writer`, a pool of exactly one connection, so
/// transactions never race for SQLite's write lock and writes waiting together share one commit;
/// reads use `reader` and see committed data only (WAL).
#[derive(Clone, Debug)]
pub struct Journal {
    writer: SqlitePool,
    group: group::Writer,
    reader: SqlitePool,
    /// `sqlite::memory:` only: an idle connection that keeps the shared in-memory database alive.
    /// SQLite drops an in-memory database with its last connection, and the pool closes a
    /// connection whose query was cancelled; without this the writer would reopen on an empty
    /// database ("no such table: commands") and every command would be lost.
    _anchor: Option<SqlitePool>,
    /// Test builds only: writes fail while set, as with a disk that stopped taking them.
    #[cfg(feature = "testing")]
    fail_writes: std::sync::Arc<std::sync::atomic::AtomicBool>,
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

/// Refuses URLs the journal cannot open, with the reason.
fn check_url(url: &str) -> Result<(), JournalError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Err(JournalError::Unsupported {
            url: url.to_string(),
            reason: "PostgreSQL journals arrive with scale-out; use sqlite://PATH for now".into(),
        });
    }
    if !url.starts_with("sqlite:") {
        return Err(JournalError::Unsupported {
            url: url.to_string(),
            reason: "the journal must be sqlite://PATH (or sqlite::memory: for tests)".into(),
        });
    }
    Ok(())
}

impl Journal {
    /// Test builds (`testing` feature): makes every write fail until called with `false`, so
    /// tests can show what the engine does while its journal is unavailable.
    #[cfg(feature = "testing")]
    pub fn fail_writes(&self, on: bool) {
        self.fail_writes
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether writes are taken: always, except in test builds while [`Journal::fail_writes`]
    /// is on.
    #[cfg(feature = "testing")]
    fn writable(&self) -> Result<(), JournalError> {
        if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(JournalError::Database(sqlx::Error::PoolClosed));
        }
        Ok(())
    }

    /// Whether writes are taken: always, outside test builds.
    #[cfg(not(feature = "testing"))]
    fn writable(&self) -> Result<(), JournalError> {
        Ok(())
    }

    /// Opens (creating if needed) the journal at `url`: `sqlite://PATH`, `sqlite:PATH` or
    /// `sqlite::memory:` (for tests: lost when the journal is dropped).
    ///
    /// `postgres://` is refused with an explanation: a shared PostgreSQL journal comes with
    /// scale-out (several gateways on one PostgreSQL, not built yet), and accepting the URL before
    /// then would promise more than exists.
    pub async fn open(url: &str) -> Result<Journal, JournalError> {
        check_url(url)?;
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
            .foreign_keys(true);
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
                .connect_with(options.read_only(true))
                .await?
        };
        Ok(Journal {
            group: group::Writer::start(writer.clone(), head)?,
            writer,
            reader,
            _anchor: anchor,
            #[cfg(feature = "testing")]
            fail_writes: Default::default(),
        })
    }

    /// Opens an existing journal to read it only (`closedloop commands`, `trace`): nothing is
    /// created, no migration runs, and every write fails, so a person reading a plant's history
    /// never changes it. A missing file is an error.
    pub async fn open_read_only(url: &str) -> Result<Journal, JournalError> {
        check_url(url)?;
        let options = SqliteConnectOptions::from_str(url)?
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(10));
        let reader = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options)
            .await?;
        Ok(Journal {
            // Every write fails on a read-only connection: the chain's head is never used.
            group: group::Writer::start(reader.clone(), Default::default())?,
            writer: reader.clone(),
            reader,
            _anchor: None,
            #[cfg(feature = "testing")]
            fail_writes: Default::default(),
        })
    }

    /// Writes taken and transactions committed since the journal opened: writes per commit is
    /// how many callers one fsync served (group commit), a figure for benchmarks and metrics.
    pub fn write_counts(&self) -> (u64, u64) {
        self.group.counts()
    }

    /// Closes both pools, flushing the WAL.
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
        if let Some(anchor) = &self._anchor {
            anchor.close().await;
        }
    }
}

/// A pool of exactly one connection that is never closed for being idle or old: the writer
/// (see [`Journal`]'s invariants), and the anchor of an in-memory database.
async fn one_lasting_connection(options: SqliteConnectOptions) -> Result<SqlitePool, JournalError> {
    Ok(SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
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
