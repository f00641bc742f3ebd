//! A batch of writes as a few multi-row statements: every new command in one `INSERT`, every
//! changed command in one `UPDATE … FROM`, every timeline entry in one `INSERT`.
//!
//! Each statement is a round trip to SQLite's worker thread; written one row at a time, a batch
//! of thirty commands took about a hundred of them, and those hops, not the disk, bounded the
//! gateway's rate. The outcome is the one the writes would have had one after the other: an
//! update later in the batch wins over an earlier one of the same command, a command id that
//! is already taken (in the journal or earlier in the batch) is [`JournalError::Duplicate`] and
//! writes nothing, and timeline entries keep the batch's order.
//!
//! Timeline entries are linked into the hash chain (`crate::chain`) here, in the order they are
//! inserted, each with its `seq` given explicitly so that its hash can cover it.

use crate::chain::Chain;
use crate::writes::Write;
use crate::{CommandRow, EventRow, JournalError};
// The SQL is built from constants and a count of `?` placeholders only: every value is bound.
use sqlx::{AssertSqlSafe, Sqlite, Transaction};
use std::collections::{HashMap, HashSet};

/// Rows per statement: keeps every statement under SQLite's 32,766 bound parameters.
const ROWS: usize = 500;

/// Runs `writes` inside `tx`: each write's own outcome, or the error that stopped the
/// transaction (which the caller rolls back). `chain` advances past every event inserted; the
/// caller keeps it only if the transaction commits.
pub(super) async fn run(
    tx: &mut Transaction<'_, Sqlite>,
    writes: &[&Write],
    chain: &mut Chain,
) -> Result<Vec<Result<(), JournalError>>, JournalError> {
    // One gateway writes a SQLite journal: there are no leases, every fence holds.
    let fenced_out = HashSet::new();
    let inserted = insert_commands(tx, &new_commands(writes, &fenced_out)).await?;
    let outcomes = outcomes(writes, inserted, &fenced_out);
    update_commands(tx, &latest_updates(writes, &outcomes)).await?;
    insert_events(tx, &events_of(writes, &outcomes), chain).await?;
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

/// `(?, ?, …)` for `columns` columns, `rows` times, comma-separated.
fn placeholders(columns: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    vec![row; rows].join(", ")
}

/// Inserts the commands whose ids are free; the ids it inserted.
async fn insert_commands(
    tx: &mut Transaction<'_, Sqlite>,
    rows: &[&CommandRow],
) -> Result<HashSet<String>, JournalError> {
    let mut inserted = HashSet::new();
    for chunk in rows.chunks(ROWS) {
        let sql = format!(
            "INSERT INTO commands (command_id, request_id, device, action, params, status, verified,
                verification, error_code, detail, hint, evidence, readback_matched, accepted_at_ms,
                updated_at_ms, deadline_ms, dispatched, caller, idempotency_key)
             VALUES {} ON CONFLICT (command_id) DO NOTHING RETURNING command_id",
            placeholders(19, chunk.len())
        );
        let mut q = sqlx::query_scalar::<_, String>(AssertSqlSafe(sql));
        for cmd in chunk {
            q = q
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
                .bind(&cmd.idempotency_key);
        }
        inserted.extend(q.fetch_all(&mut **tx).await?);
    }
    Ok(inserted)
}

/// Replaces the state of each command in `rows` (one row per command id).
async fn update_commands(
    tx: &mut Transaction<'_, Sqlite>,
    rows: &[&CommandRow],
) -> Result<(), JournalError> {
    for chunk in rows.chunks(ROWS) {
        let sql = format!(
            "WITH v (command_id, status, verified, error_code, detail, hint, evidence,
                     readback_matched, updated_at_ms, deadline_ms, dispatched) AS (VALUES {})
             UPDATE commands SET status = v.status, verified = v.verified,
                error_code = v.error_code, detail = v.detail, hint = v.hint, evidence = v.evidence,
                readback_matched = v.readback_matched, updated_at_ms = v.updated_at_ms,
                deadline_ms = v.deadline_ms, dispatched = v.dispatched
             FROM v WHERE commands.command_id = v.command_id",
            placeholders(11, chunk.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for cmd in chunk {
            q = q
                .bind(&cmd.command_id)
                .bind(&cmd.status)
                .bind(cmd.verified)
                .bind(&cmd.error_code)
                .bind(&cmd.detail)
                .bind(&cmd.hint)
                .bind(cmd.evidence.to_string())
                .bind(cmd.readback_matched)
                .bind(cmd.updated_at_ms)
                .bind(cmd.deadline_ms)
                .bind(cmd.dispatched);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Appends timeline entries, in the order given, each linked to the one before by `chain`.
async fn insert_events(
    tx: &mut Transaction<'_, Sqlite>,
    events: &[(&str, &EventRow)],
    chain: &mut Chain,
) -> Result<(), JournalError> {
    for chunk in events.chunks(ROWS) {
        let sql = format!(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash) VALUES {}",
            placeholders(7, chunk.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for (id, e) in chunk {
            // The text stored is the text hashed: serialised once, here.
            let data = e.data.to_string();
            let link = chain.link(id, e.at_ms, &e.event, &data);
            q = q
                .bind(link.seq)
                .bind(*id)
                .bind(e.at_ms)
                .bind(&e.event)
                .bind(data)
                .bind(link.prev_hash)
                .bind(link.hash);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
