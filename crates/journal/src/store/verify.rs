//! `Journal::verify`: re-hashes the timeline in `seq` order and names the first broken link,
//! then checks every command row against the digest the chain recorded of it.
//!
//! The walk itself ([`Walk`]) is pure — rows in, a verdict out — and the reading around it takes
//! pages of rows inside one read transaction, so a journal being written or pruned meanwhile is
//! checked as one consistent snapshot. The command rows' half is in `verify_rows`.

use super::SqliteStore;
use super::anchor::{self, Anchor};
use super::encoding::Encoding;
use super::verify_rows;
use crate::JournalError;
use crate::chain::{GENESIS, JournalKey};
use sqlx::SqliteConnection;
use std::sync::Arc;

/// Rows read per query.
const PAGE: i64 = 1000;

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VerifyReport {
    /// Chained events whose hash and link were checked (up to the first broken one).
    pub checked: u64,
    /// Of those, the events hashed with the v1 encoding: written before the chain covered
    /// command rows (`crate::chain`).
    pub v1: u64,
    /// The first event hashed with the v2 encoding: from here on the chain records every state
    /// a command was journaled in. `None` while every event is v1 (or there is none).
    pub covered_from: Option<i64>,
    /// The first event hashed with the plant's journal key (the v3 encoding), when verify was
    /// given the key: from here on nobody without the key could have rewritten the chain.
    pub keyed_from: Option<i64>,
    /// Command rows whose caller, device, action, params, idempotency key, status, error code
    /// and verified flag matched the digest the chain recorded (up to the first that did not).
    pub rows_checked: u64,
    /// Command rows of which the chain, from `covered_from` on, records no digest: written
    /// before it, or their timeline pruned. Counted, not checkable.
    pub rows_uncovered: u64,
    /// Events written before the journal hashed its events: counted, not checkable.
    pub legacy: u64,
    /// Where the chain resumes after a prune, if the journal was pruned.
    pub anchor: Option<Anchor>,
    /// The newest event checked, `(seq, hash)`: kept outside the journal, it lets a later check
    /// see that rows were cut off the end, which no chain can show by itself.
    pub head: Option<(i64, String)>,
    /// The first broken link (an event, or a command row); `None` when the chain is intact.
    pub broken: Option<BrokenLink>,
}

impl VerifyReport {
    /// Whether every chained event checked out.
    pub fn intact(&self) -> bool {
        self.broken.is_none()
    }
}

/// The first place the chain does not hold.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokenLink {
    /// The event's `seq` (for [`Break::Truncated`], the highest `seq` the table once held; for
    /// [`Break::RowChanged`], the event whose digest the row no longer matches).
    pub seq: i64,
    /// The event's command, when there is a row to name it.
    pub command_id: Option<String>,
    /// What is wrong.
    pub kind: Break,
    /// The same in a sentence, with the hashes or `seq`s involved.
    pub detail: String,
}

/// How a link broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Break {
    /// The row no longer hashes to its stored hash: its content (or its hash) was changed.
    ContentChanged,
    /// The row's `prev_hash` is not the hash of the row before it (or of the prune anchor): a
    /// row before it is missing, was inserted, or rows were reordered.
    LinkBroken,
    /// A row without a hash after the chain began.
    Unhashed,
    /// Rows are missing at the end: SQLite's AUTOINCREMENT record shows a higher `seq` than any
    /// row left, and no prune took them.
    Truncated,
    /// A command row's covered fields no longer match the digest its command's last event
    /// recorded: the row was edited after it was journaled.
    RowChanged,
    /// The chain does not reach a head kept outside the journal (`journal verify --head`): the
    /// event at that `seq` hashes otherwise, has no hash, is gone, or was pruned since — the
    /// journal was rewritten, which a chain recomputed from its start cannot show by itself.
    HeadDiffers,
    /// A command row no event of the chain names: inserted afterwards (every command the
    /// engine journals has a timeline, and a prune deletes a command with its timeline). Its
    /// `seq` is 0: no event stands for it.
    RowInserted,
    /// Events of the chain record a command whose row is gone: deleted afterwards.
    RowMissing,
    /// Verify was given the plant's journal key, and a row is not hashed with it: an unkeyed
    /// row after keyed ones, or a chain whose newest row is unkeyed — written or rewritten by
    /// someone without the key.
    Unkeyed,
}

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Break::ContentChanged => "content changed",
            Break::LinkBroken => "link broken",
            Break::Unhashed => "row without a hash",
            Break::Truncated => "rows missing at the end",
            Break::RowChanged => "command row changed",
            Break::HeadDiffers => "differs from a head kept elsewhere",
            Break::Unkeyed => "not hashed with the journal key",
            Break::RowInserted => "command row the chain never saw",
            Break::RowMissing => "command row missing",
        })
    }
}

