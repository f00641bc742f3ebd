//! The SQLite store behind [`Journal`].

use crate::schema::MIGRATIONS;
use crate::{CommandRow, EventRow, JournalError};
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

/// The statuses that are not yet terminal; recovery looks for these at start-up.
const OPEN_STATUSES: [&str; 2] = ["accepted", "running"];

/// A handle on the journal. Cheap to clone; safe to share between tasks.
///
/// # Invariants
/// All writes go through `writer`, a pool of exactly one connection, so transactions never race
/// for SQLite's write lock; reads use `reader` and see committed data only (WAL).
#[derive(Clone, Debug)]
pub struct Journal {
    writer: SqlitePool,
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

    #[cfg(feature = "testing")]
    fn writable(&self) -> Result<(), JournalError> {
        if self.fail_writes.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(JournalError::Database(sqlx::Error::PoolClosed));
        }
        Ok(())
    }

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
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await?;
        let anchor = if memory {
            Some(
                SqlitePoolOptions::new()
                    .max_connections(1)
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None)
                    .connect_with(options.clone())
                    .await?,
            )
        } else {
            None
        };
        migrate(&writer).await?;
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
            writer: reader.clone(),
            reader,
            _anchor: None,
            #[cfg(feature = "testing")]
            fail_writes: Default::default(),
        })
    }

    /// Inserts a new command and its first timeline entries in one transaction.
    ///
    /// When this returns `Ok`, the command is on disk: this is the "accepted is durable before
    /// the caller hears of it" step.
    pub async fn insert(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "INSERT INTO commands (command_id, request_id, device, action, params, status, verified,
                verification, error_code, detail, hint, evidence, readback_matched, accepted_at_ms,
                updated_at_ms, deadline_ms, dispatched, caller, idempotency_key)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (command_id) DO NOTHING",
        )
        .bind(&cmd.command_id)
        .bind(&cmd.request_id)
        .bind(&cmd.device)
        .bind(&cmd.action)
        .bind(cmd.params.to_string())
        .bind(&cmd.status)
        .bind(cmd.verified)
        .bind(&cmd.verification)
        .bind(&cmd.error_code)
        .bind(&cmd.detail)
        .bind(&cmd.hint)
        .bind(cmd.evidence.to_string())
        .bind(cmd.readback_matched)
        .bind(cmd.accepted_at_ms)
        .bind(cmd.updated_at_ms)
        .bind(cmd.deadline_ms)
        .bind(cmd.dispatched)
        .bind(&cmd.caller)
        .bind(&cmd.idempotency_key)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(JournalError::Duplicate(cmd.command_id.clone()));
        }
        insert_events(&mut tx, &cmd.command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces a command's state and appends timeline entries, atomically.
    pub async fn update(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        sqlx::query(
            "UPDATE commands SET status = ?, verified = ?, error_code = ?, detail = ?, hint = ?,
                evidence = ?, readback_matched = ?, updated_at_ms = ?, deadline_ms = ?, dispatched = ?
             WHERE command_id = ?",
        )
        .bind(&cmd.status)
        .bind(cmd.verified)
        .bind(&cmd.error_code)
        .bind(&cmd.detail)
        .bind(&cmd.hint)
        .bind(cmd.evidence.to_string())
        .bind(cmd.readback_matched)
        .bind(cmd.updated_at_ms)
        .bind(cmd.deadline_ms)
        .bind(cmd.dispatched)
        .bind(&cmd.command_id)
        .execute(&mut *tx)
        .await?;
        insert_events(&mut tx, &cmd.command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Appends timeline entries without changing the command's state.
    pub async fn append(&self, command_id: &str, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        let mut tx = self.writer.begin().await?;
        insert_events(&mut tx, command_id, events).await?;
        tx.commit().await?;
        Ok(())
    }

    /// One command, if it exists.
    pub async fn get(&self, command_id: &str) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE command_id = ?")
            .bind(command_id)
            .fetch_optional(&self.reader)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
    }

    /// A command's timeline, oldest first.
    pub async fn events(&self, command_id: &str) -> Result<Vec<EventRow>, JournalError> {
        let rows =
            sqlx::query("SELECT at_ms, event, data FROM events WHERE command_id = ? ORDER BY seq")
                .bind(command_id)
                .fetch_all(&self.reader)
                .await?;
        rows.iter()
            .map(|r| {
                let data: String = r.try_get("data")?;
                Ok(EventRow {
                    at_ms: r.try_get("at_ms")?,
                    event: r.try_get("event")?,
                    data: parse_json(command_id, &data)?,
                })
            })
            .collect()
    }

    /// Commands matching `filter`, newest first.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands WHERE (?1 IS NULL OR device = ?1) AND (?2 IS NULL OR status = ?2)
             ORDER BY accepted_at_ms DESC, command_id DESC LIMIT ?3",
        )
        .bind(&filter.device)
        .bind(&filter.status)
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(command_from_row).collect()
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
        let rows: Vec<(i64,)> = sqlx::query_as(
            "SELECT accepted_at_ms FROM commands WHERE device = ?1 AND (?2 IS NULL OR action = ?2)
             AND status != 'rejected' AND action != 'raw_write' AND accepted_at_ms >= ?3
             ORDER BY accepted_at_ms",
        )
        .bind(device)
        .bind(action)
        .bind(since_ms)
        .fetch_all(&self.writer)
        .await?;
        Ok(rows.into_iter().map(|(t,)| t).collect())
    }

    /// Commands that were not terminal when the journal was last written: what start-up recovery
    /// must finish. Oldest first.
    pub async fn unfinished(&self) -> Result<Vec<CommandRow>, JournalError> {
        let rows = sqlx::query(
            "SELECT * FROM commands WHERE status IN (?, ?) ORDER BY accepted_at_ms, command_id",
        )
        .bind(OPEN_STATUSES[0])
        .bind(OPEN_STATUSES[1])
        .fetch_all(&self.writer)
        .await?;
        rows.iter().map(command_from_row).collect()
    }

    /// The command a caller created with this idempotency key, if any.
    pub async fn by_idempotency_key(&self, key: &str) -> Result<Option<CommandRow>, JournalError> {
        let row = sqlx::query("SELECT * FROM commands WHERE idempotency_key = ? LIMIT 1")
            .bind(key)
            .fetch_optional(&self.writer)
            .await?;
        row.map(|r| command_from_row(&r)).transpose()
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

async fn insert_events(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    command_id: &str,
    events: &[EventRow],
) -> Result<(), JournalError> {
    for e in events {
        sqlx::query("INSERT INTO events (command_id, at_ms, event, data) VALUES (?, ?, ?, ?)")
            .bind(command_id)
            .bind(e.at_ms)
            .bind(&e.event)
            .bind(e.data.to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

fn parse_json(command_id: &str, text: &str) -> Result<serde_json::Value, JournalError> {
    serde_json::from_str(text).map_err(|e| JournalError::Corrupt {
        command_id: command_id.to_string(),
        reason: e.to_string(),
    })
}

fn command_from_row(r: &SqliteRow) -> Result<CommandRow, JournalError> {
    let command_id: String = r.try_get("command_id")?;
    let params: String = r.try_get("params")?;
    let evidence: String = r.try_get("evidence")?;
    Ok(CommandRow {
        params: parse_json(&command_id, &params)?,
        evidence: parse_json(&command_id, &evidence)?,
        request_id: r.try_get("request_id")?,
        device: r.try_get("device")?,
        action: r.try_get("action")?,
        status: r.try_get("status")?,
        verified: r.try_get("verified")?,
        verification: r.try_get("verification")?,
        error_code: r.try_get("error_code")?,
        detail: r.try_get("detail")?,
        hint: r.try_get("hint")?,
        readback_matched: r.try_get("readback_matched")?,
        accepted_at_ms: r.try_get("accepted_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
        deadline_ms: r.try_get("deadline_ms")?,
        dispatched: r.try_get("dispatched")?,
        caller: r.try_get("caller")?,
        idempotency_key: r.try_get("idempotency_key")?,
        command_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(id: &str, device: &str, status: &str, at: i64) -> CommandRow {
        CommandRow {
            command_id: id.into(),
            request_id: format!("req_{id}"),
            device: device.into(),
            action: "switch".into(),
            params: json!({"on": true}),
            status: status.into(),
            verified: false,
            verification: "feedback".into(),
            error_code: None,
            detail: None,
            hint: None,
            evidence: json!({}),
            readback_matched: None,
            accepted_at_ms: at,
            updated_at_ms: at,
            deadline_ms: None,
            dispatched: false,
            caller: Some("stdio".into()),
            idempotency_key: None,
        }
    }

    fn ev(at: i64, event: &str) -> EventRow {
        EventRow {
            at_ms: at,
            event: event.into(),
            data: serde_json::Value::Null,
        }
    }

    #[tokio::test]
    async fn a_read_only_journal_reads_creates_nothing_and_takes_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let missing = format!("sqlite://{}", dir.path().join("none.db").display());
        assert!(Journal::open_read_only(&missing).await.is_err());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing created"
        );
        let url = format!("sqlite://{}", dir.path().join("j.db").display());
        let j = Journal::open(&url).await.unwrap();
        j.insert(&row("c1", "lamp", "completed", 10), &[ev(10, "accepted")])
            .await
            .unwrap();
        j.close().await;
        let r = Journal::open_read_only(&url).await.unwrap();
        assert_eq!(r.get("c1").await.unwrap().unwrap().status, "completed");
        let refused = r.insert(&row("c2", "lamp", "accepted", 20), &[]).await;
        assert!(refused.is_err(), "a read-only journal took a write");
        assert!(r.get("c2").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn insert_update_get_round_trip() {
        let j = Journal::open("sqlite::memory:").await.unwrap();
        let mut c = row("c1", "lamp", "accepted", 10);
        j.insert(&c, &[ev(9, "received"), ev(10, "accepted")])
            .await
            .unwrap();
        c.status = "completed".into();
        c.verified = true;
        c.evidence = json!({"contact": {"value": true}});
        c.updated_at_ms = 30;
        j.update(&c, &[ev(30, "completed")]).await.unwrap();
        assert_eq!(j.get("c1").await.unwrap(), Some(c));
        let events: Vec<String> = j
            .events("c1")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .collect();
        assert_eq!(events, ["received", "accepted", "completed"]);
        assert_eq!(j.get("nope").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_memory_journal_keeps_its_commands_when_the_pool_reopens_its_connection() {
        let j = Journal::open("sqlite::memory:").await.unwrap();
        j.insert(&row("c1", "lamp", "accepted", 10), &[])
            .await
            .unwrap();
        // What sqlx does to a connection whose query future was dropped mid-flight.
        let mut conn = j.writer.acquire().await.unwrap();
        conn.close_on_drop();
        drop(conn);
        for _ in 0..200 {
            if j.writer.size() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(j.get("c1").await.unwrap().unwrap().status, "accepted");
    }

    #[tokio::test]
    async fn duplicate_insert_is_refused() {
        let j = Journal::open("sqlite::memory:").await.unwrap();
        let c = row("c1", "lamp", "accepted", 10);
        j.insert(&c, &[]).await.unwrap();
        assert!(matches!(
            j.insert(&c, &[]).await,
            Err(JournalError::Duplicate(_))
        ));
    }

    #[tokio::test]
    async fn list_filters_and_orders_newest_first() {
        let j = Journal::open("sqlite::memory:").await.unwrap();
        j.insert(&row("a", "lamp", "completed", 1), &[])
            .await
            .unwrap();
        j.insert(&row("b", "slide", "failed", 2), &[])
            .await
            .unwrap();
        j.insert(&row("c", "lamp", "running", 3), &[])
            .await
            .unwrap();
        let all = j
            .list(&ListFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            all.iter()
                .map(|c| c.command_id.as_str())
                .collect::<Vec<_>>(),
            ["c", "b", "a"]
        );
        let lamp = ListFilter {
            device: Some("lamp".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(j.list(&lamp).await.unwrap().len(), 2);
        let failed = ListFilter {
            status: Some("failed".into()),
            limit: 10,
            ..Default::default()
        };
        assert_eq!(j.list(&failed).await.unwrap()[0].command_id, "b");
        let one = ListFilter {
            limit: 1,
            ..Default::default()
        };
        assert_eq!(j.list(&one).await.unwrap().len(), 1);
        let open: Vec<String> = j
            .unfinished()
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.command_id)
            .collect();
        assert_eq!(open, ["c"]);
    }

    #[tokio::test]
    async fn file_journal_survives_reopen_and_refuses_postgres() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("j.db").display());
        {
            let j = Journal::open(&url).await.unwrap();
            let mut c = row("k", "lamp", "accepted", 5);
            c.idempotency_key = Some("key-1".into());
            j.insert(&c, &[ev(5, "accepted")]).await.unwrap();
            j.close().await;
        }
        let j = Journal::open(&url).await.unwrap();
        assert_eq!(j.unfinished().await.unwrap().len(), 1);
        assert_eq!(
            j.by_idempotency_key("key-1")
                .await
                .unwrap()
                .unwrap()
                .command_id,
            "k"
        );
        let err = Journal::open("postgres://localhost/test")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("scale-out"), "{err}");
        assert!(Journal::open("mysql://x").await.is_err());
    }
}
