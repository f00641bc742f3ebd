//! [`Journal`], the handle the engine and the command line hold: one type over both stores
//! (SQLite, the embedded default, and PostgreSQL, for gateways that share one database), with
//! writes going through the group-commit writer either way.

use crate::chain::JournalKey;
use crate::group;
use crate::pg::PgStore;
use crate::store::SqliteStore;
use crate::{AuditFilter, AuditRow, CommandRow, EventRow, JournalError, ListFilter, VerifyReport};

/// A handle on the journal. Cheap to clone; safe to share between tasks.
///
/// # Invariants
/// Every command write goes through `group` (one writer thread and its connection, writes
/// waiting together share one transaction); prune and standing alarms write on the store's own
/// connection; reads go to the store's own readers and see committed data only.
#[derive(Clone, Debug)]
pub struct Journal {
    pub(crate) group: group::Writer,
    pub(crate) store: Store,
    /// Test builds only: writes fail while set, as with a disk that stopped taking them.
    #[cfg(feature = "testing")]
    fail_writes: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Where the journal lives.
#[derive(Clone, Debug)]
pub(crate) enum Store {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

/// Runs the same method on whichever store the journal has.
macro_rules! on_store {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match &$self.store {
            Store::Sqlite(s) => s.$method($($arg),*).await,
            Store::Postgres(p) => p.$method($($arg),*).await,
        }
    };
}

/// Which store a URL names, or why it names none.
enum Kind {
    Sqlite,
    Postgres,
}

fn kind(url: &str) -> Result<Kind, JournalError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Kind::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Kind::Sqlite)
    } else {
        Err(JournalError::Unsupported {
            url: url.to_string(),
            reason: "the journal must be sqlite://PATH, postgres://USER@HOST:PORT/DATABASE \
                     (or sqlite::memory: for tests)"
                .into(),
        })
    }
}

impl Journal {
    /// Opens (creating if needed) the journal at `url`: `sqlite://PATH`, `sqlite:PATH`,
    /// `sqlite::memory:` (for tests: lost when the journal is dropped), or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (the database must exist; its tables
    /// are created). A PostgreSQL that does not answer is [`JournalError::Unreachable`].
    pub async fn open(url: &str) -> Result<Journal, JournalError> {
        Journal::open_keyed(url, None).await
    }

    /// [`Journal::open`], linking every event it writes under the keyed (v3) encoding when
    /// `key` is given (the plant's `[server] journal_key`): a chain that someone without the
    /// key cannot recompute. Earlier events keep their encoding.
    pub async fn open_keyed(url: &str, key: Option<JournalKey>) -> Result<Journal, JournalError> {
        let key = key.map(std::sync::Arc::new);
        let (store, group) = match kind(url)? {
            Kind::Sqlite => {
                let (s, g) = SqliteStore::open(url, key).await?;
                (Store::Sqlite(s), g)
            }
            Kind::Postgres => {
                let (p, g) = PgStore::open(url, key).await?;
                (Store::Postgres(p), g)
            }
        };
        Ok(Journal::of(store, group))
    }

    /// Opens an existing journal to read it only (`closedloop commands`, `trace`, `audit`):
    /// nothing is created, no migration runs, and every write fails, so a person reading a
    /// plant's history never changes it. A missing SQLite file is an error.
    pub async fn open_read_only(url: &str) -> Result<Journal, JournalError> {
        let (store, group) = match kind(url)? {
            Kind::Sqlite => {
                let (s, g) = SqliteStore::open_read_only(url).await?;
                (Store::Sqlite(s), g)
            }
            Kind::Postgres => {
                let (p, g) = PgStore::open_read_only(url).await?;
                (Store::Postgres(p), g)
            }
        };
        Ok(Journal::of(store, group))
    }

    fn of(store: Store, group: group::Writer) -> Journal {
        Journal {
            group,
            store,
            #[cfg(feature = "testing")]
            fail_writes: Default::default(),
        }
    }

    /// The SQLite store, for this crate's tests of its internals.
    #[cfg(test)]
    pub(crate) fn sqlite(&self) -> &SqliteStore {
        match &self.store {
            Store::Sqlite(s) => s,
            Store::Postgres(_) => panic!("a SQLite journal was expected"),
        }
    }

