//! The change feed of a shared journal: every insert or change of state of a command, as
//! PostgreSQL announces it on the `closedloop_commands` channel (a trigger, schema version 6),
//! so each gateway hears of the commands the others accept and end. A gateway that owns a
//! device claims the commands another accepted for it; one waiting for a command another runs
//! wakes when it ends; subscriptions see changes made anywhere.
//!
//! The same channel carries cancel requests: `cancel_command` at a gateway that does not run the
//! command announces it ([`crate::Journal::announce_cancel`]), and the one running it cancels it.
//!
//! A notification can be missed (PostgreSQL keeps nothing for a listener that was away): the
//! feed is a wake-up, never the truth, and its users read the journal itself — on every
//! notification, on a timer too, and each time the feed is opened again after its connection
//! dropped ([`ChangeFeed::next`] says so rather than reconnecting silently).

use crate::JournalError;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

/// The channel the trigger notifies.
pub(crate) const CHANNEL: &str = "closedloop_commands";

/// One command inserted or changed, as announced.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandChange {
    /// The command's id.
    pub command_id: String,
    /// Its device.
    pub device: String,
    /// Its status after the change.
    pub status: String,
    /// Whether its write plan has been handed to the device's driver.
    pub dispatched: bool,
}

/// What the feed announces.
#[derive(Debug, Clone, PartialEq)]
pub enum Announcement {
    /// A command was inserted or changed state.
    Changed(CommandChange),
    /// A gateway was asked to cancel this command and does not run it: the one that runs it
    /// cancels it.
    Cancel(String),
    /// A caller asked a gateway that does not run this command about it: a dead-man action
    /// (`keepalive_s`) keeps running at the one that does.
    Renew(String),
    /// The caller of this dead-man command is gone for certain (its MCP session ended at the
    /// gateway that took the call): the one that runs it ends it now, saying why.
    Lapse {
        /// The command.
        command_id: String,
        /// Why its renewals can no longer come.
        why: String,
    },
}

/// A listening connection on the journal's change channel.
pub struct ChangeFeed {
    listener: PgListener,
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeFeed")
    }
}

impl ChangeFeed {
    /// Listens on the channel over a connection of its own (a pool of one, which the listener
    /// uses to connect again after the connection drops).
    pub(crate) async fn open(options: PgConnectOptions) -> Result<ChangeFeed, JournalError> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(ChangeFeed { listener })
    }

    /// The next change announced. A dropped connection ends the feed with
    /// [`JournalError::FeedLost`] instead of being re-opened silently: what was announced
    /// meanwhile is lost, and the caller opens the feed again and reads the journal for it.
    /// A payload this version cannot read is skipped with a warning rather than ending the feed.
    pub async fn next(&mut self) -> Result<Announcement, JournalError> {
        loop {
            let Some(note) = self.listener.try_recv().await? else {
                return Err(JournalError::FeedLost);
            };
            match parse(note.payload()) {
                Some(change) => return Ok(change),
                None => tracing::warn!(
                    payload = note.payload(),
                    "a journal change notification this version cannot read; skipped"
                ),
            }
        }
    }
}

/// A notification's payload: the JSON object the trigger builds, or a cancel request.
fn parse(payload: &str) -> Option<Announcement> {
    let v: serde_json::Value = serde_json::from_str(payload).ok()?;
    let text = |k: &str| v.get(k)?.as_str().map(str::to_string);
    if let Some(id) = text("cancel") {
        return Some(Announcement::Cancel(id));
    }
    if let Some(id) = text("renew") {
        return Some(Announcement::Renew(id));
    }
    if let Some(command_id) = text("lapse") {
        let why = text("why")?;
        return Some(Announcement::Lapse { command_id, why });
    }
    Some(Announcement::Changed(CommandChange {
        command_id: text("command_id")?,
        device: text("device")?,
        status: text("status")?,
        dispatched: v.get("dispatched")?.as_bool()?,
    }))
}

/// The payload of a cancel request for `command_id`.
pub(crate) fn cancel_payload(command_id: &str) -> String {
    serde_json::json!({ "cancel": command_id }).to_string()
}

/// The payload of a renewal of a dead-man command (`Announcement::Renew`).
pub(crate) fn renew_payload(command_id: &str) -> String {
    serde_json::json!({ "renew": command_id }).to_string()
}

/// The payload of a dead-man command's lapse (`Announcement::Lapse`).
pub(crate) fn lapse_payload(command_id: &str, why: &str) -> String {
    serde_json::json!({ "lapse": command_id, "why": why }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_read_into_its_change_and_a_foreign_one_is_not() {
        let p = r#"{"command_id":"c1","device":"lamp","status":"accepted","dispatched":false}"#;
        assert_eq!(
            parse(p),
            Some(Announcement::Changed(CommandChange {
                command_id: "c1".into(),
                device: "lamp".into(),
                status: "accepted".into(),
                dispatched: false,
            }))
        );
        let cancel = cancel_payload("c1");
        assert_eq!(parse(&cancel), Some(Announcement::Cancel("c1".into())));
        assert_eq!(
            parse(&renew_payload("c1")),
            Some(Announcement::Renew("c1".into()))
        );
        let lapse = Announcement::Lapse {
            command_id: "c1".into(),
            why: "gone".into(),
        };
        assert_eq!(parse(&lapse_payload("c1", "gone")), Some(lapse));
        assert_eq!(parse(r#"{"command_id":"c1"}"#), None);
        assert_eq!(parse("not json"), None);
    }
}
