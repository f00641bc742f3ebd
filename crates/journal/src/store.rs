//! The SQLite store behind [`crate::Journal`], the embedded default: opening and closing it
//! here, one transaction of writes in `batch`, its reads in `reads`, the hash chain's head and
//! anchor in `anchor`, its check in `verify` (the command rows' half in `verify_rows`),
//! retention in `prune`.

pub(crate) mod anchor;
pub(crate) mod batch;
#[cfg(test)]
mod chain_tests;
mod checkpoint;
mod encoding;
#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod kept_head_tests;
#[cfg(test)]
mod keyed_tests;
mod prune;
pub(crate) mod raw;
pub(crate) mod reads;
mod temp;
#[cfg(test)]
mod tests;
mod verify;
mod verify_rows;
#[cfg(test)]
mod verify_rows_tests;

pub use anchor::Anchor;
pub use reads::{AuditFilter, AuditRow};
pub use verify::{Break, BrokenLink, VerifyReport};
pub(crate) use verify::{Walk, stored};
pub(crate) use verify_rows::{PAGE as ROWS_PAGE, stored_row};

use crate::JournalError;
use crate::chain::{Chain, JournalKey};
use crate::group::{self, Committer};
use crate::schema::MIGRATIONS;
use crate::writes::Write;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The SQLite store.
///
/// # Invariants
/// - Every command write goes through the group-commit writer (`crate::group`), which runs
///   SQLite itself on a connection of its own (`raw`), so writes waiting together share one
///   commit.
/// - `writer` (sqlx, one connection) makes the few other writes (migrations, alarms, prune) and
///   the final checkpoint; it and the group's connection take SQLite's write lock in turn, each
///   waiting for the other up to the busy timeout; prune's transactions begin `IMMEDIATE`, so a
///   commit in between never voids one half-way (`SQLITE_BUSY_SNAPSHOT`), and the migrations
///   run before the group's connection opens.
/// - Reads see committed data only (WAL).
/// - `sqlite::memory:` is a file of its own in the system's temporary folder, deleted with the
///   store (`temp`): SQLite's in-memory databases exist per connection, and the group's
///   connection and sqlx's must see one database.
#[derive(Clone, Debug)]
pub(crate) struct SqliteStore {
    pub(crate) writer: SqlitePool,
    pub(crate) reader: SqlitePool,
    /// `sqlite::memory:` only: the file, deleted once the last clone of the store is dropped.
    _temp: Option<std::sync::Arc<temp::TempFile>>,
    /// On disk: the connection and thread that checkpoint the WAL (`checkpoint`), so the
    /// writer never does.
    checkpointer: Option<std::sync::Arc<checkpoint::Checkpointer>>,
}

/// What the group-commit writer commits SQLite writes with: its own connection and the head of
/// the hash chain, loaded when the journal opened. A transaction links its events on a copy of
/// the head, which replaces it only once the transaction committed.
pub(crate) struct SqliteCommitter {
    db: raw::Db,
    chain: Chain,
}

const BEGIN: &str = "BEGIN IMMEDIATE";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";

impl SqliteCommitter {
    /// A committer on a connection of its own to the journal file at `path` (durable: see
    /// [`Pragmas`]), continuing the chain from `chain`.
    pub(crate) fn open(
        path: &std::path::Path,
        durable: bool,
        chain: Chain,
    ) -> Result<SqliteCommitter, JournalError> {
        let mut db = raw::Db::open(path, false, BUSY)?;
        db.exec(&Pragmas { durable }.sql())?;
        Ok(SqliteCommitter { db, chain })
    }

