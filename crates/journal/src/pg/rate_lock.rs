//! One lock per device across the gateways sharing a PostgreSQL journal, held from counting a
//! device's operation-rate budget (`max_rate`) to journaling the command that spends it: two
//! gateways taking calls for one rate-limited device at once would otherwise both count the
//! same budget and both spend its last operation.
//!
//! # Invariants
//! - The lock is PostgreSQL's (an advisory lock, keyed by the device's name) taken in a
//!   transaction on a connection of its own, opened for it and closed to release it. A gateway
//!   that dies, is cut off or is paused while holding it loses it: its connection goes, or the
//!   server ends its session after 2 s idle in the transaction (the journal's
//!   `idle_in_transaction_session_timeout`).
//! - Waiting for it is bounded ([`WAIT`]): a call that cannot have it in time fails with the
//!   journal error, and nothing is written.
//! - Never taken on the read pool: a gateway holding locks for several devices at once must
//!   still have readers left to count with.

use super::PgStore;
use crate::{Journal, JournalError};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The first key of the advisory locks taken here ("rate" in ASCII), apart from others.
const RATE_LOCKS: i32 = 0x7261_7465;

/// How long a call waits for a connection and then for the lock.
const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A device's rate lock, held until [`RateLock::release`] (or until dropped: the connection
/// closes, and the server releases the lock).
#[derive(Debug)]
pub struct RateLock {
    conn: PgConnection,
}

impl Journal {
    /// Waits for and takes `device`'s rate lock, when the journal is shared (PostgreSQL);
    /// `None` on SQLite, where the one gateway's own lock suffices.
    pub async fn rate_lock(&self, device: &str) -> Result<Option<RateLock>, JournalError> {
        match &self.store {
            crate::journal::Store::Postgres(p) => p.rate_lock(device).await.map(Some),
            crate::journal::Store::Sqlite(_) => Ok(None),
        }
    }
}

impl PgStore {
    async fn rate_lock(&self, device: &str) -> Result<RateLock, JournalError> {
        let options = self.reader.connect_options();
        let connect = PgConnection::connect_with(&options);
        let mut conn = tokio::time::timeout(WAIT, connect).await.map_err(|_| {
            JournalError::Writer("no connection for the rate lock within 5 s".into())
        })??;
        // The transaction holds the lock; lock_timeout bounds the wait for it ([`WAIT`]).
        sqlx::raw_sql("BEGIN; SET LOCAL lock_timeout = '5s'")
            .execute(&mut conn)
            .await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(RATE_LOCKS)
            .bind(device)
            .execute(&mut conn)
            .await?;
        Ok(RateLock { conn })
    }
}

impl RateLock {
    /// Releases the lock (closing its connection, which ends its transaction).
    pub async fn release(self) {
        if let Err(e) = self.conn.close().await {
            tracing::debug!(error = %e, "closing a rate lock's connection; the server releases it");
        }
    }
}
