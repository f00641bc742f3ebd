//! The durable command journal.
//!
//! Every command closedloop accepts is written here *before* the caller hears of it, and every
//! transition after that is appended, so that a crash never loses an accepted command and a
//! restarted gateway knows exactly which commands it must keep supervising (docs/architecture.md).
//!
//! The journal stores plain rows ([`CommandRow`], [`EventRow`]); it knows nothing of the
//! lifecycle's rules, which live in the engine. Two stores hold them with the same semantics:
//! SQLite (`store`), the embedded default, in WAL mode with `synchronous = FULL`, so a committed
//! row survives a process crash and a power loss alike; and PostgreSQL (`pg`), which several
//! gateways can share.
//!
//! The timeline is an audit trail as well: its events are hash-chained ([`chain`]) and carry a
//! digest of their command's row (`chain::row`), so [`Journal::verify`] finds an event edited,
//! deleted or reordered after it was written, and a command row whose caller, device, action,
//! params, idempotency key, status, error code or verified flag was edited.
//!
//! Where things are:
//!
//! - `journal.rs`: [`Journal`], one API over both stores: open (a database that does not answer
//!   is `JournalError::Unreachable`, its URL shown without the password), `open_read_only` for
//!   `commands`, `trace`, `audit` and `journal verify` (creates nothing, takes no write), the
//!   audit read (`Journal::audit`: commands accepted since a time, `confirmed_by` from the
//!   `accepted` event), `close` (commits what was handed over, then closes the writer).
//! - `group.rs`: group commit, generic over a store's `Committer`. SQLite's writer runs SQLite
//!   itself on a connection and thread of its own (`store/raw.rs`, `store/batch.rs`: each
//!   statement prepared once); sqlx's one writing connection runs the migrations (plain SQL), the
//!   alarms, prune (`BEGIN IMMEDIATE`) and the final checkpoint; PostgreSQL's writer sends
//!   multi-row statements (`pg/batch.rs`). The outcome rules are shared.
//! - `store/`: SQLite in WAL mode with `synchronous = FULL`, a read pool, WAL checkpoints on a
//!   thread of their own (`store/checkpoint.rs`), `sqlite::memory:` as a temporary file
//!   (`store/temp.rs`), retention (`store/prune.rs`) and verify (`store/verify.rs` names the first
//!   broken link, `store/verify_rows.rs` the first edited, inserted or deleted command row,
//!   `store/encoding.rs` the order v1 → v2 → v3 of the chain's encodings).
//! - `pg/`: PostgreSQL, its DDL in `schema.rs` (`PG_MIGRATIONS`) created under an advisory lock;
//!   a trigger announcing every insert and change of state of a command on the channel
//!   `closedloop_commands`, read by [`ChangeFeed`]; the shared confirmations
//!   ([`SharedConfirmations`]), the device values owners publish ([`DeviceValues`]), the device
//!   leases ([`Leases`]), the per-device rate lock ([`RateLock`]); prune and verify in
//!   `pg/upkeep.rs`, on SQLite's walk.
//! - [`chain`]: each event's SHA-256 covers the previous one's, computed by the writer with the
//!   head kept in memory (loaded at open; on PostgreSQL the `chain_head` row every write
//!   transaction locks and moves). From v2 the last event of every write that sets a command's row
//!   carries the row's digest (`chain/row.rs`, `events.row_digest`). With `[server] journal_key`
//!   events are linked under the keyed v3 encoding (`chain/keyed.rs`: HMAC-SHA256 over `sha2`).
//!   docs/journal.md describes the encodings.
//! - `alarms.rs`: standing alarms' raises and clears (`alarm_events`), written by the engine's
//!   alarm watchers outside group commit and the chain.
//! - The `testing` feature: `Journal::fail_writes`, a journal that stops taking writes.

mod alarms;
pub mod chain;
mod group;
mod journal;
mod pg;
mod readings;
mod schema;
mod store;
mod writes;

pub use alarms::AlarmRow;
pub use chain::JournalKey;
pub use journal::Journal;
pub use pg::confirmations::{ConfirmationRow, Held, SharedConfirmations, Ticket};
pub use pg::device_values::{DeviceValues, Published};
pub use pg::feed::{Announcement, ChangeFeed, CommandChange};
pub use pg::leases::{Lease, Leases};
pub use pg::rate_lock::RateLock;
pub use pg::redacted as shown_url;
pub use readings::ReadingRow;
pub use store::{Anchor, AuditFilter, AuditRow, Break, BrokenLink, ListFilter, VerifyReport};
pub use writes::Fence;