/// One `events` row as stored, for the walk.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) seq: i64,
    pub(crate) command_id: String,
    pub(crate) at_ms: i64,
    pub(crate) event: String,
    pub(crate) data: String,
    pub(crate) hash: Option<String>,
    pub(crate) prev_hash: Option<String>,
    /// NULL on a v1 event and on an entry of a write that set no row (or not its last).
    pub(crate) row_digest: Option<String>,
}

/// The walk along the chain, one row at a time.
pub(crate) struct Walk {
    /// The hash the next chained row must link to.
    expected_prev: String,
    /// Rows below this were pruned; 0 when never pruned.
    anchor_seq: i64,
    /// Whether a hashed row was seen: after that, every row must be hashed.
    started: bool,
    /// Heads kept outside the journal, `(seq, hash)`, and the hash each `seq` has here (an
    /// inner `None`: the row is there without a hash).
    kept: Vec<(i64, String, Option<Option<String>>)>,
    /// The plant's journal key, when verify was given one.
    pub(crate) key: Option<Arc<JournalKey>>,
    /// The highest `seq` of any row walked, hashed or not.
    pub(crate) newest_seen: i64,
    pub(crate) report: VerifyReport,
}

impl Walk {
    /// A walk starting at `anchor` (or at the start of the table).
    pub(crate) fn new(anchor: Option<Anchor>) -> Walk {
        let expected_prev = anchor
            .as_ref()
            .and_then(|a| a.prev_hash.clone())
            .unwrap_or_else(|| GENESIS.to_string());
        Walk {
            expected_prev,
            anchor_seq: anchor.as_ref().map_or(0, |a| a.seq),
            started: false,
            kept: Vec::new(),
            key: None,
            newest_seen: 0,
            report: VerifyReport {
                anchor,
                ..VerifyReport::default()
            },
        }
    }

    /// Heads kept outside the journal (`(seq, hash)`, as `journal verify` printed them), to be
    /// found in the chain: see [`Walk::check_kept`].
    pub(crate) fn keep(&mut self, heads: &[(i64, String)]) {
        self.kept = heads.iter().map(|(s, h)| (*s, h.clone(), None)).collect();
    }

    /// Checks the next row in `seq` order; `false` once a link is broken (the walk stops).
    pub(crate) fn on(&mut self, row: Stored) -> bool {
        self.newest_seen = self.newest_seen.max(row.seq);
        for k in self.kept.iter_mut().filter(|k| k.0 == row.seq) {
            k.2 = Some(row.hash.clone());
        }
        let broken = |kind, detail: String| BrokenLink {
            seq: row.seq,
            command_id: Some(row.command_id.clone()),
            kind,
            detail,
        };
        let verdict = match (&row.hash, &row.prev_hash) {
            _ if row.seq < self.anchor_seq => Err(broken(
                Break::LinkBroken,
                format!("a row below the prune anchor (seq {})", self.anchor_seq),
            )),
            (None, _) if !self.started => {
                self.report.legacy += 1;
                return true;
            }
            (None, _) | (_, None) => Err(broken(
                Break::Unhashed,
                "the row has no hash or prev_hash, but rows before it are chained".into(),
            )),
            (Some(hash), Some(prev)) => self.check(&row, hash, prev).map_err(|(k, d)| broken(k, d)),
        };
        match verdict {
            Ok(()) => true,
            Err(b) => {
                self.report.broken = Some(b);
                false
            }
        }
    }

