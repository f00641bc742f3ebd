//! One lock per device across the gateways sharing a PostgreSQL journal, held from counting a
//! device's operation-rate budget (`max_rate`) to journaling the command that spends it: two
//! gateways taking calls for one rate-limited device at once would otherwise both count the
//! same budget and both spend its last operation.
//!
//! # Invariants
//! - The lock is PostgreSQL's (a session advisory lock, keyed by the device's name) on a
//!   connection of its own, opened for it and closed to release it: a gateway that dies or is cut
//!   off while holding it loses the connection, and the server releases the lock with it.
//! - Never taken on the read pool: a gateway holding locks for several devices at once must
//!   still have readers left to count with.

use super::PgStore;
use crate::{Journal, JournalError};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The first key of the advisory locks taken here ("rate" in ASCII), apart from others.
const RATE_LOCKS: i32 = 0x7261_7465;

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
        let mut conn = PgConnection::connect_with(&self.reader.connect_options()).await?;
        sqlx::query("SELECT pg_advisory_lock($1, hashtext($2))")
            .bind(RATE_LOCKS)
            .bind(device)
            .execute(&mut conn)
            .await?;
        Ok(RateLock { conn })
    }
}

impl RateLock {
    /// Releases the lock (closing its connection).
    pub async fn release(self) {
        if let Err(e) = self.conn.close().await {
            tracing::debug!(error = %e, "closing a rate lock's connection; the server releases it");
        }
    }
}
