//! Standing alarms as the journal keeps them: each raise and clear with the evidence that decided
//! it, so an operator reading the journal sees why a device refused commands at a given time.
//! Not part of the hash chain (they belong to no command); written straight to the store, not
//! through group commit, since nobody waits on them.

use crate::journal::Store;
use crate::{Journal, JournalError};

/// One raise or clear of a standing alarm.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmRow {
    /// The alarm's name from the plant file.
    pub name: String,
    /// Wall-clock milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `true` when it was raised, `false` when it cleared.
    pub active: bool,
    /// What decided it (the values read, or the device that went silent), as JSON.
    pub evidence: serde_json::Value,
}

type Raw = (String, i64, bool, String);

fn row((name, at_ms, active, evidence): Raw) -> AlarmRow {
    AlarmRow {
        name,
        at_ms,
        active,
        evidence: serde_json::from_str(&evidence).unwrap_or(serde_json::Value::String(evidence)),
    }
}

const INSERT: &str =
    "INSERT INTO alarm_events (name, at_ms, active, evidence) VALUES ($1, $2, $3, $4)";
const SINCE: &str = "SELECT name, at_ms, active, evidence FROM alarm_events
     WHERE at_ms >= $1 ORDER BY seq LIMIT $2";

impl Journal {
    /// Records that an alarm was raised or cleared.
    pub async fn record_alarm(&self, alarm: &AlarmRow) -> Result<(), JournalError> {
        self.writable()?;
        macro_rules! insert_into {
            ($pool:expr) => {
                sqlx::query(INSERT)
                    .bind(&alarm.name)
                    .bind(alarm.at_ms)
                    .bind(alarm.active)
                    .bind(alarm.evidence.to_string())
                    .execute($pool)
                    .await
                    .map(|_| ())?
            };
        }
        match &self.store {
            Store::Sqlite(s) => insert_into!(&s.writer),
            Store::Postgres(p) => insert_into!(&p.reader),
        };
        Ok(())
    }

    /// The alarms raised and cleared since `since_ms`, oldest first, `limit` at most.
    pub async fn alarm_events(
        &self,
        since_ms: i64,
        limit: u32,
    ) -> Result<Vec<AlarmRow>, JournalError> {
        let rows: Vec<Raw> = match &self.store {
            Store::Sqlite(s) => {
                sqlx::query_as(SINCE)
                    .bind(since_ms)
                    .bind(i64::from(limit))
                    .fetch_all(&s.reader)
                    .await?
            }
            Store::Postgres(p) => {
                sqlx::query_as(SINCE)
                    .bind(since_ms)
                    .bind(i64::from(limit))
                    .fetch_all(&p.reader)
                    .await?
            }
        };
        Ok(rows.into_iter().map(row).collect())
    }
}