    /// The feed of commands inserted or changed by any gateway on this journal (PostgreSQL,
    /// shared); `None` on SQLite, which one gateway owns whole and hears nothing from others.
    pub async fn feed(&self) -> Result<Option<crate::ChangeFeed>, JournalError> {
        match &self.store {
            Store::Sqlite(_) => Ok(None),
            Store::Postgres(p) => p.feed().await.map(Some),
        }
    }

    /// Asks, on the feed, the gateway that runs `command_id` to cancel it (PostgreSQL; a no-op on
    /// SQLite, where the only gateway runs every command).
    pub async fn announce_cancel(&self, command_id: &str) -> Result<(), JournalError> {
        self.announce(crate::pg::feed::cancel_payload(command_id))
            .await
    }

    /// Tells, on the feed, the gateway that runs the dead-man command `command_id` that its
    /// caller asked about it elsewhere, so it keeps running (no-op on SQLite).
    pub async fn announce_renew(&self, command_id: &str) -> Result<(), JournalError> {
        self.announce(crate::pg::feed::renew_payload(command_id))
            .await
    }

    /// Tells, on the feed, the gateway that runs the dead-man command `command_id` that its
    /// caller is gone (`why`), so it ends it now (no-op on SQLite).
    pub async fn announce_lapse(&self, command_id: &str, why: &str) -> Result<(), JournalError> {
        self.announce(crate::pg::feed::lapse_payload(command_id, why))
            .await
    }

    async fn announce(&self, payload: String) -> Result<(), JournalError> {
        let Store::Postgres(p) = &self.store else {
            return Ok(());
        };
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(crate::pg::feed::CHANNEL)
            .bind(payload)
            .execute(&p.reader)
            .await?;
        Ok(())
    }

    /// Which of `command_ids` have an `event` entry on their timeline, in one read
    /// (PostgreSQL: what another gateway asked of commands this one runs, e.g.
    /// `cancel_requested`); none on SQLite, whose one gateway writes every entry itself.
    pub async fn with_event(
        &self,
        command_ids: &[String],
        event: &str,
    ) -> Result<Vec<String>, JournalError> {
        let Store::Postgres(p) = &self.store else {
            return Ok(Vec::new());
        };
        Ok(sqlx::query_scalar(
            "SELECT DISTINCT command_id FROM events WHERE event = $1 AND command_id = ANY($2)",
        )
        .bind(event)
        .bind(command_ids)
        .fetch_all(&p.reader)
        .await?)
    }

    /// How long ago `command_id` was journaled, in milliseconds on the database's clock
    /// (PostgreSQL): a gateway taking over a command another accepted counts its queue wait
    /// with it, whatever the two gateways' clocks say. `None` on SQLite, whose one gateway
    /// accepted every command on its own clock, and for an unknown command.
    pub async fn waited_ms(&self, command_id: &str) -> Result<Option<i64>, JournalError> {
        let Store::Postgres(p) = &self.store else {
            return Ok(None);
        };
        let waited: Option<i64> = sqlx::query_scalar(
            "SELECT (extract(epoch FROM now() - inserted_at) * 1000)::BIGINT
             FROM commands WHERE command_id = $1",
        )
        .bind(command_id)
        .fetch_optional(&p.reader)
        .await?;
        Ok(waited.map(|w| w.max(0)))
    }

    /// Test builds (`testing` feature): makes every write fail until called with `false`, so
    /// tests can show what the engine does while its journal is unavailable.
    #[cfg(feature = "testing")]
    pub fn fail_writes(&self, on: bool) {
        self.fail_writes
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether writes are taken: always, except in test builds while [`Journal::fail_writes`]
    /// is on.
    pub(crate) fn writable(&self) -> Result<(), JournalError> {
        #[cfg(feature = "testing")]
        if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(JournalError::Database(sqlx::Error::PoolClosed));
        }
        Ok(())
    }