use thiserror::Error;

/// One command as the journal keeps it: the latest state of its result object.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandRow {
    /// UUIDv7, the command's identity.
    pub command_id: String,
    /// The server-minted id of the tool call that created it.
    pub request_id: String,
    /// Device id from the plant file.
    pub device: String,
    /// Action name on that device.
    pub action: String,
    /// The validated parameters, as JSON.
    pub params: serde_json::Value,
    /// Lifecycle status (`accepted`, `running`, `completed`, ...).
    pub status: String,
    /// Whether feedback read after the acknowledged write decided the outcome.
    pub verified: bool,
    /// `feedback`, `readback` or `none`.
    pub verification: String,
    /// Contract error code, when the status carries one.
    pub error_code: Option<String>,
    /// What happened, in a sentence.
    pub detail: Option<String>,
    /// What the agent should do next.
    pub hint: Option<String>,
    /// Signal values that decided the outcome, as JSON.
    pub evidence: serde_json::Value,
    /// For readback verification: whether the registers held what was written.
    pub readback_matched: Option<bool>,
    /// Wall-clock milliseconds since the Unix epoch.
    pub accepted_at_ms: i64,
    /// Wall-clock milliseconds since the Unix epoch.
    pub updated_at_ms: i64,
    /// The supervision deadline, once dispatched (wall-clock ms); recovery keeps supervising until it.
    pub deadline_ms: Option<i64>,
    /// Whether the write plan was handed to the driver (a crash after this may have moved something).
    pub dispatched: bool,
    /// Who asked (token name, or `stdio`), for audit.
    pub caller: Option<String>,
    /// The caller's idempotency key, if any.
    pub idempotency_key: Option<String>,
}

/// One timeline entry.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Wall-clock milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `received`, `accepted`, `dispatched`, `device_ack`, `signal`, `retry`, `cancel_sent`, or a
    /// terminal status.
    pub event: String,
    /// Event details (signal values, error text), as JSON; `null` when there are none.
    pub data: serde_json::Value,
}

/// What can go wrong with the journal itself.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The URL names a database closedloop cannot use (yet).
    #[error("journal {url:?}: {reason}")]
    Unsupported {
        /// The URL as given.
        url: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// A PostgreSQL journal did not answer when it was opened.
    #[error(
        "journal {url:?} cannot be reached: {reason}; check that PostgreSQL runs there and the URL's user, host, port and database"
    )]
    Unreachable {
        /// The URL as given, its password left out.
        url: String,
        /// What the connection attempt said.
        reason: String,
    },
    /// The database refused or failed an operation.
    #[error("journal database error: {0}")]
    Database(#[from] sqlx::Error),
    /// SQLite refused or failed a statement of the group-commit writer, which runs SQLite
    /// itself rather than through sqlx (`store::raw`).
    #[error("journal database error: {message} (SQLite result code {code})")]
    Sqlite {
        /// SQLite's result code.
        code: i32,
        /// SQLite's message for it.
        message: String,
    },
    /// A stored JSON column did not parse (the file was edited or damaged).
    #[error("journal row for command {command_id} is damaged: {reason}")]
    Corrupt {
        /// The affected command.
        command_id: String,
        /// What did not parse.
        reason: String,
    },
    /// The journal's writer thread could not start or has stopped: nothing more can be written.
    #[error("journal writer: {0}")]
    Writer(String),
    /// The change feed's connection dropped: what was announced meanwhile is lost, and the
    /// feed must be opened again (then the journal read for what was missed).
    #[error(
        "the journal's change feed lost its connection; announcements made meanwhile were missed"
    )]
    FeedLost,
    /// A command id was inserted twice.
    #[error("command {0} is already in the journal")]
    Duplicate(String),
    /// A fenced write found its device lease gone (expired, or taken by another instance).
    #[error(
        "instance {owner} no longer holds the lease on {device} at epoch {epoch}: nothing was written"
    )]
    Fenced {
        /// The device.
        device: String,
        /// The instance that wrote.
        owner: String,
        /// The epoch it wrote under.
        epoch: i64,
    },
}
