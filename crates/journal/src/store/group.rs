//! Group commit: every write goes to one writer thread, which runs all the writes waiting at that
//! moment in one transaction and one fsync, then answers each.
//!
//! A durable write costs an fsync (about half a millisecond here); with one per write, sixty-four
//! commands in flight waited on each other's fsyncs and the journal capped the gateway near
//! 2,000 writes a second. Batched, a burst of writes shares one fsync, and a write is still on
//! disk before its caller hears `Ok`.
//!
//! # Invariants
//! - Writes are applied in the order they were sent (one queue, one connection).
//! - A caller hears `Ok` only after the transaction holding its write committed.
//! - A write that fails fails alone: when a batch hits an error, it is rolled back and every write
//!   of it is run again in a transaction of its own, so each caller hears its own outcome.
//! - The writer has its own thread and runtime: a caller's runtime ending (a test's, one used only
//!   to open the journal) or a caller's future being dropped never strands other callers' writes.
//! - The writer owns the head of the hash chain (`crate::chain::Chain`), loaded when the journal
//!   opened: a transaction links its events on a copy, which replaces the head only once the
//!   transaction committed, so a rolled-back batch leaves no trace in the chain either.

use super::batch;
use super::writes::Write;
use crate::JournalError;
use crate::chain::Chain;
use sqlx::SqlitePool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Writes taken into one transaction at most: bounds how long one commit holds the others.
const MAX_BATCH: usize = 512;

/// One write waiting for the writer, with where its outcome goes.
struct Job {
    write: Write,
    done: oneshot::Sender<Result<(), JournalError>>,
}

/// The sending side of the writer thread. Cheap to clone.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    jobs: mpsc::UnboundedSender<Job>,
    counts: Arc<Counts>,
}

/// Writes and commits so far: their ratio is how many writes one fsync served.
#[derive(Debug, Default)]
struct Counts {
    writes: AtomicU64,
    commits: AtomicU64,
}

impl Writer {
    /// Starts the writer thread over `pool` (one connection), continuing the hash chain from
    /// `chain` (the committed head). It ends when every `Writer` is dropped.
    pub(super) fn start(pool: SqlitePool, chain: Chain) -> Result<Writer, JournalError> {
        let (jobs, rx) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        let c = Arc::clone(&counts);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| JournalError::Writer(format!("cannot start its runtime: {e}")))?;
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || runtime.block_on(serve(pool, rx, c, chain)))
            .map_err(|e| JournalError::Writer(format!("cannot start its thread: {e}")))?;
        Ok(Writer { jobs, counts })
    }

    /// Writes answered and transactions committed since the journal opened.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.counts.writes.load(Ordering::Relaxed),
            self.counts.commits.load(Ordering::Relaxed),
        )
    }

    /// Hands `write` to the writer and waits until it is committed (or failed).
    pub(super) async fn write(&self, write: Write) -> Result<(), JournalError> {
        let (done, outcome) = oneshot::channel();
        self.jobs
            .send(Job { write, done })
            .map_err(|_| JournalError::Writer("it has stopped".into()))?;
        outcome
            .await
            .map_err(|_| JournalError::Writer("it stopped before answering".into()))?
    }
}

/// The writer thread's loop: takes what is waiting, commits it at once, answers.
async fn serve(
    pool: SqlitePool,
    mut rx: mpsc::UnboundedReceiver<Job>,
    counts: Arc<Counts>,
    mut chain: Chain,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        counts
            .writes
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let commits = commit(&pool, &mut batch, &mut chain).await;
        counts.commits.fetch_add(commits, Ordering::Relaxed);
    }
}

/// Runs `batch` in one transaction and answers every job of it; on any error, runs each job
/// alone instead (see the invariants). The number of transactions it took.
async fn commit(pool: &SqlitePool, batch: &mut Vec<Job>, chain: &mut Chain) -> u64 {
    // On an error the batch is not lost: each write runs again alone below, and its caller
    // hears its own outcome; `chain` is still the head before the batch.
    if batch.len() > 1
        && let Ok(outcomes) = together(pool, batch, chain).await
    {
        for (job, outcome) in batch.drain(..).zip(outcomes) {
            let _ = job.done.send(outcome);
        }
        return 1;
    }
    let alone_count = batch.len() as u64;
    for job in batch.drain(..) {
        let outcome = alone(pool, &job.write, chain).await;
        let _ = job.done.send(outcome);
    }
    alone_count
}

/// All of `batch` in one transaction: each job's own outcome (a duplicate insert is one, and
/// leaves nothing behind), or the error that stopped the transaction.
async fn together(
    pool: &SqlitePool,
    batch: &[Job],
    chain: &mut Chain,
) -> Result<Vec<Result<(), JournalError>>, JournalError> {
    let writes: Vec<&Write> = batch.iter().map(|j| &j.write).collect();
    run_committed(pool, &writes, chain).await
}

/// One write in a transaction of its own.
async fn alone(pool: &SqlitePool, write: &Write, chain: &mut Chain) -> Result<(), JournalError> {
    let outcome = run_committed(pool, &[write], chain).await?;
    outcome.into_iter().next().unwrap_or(Ok(()))
}

/// `writes` in one transaction, linking their events on a copy of `chain` that replaces it only
/// once the transaction committed.
async fn run_committed(
    pool: &SqlitePool,
    writes: &[&Write],
    chain: &mut Chain,
) -> Result<Vec<Result<(), JournalError>>, JournalError> {
    let mut next = chain.clone();
    let mut tx = pool.begin().await?;
    let outcomes = batch::run(&mut tx, writes, &mut next).await?;
    tx.commit().await?;
    *chain = next;
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommandRow, EventRow};

    fn row(id: &str) -> CommandRow {
        crate::store::fixtures::row(id, "relay", "accepted", 1)
    }

    fn ev(event: &str) -> EventRow {
        crate::store::fixtures::ev(1, event)
    }

    #[tokio::test]
    async fn a_failed_batch_re_run_row_by_row_relinks_the_chain_from_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("j.db").display());
        let j = super::super::Journal::open(&url).await.unwrap();
        j.insert(&row("first"), &[ev("accepted")]).await.unwrap();
        let mut chain = super::super::anchor::load_head(&j.writer).await.unwrap();
        let mut batch = Vec::new();
        let mut answers = Vec::new();
        for write in [
            Write::Insert(row("a"), vec![ev("received"), ev("accepted")]),
            // A timeline entry of no command: the foreign key fails the whole batch.
            Write::Append("no-such-command".into(), vec![ev("signal")]),
            Write::Insert(row("b"), vec![ev("accepted")]),
        ] {
            let (done, answer) = oneshot::channel();
            batch.push(Job { write, done });
            answers.push(answer);
        }
        assert_eq!(
            commit(&j.writer, &mut batch, &mut chain).await,
            3,
            "run alone"
        );
        let outcomes: Vec<bool> = futures_ok(answers).await;
        assert_eq!(outcomes, [true, false, true]);
        // Three events landed after "first": seq 2, 3, 4, with the in-memory head on the last.
        let head = super::super::anchor::load_head(&j.writer).await.unwrap();
        assert_eq!(chain, head);
        assert_eq!(chain.last_seq, 4);
        let report = j.verify().await.unwrap();
        assert!(report.intact(), "{report:?}");
        assert_eq!(report.checked, 4);
    }

    /// Whether each answer was `Ok`.
    async fn futures_ok(answers: Vec<oneshot::Receiver<Result<(), JournalError>>>) -> Vec<bool> {
        let mut out = Vec::new();
        for a in answers {
            out.push(a.await.unwrap().is_ok());
        }
        out
    }
}
