//! The readings a journal recorded, in the order they were written: each `signal` event of
//! every command (the values its criteria read, when they were read) with the command's
//! device. `closedloop diff --journal` replays them through a new plant file's alarms; read in
//! pages by `seq`, so a journal of any length is replayed in bounded memory.

use crate::journal::Store;
use crate::{Journal, JournalError};

/// One recorded reading.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingRow {
    /// Its place in the journal: the next page starts after it.
    pub seq: i64,
    /// The command it was read for.
    pub command_id: String,
    /// That command's device: the names without `devices.` in `values` are its signals.
    pub device: String,
    /// When it was journaled (wall-clock ms since the Unix epoch).
    pub at_ms: i64,
    /// The event's data: `{"values": {...}, "read_at": "..."}`.
    pub data: serde_json::Value,
}

type Raw = (i64, String, String, i64, String);

const PAGE: &str = "SELECT e.seq, e.command_id, c.device, e.at_ms, e.data
     FROM events e JOIN commands c ON c.command_id = e.command_id
     WHERE e.event = 'signal' AND e.seq > $1 ORDER BY e.seq LIMIT $2";

impl Journal {
    /// The readings journaled after `after_seq`, oldest first, `limit` at most.
    pub async fn readings(
        &self,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<ReadingRow>, JournalError> {
        let rows: Vec<Raw> = match &self.store {
            Store::Sqlite(s) => {
                sqlx::query_as(PAGE)
                    .bind(after_seq)
                    .bind(i64::from(limit))
                    .fetch_all(&s.reader)
                    .await?
            }
            Store::Postgres(p) => {
                sqlx::query_as(PAGE)
                    .bind(after_seq)
                    .bind(i64::from(limit))
                    .fetch_all(&p.reader)
                    .await?
            }
        };
        Ok(rows
            .into_iter()
            .map(|(seq, command_id, device, at_ms, data)| ReadingRow {
                seq,
                command_id,
                device,
                at_ms,
                data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
            })
            .collect())
    }
}