    /// The checks of a hashed row: its content against its hash, then its link.
    fn check(&mut self, row: &Stored, hash: &str, prev: &str) -> Result<(), (Break, String)> {
        let encoding = self.encoding(row, hash, prev)?;
        if prev != self.expected_prev {
            let before = match &self.report.head {
                Some((seq, _)) => format!("seq {seq}"),
                None if self.anchor_seq > 0 => {
                    format!("the prune anchor (seq {})", self.anchor_seq)
                }
                None => "the start of the chain".into(),
            };
            return Err((
                Break::LinkBroken,
                format!(
                    "its prev_hash {prev} is not {}, the hash of {before}: a row between them is missing, was inserted, or rows were reordered",
                    self.expected_prev
                ),
            ));
        }
        self.started = true;
        self.report.checked += 1;
        match encoding {
            Encoding::V1 => self.report.v1 += 1,
            Encoding::V2 => _ = self.report.covered_from.get_or_insert(row.seq),
            Encoding::V3 => {
                self.report.covered_from.get_or_insert(row.seq);
                self.report.keyed_from.get_or_insert(row.seq);
            }
        }
        self.expected_prev = hash.to_string();
        self.report.head = Some((row.seq, hash.to_string()));
        Ok(())
    }

    /// After the last row: rows cut off the end show as a highest-ever `seq` (SQLite's
    /// AUTOINCREMENT record, `reserved`) above the newest chained row and the anchor.
    pub(crate) fn finish(&mut self, reserved: Option<i64>) {
        let last = match (&self.report.head, &self.report.anchor) {
            (Some((seq, _)), _) => *seq,
            (None, Some(a)) if self.report.legacy == 0 => a.seq - 1,
            // No chained row and no prune, yet rows were written: every one was deleted.
            (None, None) if self.report.legacy == 0 => 0,
            // Not begun, or legacy rows last: the old prune deleted rows anywhere.
            _ => return,
        };
        if let Some(reserved) = reserved.filter(|r| *r > last) {
            self.report.broken = Some(BrokenLink {
                seq: reserved,
                command_id: None,
                kind: Break::Truncated,
                detail: format!(
                    "the table once held seq {reserved}, but the chain ends at seq {last}: the rows after it were deleted"
                ),
            });
        }
    }
}

impl Walk {
    /// After the walk: every kept head must be in the chain with the hash it had when it was
    /// kept. Whoever can write the journal can recompute a whole chain from its start, null
    /// every hash ("legacy") or fake a prune; none of that reaches a head kept elsewhere.
    pub(crate) fn check_kept(&mut self) {
        if self.report.broken.is_some() {
            return;
        }
        let newest = self.report.head.as_ref().map_or(0, |h| h.0);
        let why = self.kept.iter().find_map(|(seq, hash, here)| {
            let detail = match here {
                Some(Some(h)) if h == hash => return None,
                Some(Some(h)) => format!("seq {seq} hashes to {h} here, but the head kept elsewhere says {hash}: the chain up to it was rewritten"),
                Some(None) => format!("seq {seq} has no hash here, but the head kept elsewhere says {hash}: its hashes were removed"),
                None if *seq < self.anchor_seq => format!("seq {seq}, a head kept elsewhere, lies below the prune anchor (seq {}): if nobody pruned this journal since, its rows were deleted", self.anchor_seq),
                None if *seq > newest => format!("the chain ends at seq {newest}, before seq {seq}, a head kept elsewhere: the rows up to it were deleted"),
                None => format!("seq {seq}, a head kept elsewhere, is missing from the chain"),
            };
            Some((*seq, detail))
        });
        if let Some((seq, detail)) = why {
            self.report.broken = Some(BrokenLink {
                seq,
                command_id: None,
                kind: Break::HeadDiffers,
                detail,
            });
        }
    }
}

