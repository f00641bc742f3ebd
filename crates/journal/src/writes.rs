//! The journal's writes: each is handed to the group-commit writer (`group`), which runs it in
//! a transaction with whatever else is waiting (as the store's SQL); each fails while the
//! `testing` feature's `fail_writes` is on.

use crate::Journal;
use crate::{CommandRow, EventRow, JournalError};

/// One write, as the writer thread runs it.
pub(crate) enum Write {
    Insert(CommandRow, Vec<EventRow>),
    Update(CommandRow, Vec<EventRow>),
    Append(String, Vec<EventRow>),
    /// An update made under a device lease: it lands only if the lease still holds.
    Fenced(Fence, CommandRow, Vec<EventRow>),
    /// An insert made under a device lease: a command accepted by a gateway that lost the
    /// device between its checks and this write is not journaled (nobody would supervise it).
    FencedInsert(Fence, CommandRow, Vec<EventRow>),
}

impl Write {
    /// The lease the write is made under, when it is fenced.
    pub(crate) fn fence(&self) -> Option<&Fence> {
        match self {
            Write::Fenced(f, _, _) | Write::FencedInsert(f, _, _) => Some(f),
            _ => None,
        }
    }

    /// The command a write inserts, when it inserts one.
    pub(crate) fn inserts(&self) -> Option<&CommandRow> {
        match self {
            Write::Insert(cmd, _) | Write::FencedInsert(_, cmd, _) => Some(cmd),
            _ => None,
        }
    }
}

/// The device lease a write is made under (several gateways on one PostgreSQL journal): the
/// device, the instance that holds its lease, and the lease's epoch. The write commits only in
/// a transaction that finds that lease still held, unexpired on the database's clock, with that
/// epoch — so an instance that lost its lease (paused, cut off) cannot journal a dispatch, and
/// the engine never writes to a device before its dispatch is journaled.
#[derive(Debug, Clone, PartialEq)]
pub struct Fence {
    /// The device the lease is on.
    pub device: String,
    /// The instance holding it.
    pub owner: String,
    /// The epoch it was granted with; every change of owner raises it.
    pub epoch: i64,
}

impl Journal {
    /// Inserts a new command and its first timeline entries in one transaction.
    ///
    /// When this returns `Ok`, the command is on disk: this is the "accepted is durable before
    /// the caller hears of it" step. A command id already in the journal is
    /// [`JournalError::Duplicate`], and nothing of this call is written.
    pub async fn insert(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        self.group
            .write(Write::Insert(cmd.clone(), events.to_vec()))
            .await
    }

    /// [`Journal::insert`] if `fence` still holds: otherwise [`JournalError::Fenced`] and
    /// nothing is written. A SQLite journal has no leases: there the fence always holds.
    pub async fn insert_fenced(
        &self,
        cmd: &CommandRow,
        events: &[EventRow],
        fence: &Fence,
    ) -> Result<(), JournalError> {
        self.writable()?;
        let write = Write::FencedInsert(fence.clone(), cmd.clone(), events.to_vec());
        self.group.write(write).await
    }

    /// Replaces a command's state and appends timeline entries, atomically.
    pub async fn update(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        self.group
            .write(Write::Update(cmd.clone(), events.to_vec()))
            .await
    }

    /// Replaces a command's state and appends timeline entries, atomically, if `fence` still
    /// holds: otherwise [`JournalError::Fenced`] and nothing is written. A SQLite journal has
    /// one gateway and no leases: there the fence always holds.
    pub async fn update_fenced(
        &self,
        cmd: &CommandRow,
        events: &[EventRow],
        fence: &Fence,
    ) -> Result<(), JournalError> {
        self.writable()?;
        self.group
            .write(Write::Fenced(fence.clone(), cmd.clone(), events.to_vec()))
            .await
    }

    /// Appends timeline entries without changing the command's state.
    pub async fn append(&self, command_id: &str, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        self.group
            .write(Write::Append(command_id.to_string(), events.to_vec()))
            .await
    }
}
