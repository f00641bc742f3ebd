//! A batch of writes, as the writer thread runs them on its own connection (`raw`): every new
//! command, then each changed command's latest state, then every timeline entry, one row per
//! run of a statement prepared once. (Through sqlx, each statement was a round trip to another
//! thread, so a batch had been packed into three multi-row statements; here a statement run is
//! a function call.) The outcome is the one the writes would have had one after the other: an
//! update later in the batch wins over an earlier one of the same command, a command id that
//! is already taken (in the journal or earlier in the batch) is [`JournalError::Duplicate`] and
//! writes nothing, and timeline entries keep the batch's order.
//!
//! Timeline entries are linked into the hash chain (`crate::chain`) here, in the order they are
//! inserted, each with its `seq` given explicitly so that its hash can cover it. The last entry
//! of a write that sets a command's row carries that row's digest (`chain::row`), so the chain
//! records every state a command was journaled in; a write that sets a row without an entry is
//! given one, [`STATE`], rather than leave that state out of the chain.

use super::raw::{Arg, Db};
use crate::chain::Chain;
use crate::chain::row::CoveredRow;
use crate::writes::Write;
use crate::{CommandRow, EventRow, JournalError};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The timeline entry added to a write that sets a command's row without one: it carries the
/// row's digest into the chain. The engine always journals a change with an entry, so only a
/// caller of the journal's own API (a test, a tool) ever sees it.
pub(crate) const STATE: &str = "state";

/// Runs `writes` inside the transaction open on `db`: each write's own outcome, or the error that stopped the
/// transaction (which the caller rolls back). `chain` advances past every event inserted; the
/// caller keeps it only if the transaction commits.
pub(super) fn run(
    db: &mut Db,
    writes: &[&Write],
    chain: &mut Chain,
) -> Result<Vec<Result<(), JournalError>>, JournalError> {
    // One gateway writes a SQLite journal: there are no leases, every fence holds.
    let fenced_out = HashSet::new();
    let inserted = insert_commands(db, &new_commands(writes, &fenced_out))?;
    let outcomes = outcomes(writes, inserted, &fenced_out);
    update_commands(db, &latest_updates(writes, &outcomes))?;
    insert_events(db, &events_of(writes, &outcomes), chain)?;
    Ok(outcomes)
}

/// The commands `writes` insert, in order (a taken id among them too: the insert skips it),
/// but for the fenced inserts at `fenced_out`, whose lease is gone.
pub(crate) fn new_commands<'a>(
    writes: &[&'a Write],
    fenced_out: &HashSet<usize>,
) -> Vec<&'a CommandRow> {
    writes
        .iter()
        .enumerate()
        .filter(|(i, _)| !fenced_out.contains(i))
        .filter_map(|(_, w)| w.inserts())
        .collect()
}

/// Each write's outcome once the ids in `inserted` were taken and the fences of the writes at
/// `fenced_out` (indices into `writes`) were found gone: the first insert of an id takes it; any
/// other insert of it is a duplicate; a fenced write whose lease is gone fails; every other
/// write succeeds.
pub(crate) fn outcomes(
    writes: &[&Write],
    mut inserted: HashSet<String>,
    fenced_out: &HashSet<usize>,
) -> Vec<Result<(), JournalError>> {
    writes
        .iter()
        .enumerate()
        .map(|(i, w)| match (w.fence(), w.inserts()) {
            (Some(f), _) if fenced_out.contains(&i) => Err(JournalError::Fenced {
                device: f.device.clone(),
                owner: f.owner.clone(),
                epoch: f.epoch,
            }),
            (_, Some(cmd)) if !inserted.remove(&cmd.command_id) => {
                Err(JournalError::Duplicate(cmd.command_id.clone()))
            }
            _ => Ok(()),
        })
        .collect()
}

/// The last update of each command in `writes` that succeeded: the state it ends the batch in.
pub(crate) fn latest_updates<'a>(
    writes: &[&'a Write],
    outcomes: &[Result<(), JournalError>],
) -> Vec<&'a CommandRow> {
    let mut latest: HashMap<&str, &CommandRow> = HashMap::new();
    for (w, outcome) in writes.iter().zip(outcomes) {
        if let (Write::Update(cmd, _) | Write::Fenced(_, cmd, _), Ok(())) = (w, outcome) {
            latest.insert(&cmd.command_id, cmd);
        }
    }
    latest.into_values().collect()
}

/// A timeline entry as the writer links it.
pub(crate) struct Entry<'a> {
    /// The command it belongs to.
    pub(crate) command_id: &'a str,
    /// The entry (owned only for a [`STATE`] entry the writer added).
    pub(crate) event: Cow<'a, EventRow>,
    /// On the last entry of a write that sets its command's row: that row's digest.
    pub(crate) row_digest: Option<String>,
}

/// The timeline entries of the writes that succeeded, in the batch's order: one SHA-256 per
/// write that sets a row, for its digest, and no query.
pub(crate) fn events_of<'a>(
    writes: &[&'a Write],
    outcomes: &[Result<(), JournalError>],
) -> Vec<Entry<'a>> {
    let mut out = Vec::new();
    for (w, _) in writes.iter().zip(outcomes).filter(|(_, o)| o.is_ok()) {
        let (id, evs, row) = match w {
            Write::Insert(cmd, evs)
            | Write::Update(cmd, evs)
            | Write::Fenced(_, cmd, evs)
            | Write::FencedInsert(_, cmd, evs) => (&cmd.command_id, evs, Some(cmd)),
            Write::Append(id, evs) => (id, evs, None),
        };
        out.extend(evs.iter().map(|e| Entry {
            command_id: id,
            event: Cow::Borrowed(e),
            row_digest: None,
        }));
        if let Some(cmd) = row {
            stamp(&mut out, evs.is_empty(), cmd);
        }
    }
    out
}