impl SqliteStore {
    /// Re-hashes every event in `seq` order from the prune anchor and reports the first broken
    /// link, then checks the command rows against the chain (`verify_rows`). Only reads: safe
    /// on a read-only journal and while `serve` writes (the walk sees one snapshot). A journal
    /// last written before the chain existed is all legacy rows.
    pub(crate) async fn verify(
        &self,
        heads: &[(i64, String)],
        key: Option<&Arc<JournalKey>>,
    ) -> Result<VerifyReport, JournalError> {
        let mut tx = self.reader.begin().await?;
        let digests = has_column(&mut tx, "row_digest").await?;
        if has_column(&mut tx, "hash").await? && !chained(&mut tx).await? {
            // One migration made the hash columns and the anchor table: a chained journal
            // without the table had it dropped (its rows would pass for legacy ones).
            let mut walk = Walk::new(None);
            walk.report.broken = Some(BrokenLink {
                seq: 0,
                command_id: None,
                kind: Break::LinkBroken,
                detail: "the journal's events carry hashes but its chain_anchor table is gone: it was dropped, and the chain cannot be checked from where a prune left it".into(),
            });
            return Ok(walk.report);
        }
        if !chained(&mut tx).await? {
            let legacy: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
                .fetch_one(&mut *tx)
                .await?;
            let mut walk = Walk::new(None);
            walk.keep(heads);
            walk.key = key.cloned();
            walk.report.legacy = legacy as u64;
            walk.newest_seen = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
                .fetch_one(&mut *tx)
                .await?;
            walk.check_kept();
            walk.check_keyed_head();
            verify_rows::sqlite(&mut tx, &mut walk, false).await?;
            return Ok(walk.report);
        }
        let mut walk = Walk::new(anchor::read(&mut *tx).await?);
        walk.keep(heads);
        walk.key = key.cloned();
        if !walk_pages(&mut tx, &mut walk, digests).await? {
            return Ok(walk.report);
        }
        let reserved: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
                .fetch_optional(&mut *tx)
                .await?;
        walk.finish(reserved);
        walk.check_kept();
        walk.check_keyed_head();
        verify_rows::sqlite(&mut tx, &mut walk, digests).await?;
        Ok(walk.report)
    }
}

/// Feeds every event to `walk` a page at a time: `false` once the walk stopped at a break.
/// `digests`: whether the table has the `row_digest` column (a journal opened read-only is
/// not migrated).
async fn walk_pages(
    db: &mut SqliteConnection,
    walk: &mut Walk,
    digests: bool,
) -> Result<bool, JournalError> {
    let row_digest = match digests {
        true => "CAST(row_digest AS TEXT)",
        false => "NULL",
    };
    // Built from constants only: every value is bound.
    let sql = format!(
        "SELECT seq, CAST(command_id AS TEXT) AS command_id, CAST(at_ms AS INTEGER) AS at_ms,
                CAST(event AS TEXT) AS event, CAST(data AS TEXT) AS data,
                CAST(hash AS TEXT) AS hash, CAST(prev_hash AS TEXT) AS prev_hash,
                {row_digest} AS row_digest
         FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2"
    );
    let mut after = i64::MIN;
    loop {
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(after)
            .bind(PAGE)
            .fetch_all(&mut *db)
            .await?;
        for row in &rows {
            let row = stored(row)?;
            after = row.seq;
            if !walk.on(row) {
                return Ok(false);
            }
        }
        if (rows.len() as i64) < PAGE {
            return Ok(true);
        }
    }
}

/// A row of the walk's query as [`Stored`].
pub(crate) fn stored<'r, R>(r: &'r R) -> Result<Stored, JournalError>
where
    R: sqlx::Row,
    for<'i> &'i str: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(Stored {
        seq: r.try_get("seq")?,
        command_id: r.try_get("command_id")?,
        at_ms: r.try_get("at_ms")?,
        event: r.try_get("event")?,
        data: r.try_get("data")?,
        hash: r.try_get("hash")?,
        prev_hash: r.try_get("prev_hash")?,
        row_digest: r.try_get("row_digest")?,
    })
}

/// Whether the journal has the chain's columns (a journal opened read-only is not migrated).
async fn chained(db: &mut SqliteConnection) -> Result<bool, JournalError> {
    let hashed = has_column(db, "hash").await? && has_column(db, "prev_hash").await?;
    let anchor: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'chain_anchor'")
            .fetch_one(&mut *db)
            .await?;
    Ok(hashed && anchor == 1)
}

/// Whether `events` has the column `name`.
async fn has_column(db: &mut SqliteConnection, name: &str) -> Result<bool, JournalError> {
    let n: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = ?1")
            .bind(name)
            .fetch_one(&mut *db)
            .await?;
    Ok(n == 1)
}
