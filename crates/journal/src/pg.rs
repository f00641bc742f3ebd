//! The PostgreSQL store behind [`crate::Journal`], for gateways that share one database: the
//! same tables and semantics as the SQLite store, in PostgreSQL's types. Opening it here, one
//! transaction of writes in `batch`, reads in `reads`, prune and verify in `upkeep`.
//!
//! # Invariants
//! - The hash chain's head lives in the database (`chain_head`), locked and moved by every write
//!   transaction, so writers in several processes extend one chain in turn and a rolled-back
//!   transaction moves nothing.
//! - Migrations run under a transaction-scoped advisory lock: gateways starting together create
//!   the tables once.
//! - Reads go to a pool of their own; PostgreSQL shows every committed row to every connection,
//!   so the reads the engine needs current with its own writes are current there too.

mod batch;
#[cfg(test)]
mod confirmation_tests;
pub(crate) mod confirmations;
pub(crate) mod device_values;
pub(crate) mod feed;
#[cfg(test)]
mod lease_tests;
pub(crate) mod leases;
pub(crate) mod rate_lock;
mod reads;
#[cfg(test)]
mod test_db;
#[cfg(test)]
mod tests;
mod upkeep;
#[cfg(test)]
mod verify_tests;

use crate::JournalError;
use crate::chain::JournalKey;
use crate::group::{self, Committer};
use crate::schema::PG_MIGRATIONS;
use crate::writes::Write;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The advisory lock key migrations hold (an arbitrary constant: "closedloop" in ASCII, cut).
const MIGRATION_LOCK: i64 = 0x636c_6f73_6564;

/// How long opening waits for PostgreSQL before saying it cannot be reached.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The PostgreSQL store: a pool for reads (the writer's connection is the writer thread's).
#[derive(Clone, Debug)]
pub(crate) struct PgStore {
    pub(crate) reader: PgPool,
}

/// What the group-commit writer commits PostgreSQL writes with: its own connection.
struct PgCommitter {
    pool: PgPool,
    /// The journal's key, when the chain is keyed (v3).
    key: Option<Arc<JournalKey>>,
}

impl Committer for PgCommitter {
    async fn run_committed(
        &mut self,
        writes: &[&Write],
    ) -> Result<Vec<Result<(), JournalError>>, JournalError> {
        let mut tx = self.pool.begin().await?;
        let outcomes = batch::run(&mut tx, writes, self.key.clone()).await?;
        tx.commit().await?;
        Ok(outcomes)
    }
}

impl PgStore {
    /// Connects to the database `url` names, creates or updates its tables, and starts the
    /// writer on a connection of its own.
    pub(crate) async fn open(
        url: &str,
        key: Option<Arc<JournalKey>>,
    ) -> Result<(PgStore, group::Writer), JournalError> {
        let options = connect_options(url)?;
        probe(&options, url).await?;
        let reader = pool(&options, 4, url).await?;
        migrate(&reader).await?;
        let shown = redacted(url);
        let group = group::Writer::start(Box::new(move || {
            Box::pin(async move {
                let pool = pool(&options, 1, &shown).await?;
                Ok(PgCommitter { pool, key })
            })
        }))
        .await?;
        Ok((PgStore { reader }, group))
    }

    /// Connects with every transaction read-only: no table is created, every write fails.
    pub(crate) async fn open_read_only(
        url: &str,
    ) -> Result<(PgStore, group::Writer), JournalError> {
        let options = connect_options(url)?.options([("default_transaction_read_only", "on")]);
        probe(&options, url).await?;
        let reader = pool(&options, 2, url).await?;
        let writer = reader.clone();
        let group = group::Writer::start(Box::new(move || {
            Box::pin(async move {
                Ok(PgCommitter {
                    pool: writer,
                    key: None,
                })
            })
        }))
        .await?;
        Ok((PgStore { reader }, group))
    }

    /// A listener on the journal's change channel, on a connection of its own.
    pub(crate) async fn feed(&self) -> Result<feed::ChangeFeed, JournalError> {
        feed::ChangeFeed::open((*self.reader.connect_options()).clone()).await
    }

    /// Closes the read pool (the writer's closes with the writer thread).
    pub(crate) async fn close(&self) {
        self.reader.close().await;
    }
}

/// The connection options `url` names, or why it names none.
/// A session that stops in the middle of a transaction (a paused gateway) is ended by the
/// server after this, releasing its locks (the chain's head, its leases' rows).
const IDLE_IN_TRANSACTION_MS: &str = "2000";

fn connect_options(url: &str) -> Result<PgConnectOptions, JournalError> {
    let options = PgConnectOptions::from_str(url).map_err(|e| JournalError::Unsupported {
        url: redacted(url),
        reason: format!("not a PostgreSQL URL ({e}); write postgres://USER@HOST:PORT/DATABASE"),
    })?;
    Ok(options.options([(
        "idle_in_transaction_session_timeout",
        IDLE_IN_TRANSACTION_MS,
    )]))
}

/// One connection, opened and closed, so that a database that cannot be reached is reported
/// with the reason (refused, unknown host, bad password) rather than as a pool's time-out.
async fn probe(options: &PgConnectOptions, url: &str) -> Result<(), JournalError> {
    let unreachable = |reason: String| JournalError::Unreachable {
        url: redacted(url),
        reason,
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(c)) => c.close().await.map_err(|e| unreachable(e.to_string())),
        Ok(Err(e)) => Err(unreachable(e.to_string())),
        Err(_) => Err(unreachable(format!(
            "no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// A pool of `size` connections, opened now: a database that does not answer is
/// [`JournalError::Unreachable`], named by `url` (its password left out).
async fn pool(options: &PgConnectOptions, size: u32, url: &str) -> Result<PgPool, JournalError> {
    PgPoolOptions::new()
        .max_connections(size)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options.clone())
        .await
        .map_err(|e| JournalError::Unreachable {
            url: redacted(url),
            reason: e.to_string(),
        })
}

/// `url` as it may be shown in messages and logs: its password replaced by `***`, in the user
/// part (an unencoded `@` in the password included: the user part ends at the last `@`) and in
/// the query (`password=`, `sslpassword=`); a URL without one comes back as it is. A password
/// with an `@` and one given as `?password=` were once echoed by check, serve and diff.
pub fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    // The authority ends at the path; the user part at the last `@` inside it.
    let end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..end].rfind('@') {
        Some(at) => match rest[..at].split_once(':') {
            Some((user, _)) => format!("{user}:***{}", &rest[at..]),
            None => rest.to_string(),
        },
        None => rest.to_string(),
    };
    let rest = match rest.split_once('?') {
        Some((path, query)) => {
            let pairs: Vec<String> = (query.split('&'))
                .map(|pair| match pair.split_once('=') {
                    Some((k, _))
                        if k.eq_ignore_ascii_case("password")
                            || k.eq_ignore_ascii_case("sslpassword") =>
                    {
                        format!("{k}=***")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        }
        None => rest,
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{rest}"),
        None => rest,
    }
}

/// Brings the schema up to the newest of [`PG_MIGRATIONS`], in one transaction under an
/// advisory lock, so two gateways starting at once do it once.
async fn migrate(pool: &PgPool) -> Result<(), JournalError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .execute(&mut *tx)
        .await?;
    let current: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM schema_version")
        .fetch_one(&mut *tx)
        .await?;
    let current = current.unwrap_or(0);
    for (version, sql) in PG_MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO schema_version (version) VALUES ($1)")
            .bind(version)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}