/// Puts `cmd`'s row digest on the last entry of its write, which is the last of `entries`, or on
/// a [`STATE`] entry added for it when the write has none (`no_entry`).
///
/// An update stores only the row's state (`UPDATE_COMMAND`), yet its digest covers the caller,
/// device, action, params and idempotency key the update carries too: the engine updates the
/// very row it inserted (or read back), so they are the stored ones, and were they not, verify
/// would rightly say the row is not what the chain recorded.
fn stamp<'a>(entries: &mut Vec<Entry<'a>>, no_entry: bool, cmd: &'a CommandRow) {
    // The text the row's params are stored as (`insert_commands`); serde_json writes a value
    // read back from that text as the same text, so a row read from the journal digests alike.
    let digest = CoveredRow::of(cmd, &cmd.params.to_string()).digest();
    match entries.last_mut() {
        Some(last) if !no_entry => last.row_digest = Some(digest),
        _ => entries.push(Entry {
            command_id: &cmd.command_id,
            event: Cow::Owned(EventRow {
                at_ms: cmd.updated_at_ms,
                event: STATE.into(),
                data: serde_json::Value::Null,
            }),
            row_digest: Some(digest),
        }),
    }
}

const INSERT_COMMAND: &str = "INSERT INTO commands (command_id, request_id, device, action,
        params, status, verified, verification, error_code, detail, hint, evidence,
        readback_matched, accepted_at_ms, updated_at_ms, deadline_ms, dispatched, caller,
        idempotency_key)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
    ON CONFLICT (command_id) DO NOTHING RETURNING command_id";

const UPDATE_COMMAND: &str = "UPDATE commands SET status = ?2, verified = ?3, error_code = ?4,
        detail = ?5, hint = ?6, evidence = ?7, readback_matched = ?8, updated_at_ms = ?9,
        deadline_ms = ?10, dispatched = ?11
    WHERE command_id = ?1";

const INSERT_EVENT: &str = "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash,
        hash, row_digest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// Inserts the commands whose ids are free; the ids it inserted.
fn insert_commands(db: &mut Db, rows: &[&CommandRow]) -> Result<HashSet<String>, JournalError> {
    let mut inserted = HashSet::new();
    for cmd in rows {
        let (params, evidence) = (cmd.params.to_string(), cmd.evidence.to_string());
        let mut s = db.stmt(INSERT_COMMAND)?;
        s.bind(&[
            (&cmd.command_id).into(),
            (&cmd.request_id).into(),
            (&cmd.device).into(),
            (&cmd.action).into(),
            (&params).into(),
            (&cmd.status).into(),
            cmd.verified.into(),
            (&cmd.verification).into(),
            (&cmd.error_code).into(),
            (&cmd.detail).into(),
            (&cmd.hint).into(),
            (&evidence).into(),
            cmd.readback_matched.into(),
            cmd.accepted_at_ms.into(),
            cmd.updated_at_ms.into(),
            cmd.deadline_ms.into(),
            cmd.dispatched.into(),
            (&cmd.caller).into(),
            (&cmd.idempotency_key).into(),
        ])?;
        // A row back is the id taken; none, the id was already there.
        if s.run()? {
            inserted.insert(cmd.command_id.clone());
        }
    }
    Ok(inserted)
}

/// Replaces the state of each command in `rows` (one row per command id).
fn update_commands(db: &mut Db, rows: &[&CommandRow]) -> Result<(), JournalError> {
    for cmd in rows {
        let evidence = cmd.evidence.to_string();
        let mut s = db.stmt(UPDATE_COMMAND)?;
        s.bind(&[
            (&cmd.command_id).into(),
            (&cmd.status).into(),
            cmd.verified.into(),
            (&cmd.error_code).into(),
            (&cmd.detail).into(),
            (&cmd.hint).into(),
            (&evidence).into(),
            cmd.readback_matched.into(),
            cmd.updated_at_ms.into(),
            cmd.deadline_ms.into(),
            cmd.dispatched.into(),
        ])?;
        s.run()?;
    }
    Ok(())
}

/// Appends timeline entries, in the order given, each linked to the one before by `chain`.
fn insert_events(db: &mut Db, events: &[Entry], chain: &mut Chain) -> Result<(), JournalError> {
    for entry in events {
        let e = &entry.event;
        // The text stored is the text hashed: serialised once, here.
        let data = e.data.to_string();
        let row = entry.row_digest.as_deref();
        let link = chain.link(entry.command_id, e.at_ms, &e.event, &data, row);
        let mut s = db.stmt(INSERT_EVENT)?;
        s.bind(&[
            link.seq.into(),
            Arg::Text(entry.command_id),
            e.at_ms.into(),
            (&e.event).into(),
            (&data).into(),
            (&link.prev_hash).into(),
            (&link.hash).into(),
            (&entry.row_digest).into(),
        ])?;
        s.run()?;
    }
    Ok(())
}
