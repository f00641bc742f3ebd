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
//! inserted, each with its `seq` given explicitly so that its hash can cover it.

use super::raw::{Arg, Db};
use crate::chain::Chain;
use crate::writes::Write;
use crate::{CommandRow, EventRow, JournalError};
use std::collections::{HashMap, HashSet};

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

/// The timeline entries of the writes that succeeded, in the batch's order, with their command.
pub(crate) fn events_of<'a>(
    writes: &[&'a Write],
    outcomes: &[Result<(), JournalError>],
) -> Vec<(&'a str, &'a EventRow)> {
    writes
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| o.is_ok())
        .flat_map(|(w, _)| {
            let (id, evs) = match w {
                Write::Insert(cmd, evs)
                | Write::Update(cmd, evs)
                | Write::Fenced(_, cmd, evs)
                | Write::FencedInsert(_, cmd, evs) => (&cmd.command_id, evs),
                Write::Append(id, evs) => (id, evs),
            };
            evs.iter().map(move |e| (id.as_str(), e))
        })
        .collect()
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
        hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

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
fn insert_events(
    db: &mut Db,
    events: &[(&str, &EventRow)],
    chain: &mut Chain,
) -> Result<(), JournalError> {
    for (id, e) in events {
        // The text stored is the text hashed: serialised once, here.
        let data = e.data.to_string();
        let link = chain.link(id, e.at_ms, &e.event, &data);
        let mut s = db.stmt(INSERT_EVENT)?;
        s.bind(&[
            link.seq.into(),
            Arg::Text(id),
            e.at_ms.into(),
            (&e.event).into(),
            (&data).into(),
            (&link.prev_hash).into(),
            (&link.hash).into(),
        ])?;
        s.run()?;
    }
    Ok(())
}
