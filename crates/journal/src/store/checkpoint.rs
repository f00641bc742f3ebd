//! WAL checkpoints off the commit path.
//!
//! In WAL mode a commit appends to the `-wal` file; a checkpoint copies those pages into the
//! database file and fsyncs it. SQLite runs one by itself in whichever connection commits once
//! the WAL passes 1,000 pages — here that is the group-commit writer, so every hundred-odd
//! commits one commit also paid for copying about 4 MB and an extra fsync, and every write
//! queued behind it waited: the slowest durable accepts under load were those.
//!
//! Here a connection of its own checkpoints, on its own thread, at about the pace SQLite would:
//! after [`EVERY_COMMITS`] commits (a commit writes some eight pages), or once the writer has
//! been quiet for [`QUIET`] with commits not yet folded in. Pacing by commits, not by the clock,
//! keeps the work per command what it was (the same pages copied as often), only elsewhere.
//! The checkpoint is `PASSIVE`: it never waits for the writer nor makes it wait. The writer's
//! own automatic checkpoint stays as a backstop at [`BACKSTOP_PAGES`], should this thread fall
//! behind or fail. Once a checkpoint has copied every frame, the writer's next transaction
//! starts the WAL over from its beginning, so the file stays small.
//!
//! # Invariants
//! - Durability is unchanged: a commit is on disk (in the WAL, `synchronous = FULL`) before its
//!   caller hears `Ok`; a checkpoint only moves committed pages.
//! - A failed checkpoint is logged and tried again at the next occasion; it never fails a write.

use crate::group::Commits;
use sqlx::sqlite::SqlitePool;
use std::sync::Mutex;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// Commits between two checkpoints under load (about SQLite's own 1,000 pages).
pub(crate) const EVERY_COMMITS: u64 = 120;

/// How long the writer stays without a commit before what it wrote is checkpointed anyway.
pub(crate) const QUIET: Duration = Duration::from_millis(500);

/// How often the thread looks at the commit count.
const TICK: Duration = Duration::from_millis(50);

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
    /// Starts checkpointing through `pool` (one writable connection), paced by `commits`.
    pub(crate) fn start(pool: SqlitePool, commits: Commits) -> std::io::Result<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let conn = pool.clone();
        std::thread::Builder::new()
            .name("journal-checkpoint".into())
            .spawn(move || {
                let mut pace = Pace::default();
                // A message or a dropped sender both end the loop.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    if conn.is_closed() {
                        break;
                    }
                    let now = commits.get();
                    if !pace.due(now) {
                        continue;
                    }
                    match runtime.block_on(checkpoint(&conn)) {
                        Ok(()) => pace.done(now),
                        Err(e) => tracing::warn!(error = %e, "journal: WAL checkpoint failed"),
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

/// When a checkpoint is due, from the commit count seen at each tick.
#[derive(Debug, Default)]
struct Pace {
    /// The commit count the last checkpoint covered.
    folded: u64,
    /// The count seen at the last tick, and for how many ticks it has not moved.
    seen: u64,
    still: u32,
}

impl Pace {
    /// Whether to checkpoint now that `commits` have been made: [`EVERY_COMMITS`] since the
    /// last one, or any once the count has stood still for [`QUIET`].
    fn due(&mut self, commits: u64) -> bool {
        if commits == self.seen {
            self.still = self.still.saturating_add(1);
        } else {
            (self.seen, self.still) = (commits, 0);
        }
        let pending = commits.saturating_sub(self.folded);
        let quiet = TICK * self.still >= QUIET;
        pending >= EVERY_COMMITS || (pending > 0 && quiet)
    }

    /// A checkpoint succeeded after `commits` commits.
    fn done(&mut self, commits: u64) {
        self.folded = commits;
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

    /// Rounds of writes with quiet pauses between them: with the checkpoints here the WAL
    /// starts over each round and stays the size of one round; with only the writer's backstop
    /// (64 MiB) it would hold every round.
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
            tokio::time::sleep(super::QUIET * 3).await;
        }
        let last = wal_bytes(&db);
        assert!(first_round > 0, "nothing went to the WAL");
        assert!(
            last <= first_round * 2,
            "the WAL grew from {first_round} to {last} bytes: nothing checkpointed it"
        );
        j.close().await;
        // sqlx closes each SQLite handle on that connection's own worker thread, which may
        // finish just after `close` returns: the last one to close folds the WAL in and removes it.
        let mut left = wal_bytes(&db);
        for _ in 0..100 {
            if left == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            left = wal_bytes(&db);
        }
        assert_eq!(left, 0, "closing left the WAL behind");
    }

    #[test]
    fn a_checkpoint_is_due_after_enough_commits_or_a_quiet_spell() {
        let mut pace = super::Pace::default();
        assert!(!pace.due(0), "nothing written, nothing to fold");
        assert!(!pace.due(super::EVERY_COMMITS - 1));
        assert!(pace.due(super::EVERY_COMMITS), "enough commits");
        pace.done(super::EVERY_COMMITS);
        assert!(!pace.due(super::EVERY_COMMITS + 1));
        let ticks = (super::QUIET.as_millis() / super::TICK.as_millis()) as usize;
        let quiet = (0..ticks).map(|_| pace.due(super::EVERY_COMMITS + 1));
        assert_eq!(
            quiet.filter(|d| *d).count(),
            1,
            "due once the writer is quiet"
        );
    }
}
