//! WAL checkpoints off the commit path.
//!
//! In WAL mode a commit appends to the `-wal` file; a checkpoint copies those pages into the
//! database file and fsyncs it. SQLite runs one by itself in whichever connection commits once
//! the WAL passes 1,000 pages — here that is the group-commit writer, so every few hundred
//! commits one commit also paid for copying megabytes and an extra fsync, and every write
//! queued behind it waited: the slowest durable accepts under load were those.
//!
//! Here a connection of its own checkpoints (`PASSIVE`: it never waits for the writer nor makes
//! it wait) every [`PERIOD`], on its own thread, and the writer's automatic checkpoint is kept
//! only as a backstop at [`BACKSTOP_PAGES`], should this thread fall behind or fail. Once a
//! checkpoint has copied every frame, the writer's next transaction starts the WAL over from
//! its beginning, so the file stays small and its fsyncs cheap.
//!
//! # Invariants
//! - Durability is unchanged: a commit is on disk (in the WAL, `synchronous = FULL`) before its
//!   caller hears `Ok`; a checkpoint only moves committed pages.
//! - A failed checkpoint is logged and tried again next period; it never fails a write.

use sqlx::sqlite::SqlitePool;
use std::sync::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// How often the WAL is checkpointed.
pub(crate) const PERIOD: Duration = Duration::from_millis(200);

/// `wal_autocheckpoint` of the writer: its own checkpoint only past this many pages (64 MiB of
/// 4 KiB pages), when this thread has not kept up.
pub(crate) const BACKSTOP_PAGES: &str = "16384";

/// The checkpointing thread and its connection; dropped or closed, the thread ends.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    pool: SqlitePool,
    stop: Mutex<Option<mpsc::Sender<()>>>,
}

impl Checkpointer {
    /// Starts checkpointing through `pool` (one writable connection) every [`PERIOD`].
    pub(crate) fn start(pool: SqlitePool) -> std::io::Result<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn = pool.clone();
        std::thread::Builder::new()
            .name("journal-checkpoint".into())
            .spawn(move || {
                // A message or a dropped sender both end the loop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(PERIOD) {
                    if conn.is_closed() {
                        break;
                    }
                    if let Err(e) = runtime.block_on(checkpoint(&conn)) {
                        tracing::warn!(error = %e, "journal: WAL checkpoint failed; trying again");
                    }
                }
            })?;
        Ok(Checkpointer {
            pool,
            stop: Mutex::new(Some(stop)),
        })
    }

    /// Stops the thread and closes its connection (waiting for a checkpoint under way), so
    /// that the writer, closed last, is the connection that folds the WAL in and removes it.
    pub(crate) async fn close(&self) {
        drop(self.stop.lock().unwrap_or_else(|p| p.into_inner()).take());
        self.pool.close().await;
    }
}

/// One passive checkpoint: copies what it can without waiting for or blocking anyone.
async fn checkpoint(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_all(pool)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use crate::Journal;
    use crate::store::fixtures::{ev, row};

    /// The `-wal` file's size in bytes.
    fn wal_bytes(db: &std::path::Path) -> u64 {
        let wal = db.with_extension("db-wal");
        std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
    }

    /// Rounds of writes with pauses longer than a checkpoint period between them: with the
    /// checkpoints here the WAL starts over each round and stays the size of one round; with
    /// only the writer's backstop (64 MiB) it would hold every round.
    #[tokio::test]
    async fn the_wal_is_checkpointed_off_the_writer_and_starts_over_between_bursts() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("j.db");
        let j = Journal::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let mut first_round = 0;
        for round in 0..5 {
            for i in 0..100 {
                let id = format!("c{round}-{i}");
                j.insert(&row(&id, "lamp", "accepted", 10), &[ev(10, "accepted")])
                    .await
                    .unwrap();
            }
            if round == 0 {
                first_round = wal_bytes(&db);
            }
            tokio::time::sleep(super::PERIOD * 3).await;
        }
        let last = wal_bytes(&db);
        assert!(first_round > 0, "nothing went to the WAL");
        assert!(
            last <= first_round * 2,
            "the WAL grew from {first_round} to {last} bytes: nothing checkpointed it"
        );
        j.close().await;
        assert_eq!(wal_bytes(&db), 0, "closing left the WAL behind");
    }
}