    /// Runs `writes` in one transaction; rolled back on any error, which leaves the chain's
    /// head where it was.
    fn run(&mut self, writes: &[&Write]) -> Result<Vec<Result<(), JournalError>>, JournalError> {
        let mut next = self.chain.clone();
        if self.db.in_transaction() {
            // A rollback that failed left it open: every BEGIN would fail after it.
            self.db.stmt(ROLLBACK)?.run()?;
        }
        self.db.stmt(BEGIN)?.run()?;
        let done = batch::run(&mut self.db, writes, &mut next)
            .and_then(|outcomes| self.db.stmt(COMMIT)?.run().map(|_| outcomes));
        match done {
            Ok(outcomes) => {
                self.chain = next;
                Ok(outcomes)
            }
            Err(e) => {
                if let Err(r) = self.db.stmt(ROLLBACK).and_then(|mut s| s.run()) {
                    tracing::warn!(error = %r, "journal: rolling back a failed batch failed");
                }
                Err(e)
            }
        }
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
        self.run(writes)
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
    pub(crate) async fn open(
        url: &str,
        key: Option<Arc<JournalKey>>,
    ) -> Result<(SqliteStore, group::Writer), JournalError> {
        let temp = match url.contains(":memory:") {
            true => Some(std::sync::Arc::new(temp::TempFile::new()?)),
            false => None,
        };
        let options = match &temp {
            Some(t) => SqliteConnectOptions::new().filename(t.path()),
            None => {
                shared_query(url)?;
                SqliteConnectOptions::from_str(url)?
            }
        };
        // A test's journal need not survive a power cut, nor be checkpointed off the writer.
        let durable = temp.is_none();
        let pragmas = Pragmas { durable };
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(pragmas.synchronous())
            .busy_timeout(BUSY)
            .foreign_keys(true)
            .pragma("wal_autocheckpoint", pragmas.autocheckpoint());
        if durable {
            create_private(options.get_filename());
        }
        let writer = one_lasting_connection(options.clone()).await?;
        migrate(&writer).await?;
        let mut head = anchor::load_head(&writer).await?;
        head.key = key;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.clone().read_only(true))
            .await?;
        let path = options.get_filename().to_path_buf();
        let group = group::Writer::start(Box::new(move || {
            Box::pin(async move { SqliteCommitter::open(&path, durable, head) })
        }))
        .await?;
        let checkpointer = if durable {
            let pool = one_lasting_connection(options).await?;
            let c = checkpoint::Checkpointer::start(pool, group.commits())
                .map_err(|e| JournalError::Writer(format!("cannot start its checkpoints: {e}")))?;
            Some(std::sync::Arc::new(c))
        } else {
            None
        };
        let store = SqliteStore {
            writer,
            reader,
            _temp: temp,
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
            .busy_timeout(BUSY);
        let reader = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options.clone())
            .await?;
        let path = options.get_filename().to_path_buf();
        // Every write fails on a read-only connection: the chain's head is never used.
        let group = group::Writer::start(Box::new(move || {
            Box::pin(async move {
                let db = raw::Db::open(&path, true, BUSY)?;
                Ok(SqliteCommitter {
                    db,
                    chain: Chain::default(),
                })
            })
        }))
        .await?;
        let store = SqliteStore {
            writer: reader.clone(),
            reader,
            _temp: None,
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
    }
}

/// Refuses the URL parameters that would make the writer's own connection (`raw`, which opens
/// the file by its name) see another database than sqlx's: `immutable` (sqlx's readers would
/// never see a write), `vfs` (the two would not see each other's locks), `mode=memory` or
/// `mode=ro`. `mode=rw`, `mode=rwc` and `cache=…` change nothing for it.
fn shared_query(url: &str) -> Result<(), JournalError> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let fine = matches!(pair, "mode=rw" | "mode=rwc") || pair.starts_with("cache=");
        if !fine {
            return Err(JournalError::Unsupported {
                url: url.to_string(),
                reason: format!(
                    "the parameter `{pair}` is not supported: the journal is written through two \
                     connections that must see one file; remove it (kept: mode=rw, mode=rwc, \
                     cache=...)"
                ),
            });
        }
    }
    Ok(())
}

/// How long a connection waits for another's write lock before its statement fails.
const BUSY: Duration = Duration::from_secs(10);

/// The settings every writing connection of a journal shares: a journal on disk commits with
/// `synchronous = FULL` and leaves checkpoints to its own thread (`checkpoint`, the writer's
/// automatic one only a backstop); a test's (`sqlite::memory:`) does neither.
#[derive(Debug, Clone, Copy)]
struct Pragmas {
    durable: bool,
}

impl Pragmas {
    fn synchronous(self) -> SqliteSynchronous {
        match self.durable {
            true => SqliteSynchronous::Full,
            false => SqliteSynchronous::Off,
        }
    }

    fn autocheckpoint(self) -> &'static str {
        match self.durable {
            true => checkpoint::BACKSTOP_PAGES,
            false => "1000",
        }
    }

    /// The same settings as SQL, for the group's own connection (`raw`).
    fn sql(self) -> String {
        let synchronous = if self.durable { "FULL" } else { "OFF" };
        format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};
             PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = {};",
            self.autocheckpoint()
        )
    }
}

/// A pool of exactly one connection that is never closed for being idle or old: sqlx's writing
/// connection and the checkpointer's (see [`SqliteStore`]'s invariants).
///
/// Not pinged before each use: a local SQLite handle cannot go stale the way a network
/// connection does, and the ping was one more round trip to sqlx's worker thread in front of
/// every group commit. A failing handle still fails the statement it runs.
/// Creates a journal file that does not exist yet readable and writable by its owner alone
/// (0600): it holds who asked for what, and its -wal and -shm files take its mode from SQLite.
/// Files were once created 0644, readable by every account on the machine. An existing file is
/// left as it is.
fn create_private(path: &std::path::Path) {
    use std::os::unix::fs::OpenOptionsExt;
    // Already there, or a path SQLite will refuse with its own words (a missing folder, no
    // permission): nothing to do here either way.
    let _ = (std::fs::OpenOptions::new())
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
}

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
