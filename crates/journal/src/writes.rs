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

    /// Replaces a command's state and appends timeline entries, atomically.
    pub async fn update(&self, cmd: &CommandRow, events: &[EventRow]) -> Result<(), JournalError> {
        self.writable()?;
        self.group
            .write(Write::Update(cmd.clone(), events.to_vec()))
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
