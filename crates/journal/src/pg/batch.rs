//! A batch of writes in PostgreSQL: the chain's head locked first, then every new command in
//! one `INSERT`, every changed command in one `UPDATE … FROM`, every timeline entry in one
//! `INSERT`, and the head moved past them — the SQLite batch's outcome rules and entries, the
//! last of each write carrying its row's digest (`store::batch`), PostgreSQL's placeholders and
//! types.

use crate::chain::{Chain, JournalKey};
use crate::store::batch::{Entry, events_of, latest_updates, new_commands, outcomes};
use crate::writes::Write;
use crate::{CommandRow, JournalError};
// The SQL is built from constants and a count of placeholders only: every value is bound.
use sqlx::{AssertSqlSafe, Postgres, Transaction};
use std::collections::HashSet;

/// Rows per statement: keeps every statement under PostgreSQL's 65,535 bound parameters.
const ROWS: usize = 1000;

/// Runs `writes` inside `tx`: each write's own outcome, or the error that stopped the
/// transaction (which the caller rolls back, the chain's head with it).
pub(super) async fn run(
    tx: &mut Transaction<'_, Postgres>,
    writes: &[&Write],
    key: Option<std::sync::Arc<JournalKey>>,
) -> Result<Vec<Result<(), JournalError>>, JournalError> {
    let fenced_out = check_fences(tx, writes).await?;
    let inserted = insert_commands(tx, &new_commands(writes, &fenced_out)).await?;
    let outcomes = outcomes(writes, inserted, &fenced_out);
    update_commands(tx, &latest_updates(writes, &outcomes)).await?;
    let events = events_of(writes, &outcomes);
    if !events.is_empty() {
        // Locked until commit: another writer's transaction waits here and then continues
        // from where this one left the chain.
        let (last_seq, last_hash): (i64, String) =
            sqlx::query_as("SELECT seq, hash FROM chain_head WHERE id = 1 FOR UPDATE")
                .fetch_one(&mut **tx)
                .await?;
        let mut chain = Chain {
            last_seq,
            last_hash,
            key,
        };
        insert_events(tx, &events, &mut chain).await?;
        sqlx::query("UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1")
            .bind(chain.last_seq)
            .bind(&chain.last_hash)
            .execute(&mut **tx)
            .await?;
    }
    Ok(outcomes)
}

/// The indices of the fenced writes whose lease no longer holds. A lease that holds is locked
/// (`FOR SHARE`) until this transaction ends, so no instance can take it over meanwhile: the
/// write lands under the lease it was made under, or not at all.
async fn check_fences(
    tx: &mut Transaction<'_, Postgres>,
    writes: &[&Write],
) -> Result<HashSet<usize>, JournalError> {
    let mut out = HashSet::new();
    // In device order, as renewals lock leases, so the two never deadlock.
    let mut fenced: Vec<(usize, &crate::Fence)> = writes
        .iter()
        .enumerate()
        .filter_map(|(i, w)| w.fence().map(|f| (i, f)))
        .collect();
    fenced.sort_by(|a, b| a.1.device.cmp(&b.1.device));
    for (i, fence) in fenced {
        let holds: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM leases WHERE device = $1 AND owner = $2 AND epoch = $3
             AND expires_at > now() FOR SHARE",
        )
        .bind(&fence.device)
        .bind(&fence.owner)
        .bind(fence.epoch)
        .fetch_optional(&mut **tx)
        .await?;
        if holds.is_none() {
            out.insert(i);
        }
    }
    Ok(out)
}

/// `($1, $2, …), ($k, …)` for `columns` columns, `rows` times.
fn placeholders(columns: usize, rows: usize) -> String {
    (0..rows)
        .map(|r| {
            let row: Vec<String> = (1..=columns)
                .map(|c| format!("${}", r * columns + c))
                .collect();
            format!("({})", row.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inserts the commands whose ids are free; the ids it inserted.
async fn insert_commands(
    tx: &mut Transaction<'_, Postgres>,
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
    tx: &mut Transaction<'_, Postgres>,
    rows: &[&CommandRow],
) -> Result<(), JournalError> {
    for chunk in rows.chunks(ROWS) {
        let sql = format!(
            "UPDATE commands SET status = v.status, verified = v.verified,
                error_code = v.error_code, detail = v.detail, hint = v.hint, evidence = v.evidence,
                readback_matched = v.readback_matched, updated_at_ms = v.updated_at_ms,
                deadline_ms = v.deadline_ms, dispatched = v.dispatched
             FROM (VALUES {}) AS v (command_id, status, verified, error_code, detail, hint,
                evidence, readback_matched, updated_at_ms, deadline_ms, dispatched)
             WHERE commands.command_id = v.command_id",
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
    tx: &mut Transaction<'_, Postgres>,
    events: &[Entry<'_>],
    chain: &mut Chain,
) -> Result<(), JournalError> {
    for chunk in events.chunks(ROWS) {
        let sql = format!(
            "INSERT INTO events (seq, command_id, at_ms, event, data, prev_hash, hash, row_digest)
             VALUES {}",
            placeholders(8, chunk.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for entry in chunk {
            let e = &entry.event;
            // The text stored is the text hashed: serialised once, here.
            let data = e.data.to_string();
            let row = entry.row_digest.as_deref();
            let link = chain.link(entry.command_id, e.at_ms, &e.event, &data, row);
            q = q
                .bind(link.seq)
                .bind(entry.command_id)
                .bind(e.at_ms)
                .bind(&e.event)
                .bind(data)
                .bind(link.prev_hash)
                .bind(link.hash)
                .bind(&entry.row_digest);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