    /// Writes taken and transactions committed since the journal opened: writes per commit is
    /// how many callers one commit served (group commit), a figure for benchmarks and metrics.
    pub fn write_counts(&self) -> (u64, u64) {
        self.group.counts()
    }

    /// Commits what was handed over, then closes the writer's connection and the store's
    /// (SQLite: folding the WAL in); writes after this fail.
    pub async fn close(&self) {
        self.group.close().await;
        on_store!(self.close())
    }

    /// One command, if it exists.
    pub async fn get(&self, command_id: &str) -> Result<Option<CommandRow>, JournalError> {
        on_store!(self.get(command_id))
    }

    /// A command's timeline, oldest first.
    pub async fn events(&self, command_id: &str) -> Result<Vec<EventRow>, JournalError> {
        on_store!(self.events(command_id))
    }

    /// Commands matching `filter`, newest first.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<CommandRow>, JournalError> {
        on_store!(self.list(filter))
    }

    /// When the commands of `device` (of `action`, if given) that reached the device side —
    /// every status but `rejected`, raw writes left out — were accepted, since `since_ms`,
    /// oldest first: what an operation-rate limit counts, so a restart does not reset it.
    pub async fn accepted_since(
        &self,
        device: &str,
        action: Option<&str>,
        since_ms: i64,
    ) -> Result<Vec<i64>, JournalError> {
        on_store!(self.accepted_since(device, action, since_ms))
    }

    /// The commands accepted since `filter.since_ms` (of `filter.caller`, if given), oldest
    /// first, each with who confirmed it: the audit trail `closedloop audit` prints. Raw writes
    /// and rejected calls are commands too (`raw_write`, `rejected`), so they are in it.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>, JournalError> {
        on_store!(self.audit(filter))
    }

    /// Commands that were not terminal when the journal was last written: what start-up
    /// recovery must finish. Oldest first.
    pub async fn unfinished(&self) -> Result<Vec<CommandRow>, JournalError> {
        on_store!(self.unfinished())
    }

    /// The command created with this idempotency key, if any.
    pub async fn by_idempotency_key(&self, key: &str) -> Result<Option<CommandRow>, JournalError> {
        on_store!(self.by_idempotency_key(key))
    }

    /// Re-hashes every event in `seq` order from the prune anchor, then checks every command
    /// row against the digest the chain recorded of it, and reports the first broken link or
    /// edited row. Only reads: safe on a read-only journal and while `serve` writes (the walk
    /// sees one snapshot).
    pub async fn verify(&self) -> Result<VerifyReport, JournalError> {
        on_store!(self.verify(&[], None))
    }

    /// [`Journal::verify`], and every head kept outside the journal (`(seq, hash)`, as a
    /// verify printed it then) found in the chain with that hash: the documented way to detect
    /// a journal rewritten by someone who recomputed its chain, nulled its hashes or faked a
    /// prune ([`Break::HeadDiffers`](crate::Break::HeadDiffers)).
    pub async fn verify_heads(
        &self,
        heads: &[(i64, String)],
    ) -> Result<VerifyReport, JournalError> {
        on_store!(self.verify(heads, None))
    }

    /// [`Journal::verify_heads`] with the plant's journal key (`[server] journal_key`): rows
    /// hashed with it are checked under it, an unkeyed row after a keyed one and an unkeyed
    /// newest row are [`Break::Unkeyed`](crate::Break::Unkeyed) — a chain recomputed by
    /// someone without the key, which no unkeyed chain can show by itself.
    pub async fn verify_keyed(
        &self,
        heads: &[(i64, String)],
        key: &JournalKey,
    ) -> Result<VerifyReport, JournalError> {
        let key = std::sync::Arc::new(key.clone());
        on_store!(self.verify(heads, Some(&key)))
    }

    /// Deletes the commands that ended before `before_ms` (wall-clock ms, their
    /// `updated_at_ms`) with their timelines, as far as the hash chain allows; how many went.
    /// Unfinished commands are never deleted (see `docs/journal.md`).
    pub async fn prune(&self, before_ms: i64) -> Result<u64, JournalError> {
        self.writable()?;
        on_store!(self.prune(before_ms))
    }
}
