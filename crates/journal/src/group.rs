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
//! - A rolled-back batch leaves no trace in the hash chain either: SQLite's committer keeps the
//!   chain's head in memory and replaces it only once a transaction committed; PostgreSQL's reads
//!   and moves the head inside the transaction (`crate::pg`).
//! - The same writer serves both stores through [`Committer`]: one transaction's SQL is the
//!   store's, the batching and the answering are this module's.

use crate::JournalError;
use crate::writes::Write;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

/// Writes taken into one transaction at most: bounds how long one commit holds the others.
const MAX_BATCH: usize = 512;

/// What the writer thread commits with: a store's connection and its view of the hash chain.
pub(crate) trait Committer: Send + 'static {
    /// Runs `writes` in one transaction, linking their events into the chain, and commits:
    /// each write's own outcome (a duplicate insert is one, and leaves nothing behind), or the
    /// error that stopped the transaction, which then left nothing behind either.
    fn run_committed(
        &mut self,
        writes: &[&Write],
    ) -> impl Future<Output = Result<Vec<Result<(), JournalError>>, JournalError>> + Send;
}

/// How the writer thread gets its committer: opened on the writer's own runtime, because a
/// network connection belongs to the runtime that opened it.
pub(crate) type Open<C> =
    Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = Result<C, JournalError>> + Send>> + Send>;

/// One write waiting for the writer, with where its outcome goes.
struct Job {
    write: Write,
    done: oneshot::Sender<Result<(), JournalError>>,
}

/// What the writer thread is handed: a write, or the journal closing.
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every message is a write: boxing it would allocate once per write"
)]
enum Msg {
    Write(Job),
    /// Commit what came before, close the connection, answer here, and stop.
    Close(oneshot::Sender<()>),
}

/// The sending side of the writer thread. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    jobs: mpsc::UnboundedSender<Msg>,
    counts: Arc<Counts>,
    gauges: Arc<Gauges>,
}

/// Writes and commits so far: their ratio is how many writes one fsync served.
#[derive(Debug, Default)]
struct Counts {
    writes: AtomicU64,
    commits: AtomicU64,
}

/// What the writer tells a metrics recorder (a no-op without one): how long a write waits for
/// its commit, how many wait, and how many one transaction takes.
#[derive(Debug)]
struct Gauges {
    /// `closedloop_journal_write_duration_seconds`: from handing a write over to its answer.
    latency: metrics::Histogram,
    /// `closedloop_journal_queue_depth`: writes handed over and not answered yet.
    depth: metrics::Gauge,
    /// `closedloop_journal_batch_writes`: writes per transaction, a count (its buckets, 1 to
    /// [`MAX_BATCH`], are set with the recorder: `closedloop_mcp::metrics`).
    batch: metrics::Histogram,
}

impl Gauges {
    fn new() -> Gauges {
        Gauges {
            latency: metrics::histogram!("closedloop_journal_write_duration_seconds"),
            depth: metrics::gauge!("closedloop_journal_queue_depth"),
            batch: metrics::histogram!("closedloop_journal_batch_writes"),
        }
    }
}

impl Writer {
    /// Starts the writer thread, opens its committer there with `open`, and returns once it is
    /// open (or with why it could not open). The thread ends at [`Writer::close`] or when every
    /// `Writer` is dropped.
    pub(crate) async fn start<C: Committer>(open: Open<C>) -> Result<Writer, JournalError> {
        let (jobs, rx) = mpsc::unbounded_channel();
        let (opened, is_open) = oneshot::channel();
        let counts = Arc::new(Counts::default());
        let c = Arc::clone(&counts);
        let gauges = Arc::new(Gauges::new());
        let batch_sizes = gauges.batch.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| JournalError::Writer(format!("cannot start its runtime: {e}")))?;
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match open().await {
                        Ok(committer) => {
                            let _ = opened.send(Ok(()));
                            serve(committer, rx, c, batch_sizes).await;
                        }
                        Err(e) => {
                            let _ = opened.send(Err(e));
                        }
                    }
                })
            })
            .map_err(|e| JournalError::Writer(format!("cannot start its thread: {e}")))?;
        is_open
            .await
            .map_err(|_| JournalError::Writer("it stopped while opening".into()))??;
        Ok(Writer {
            jobs,
            counts,
            gauges,
        })
    }

    /// Writes answered and transactions committed since the journal opened.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.counts.writes.load(Ordering::Relaxed),
            self.counts.commits.load(Ordering::Relaxed),
        )
    }

    /// Transactions committed since the journal opened, readable without holding the writer
    /// open (the WAL checkpointer paces itself by them).
    pub(crate) fn commits(&self) -> Commits {
        Commits(Arc::clone(&self.counts))
    }

    /// Hands `write` to the writer and waits until it is committed (or failed).
    pub(crate) async fn write(&self, write: Write) -> Result<(), JournalError> {
        let (done, outcome) = oneshot::channel();
        let sent = std::time::Instant::now();
        self.jobs
            .send(Msg::Write(Job { write, done }))
            .map_err(|_| JournalError::Writer("it has stopped".into()))?;
        self.gauges.depth.increment(1.0);
        let answer = outcome.await;
        self.gauges.depth.decrement(1.0);
        self.gauges.latency.record(sent.elapsed().as_secs_f64());
        answer.map_err(|_| JournalError::Writer("it stopped before answering".into()))?
    }

    /// Commits the writes handed over so far, closes the writer's connection and stops the
    /// thread; later writes fail ("it has stopped"). Returns once the connection is closed, so
    /// that the store's own connections, closed after it, fold the WAL in.
    pub(crate) async fn close(&self) {
        let (ack, acked) = oneshot::channel();
        if self.jobs.send(Msg::Close(ack)).is_ok() {
            let _ = acked.await;
        }
    }
}

/// A reader of the writer's commit count ([`Writer::commits`]).
#[derive(Debug, Clone)]
pub(crate) struct Commits(Arc<Counts>);

impl Commits {
    /// Transactions committed so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.commits.load(Ordering::Relaxed)
    }
}

/// The writer thread's loop: takes what is waiting, commits it at once, answers; until told
/// to close (writes handed over after that are dropped: their callers hear it stopped).
async fn serve<C: Committer>(
    mut committer: C,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    counts: Arc<Counts>,
    batch_sizes: metrics::Histogram,
) {
    let mut msgs = Vec::with_capacity(MAX_BATCH);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut closes = Vec::new();
    while rx.recv_many(&mut msgs, MAX_BATCH).await > 0 {
        for msg in msgs.drain(..) {
            match msg {
                Msg::Write(job) if closes.is_empty() => batch.push(job),
                // After a close: dropped, its caller hears the writer stopped.
                Msg::Write(_) => {}
                Msg::Close(ack) => closes.push(ack),
            }
        }
        if !batch.is_empty() {
            batch_sizes.record(batch.len() as f64);
            counts
                .writes
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let commits = commit(&mut committer, &mut batch).await;
            counts.commits.fetch_add(commits, Ordering::Relaxed);
        }
        if !closes.is_empty() {
            break;
        }
    }
    // No write is taken from here on ("it has stopped"); every close waiting hears once the
    // connection is closed.
    rx.close();
    while let Ok(msg) = rx.try_recv() {
        if let Msg::Close(ack) = msg {
            closes.push(ack);
        }
    }
    drop(committer);
    for ack in closes {
        let _ = ack.send(());
    }
}

/// Runs `batch` in one transaction and answers every job of it; on any error, runs each job
/// alone instead (see the invariants). The number of transactions it took.
async fn commit<C: Committer>(committer: &mut C, batch: &mut Vec<Job>) -> u64 {
    // On an error the batch is not lost: each write runs again alone below, and its caller
    // hears its own outcome; the chain is still where it was before the batch.
    if batch.len() > 1 {
        let writes: Vec<&Write> = batch.iter().map(|j| &j.write).collect();
        match committer.run_committed(&writes).await {
            Ok(outcomes) => {
                for (job, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = job.done.send(outcome);
                }
                return 1;
            }
            // Another connection held the write lock past the busy timeout: each write alone
            // would wait as long again, holding every caller behind it.
            Err(JournalError::Sqlite { code, message }) if is_lock_timeout(code) => {
                for job in batch.drain(..) {
                    let message = message.clone();
                    let _ = job.done.send(Err(JournalError::Sqlite { code, message }));
                }
                return 0;
            }
            Err(_) => {}
        }
    }
    let alone_count = batch.len() as u64;
    for job in batch.drain(..) {
        let outcome = match committer.run_committed(&[&job.write]).await {
            Ok(outcomes) => outcomes.into_iter().next().unwrap_or(Ok(())),
            Err(e) => Err(e),
        };
        let _ = job.done.send(outcome);
    }
    alone_count
}

/// Whether a SQLite result code (extended) says a lock was not had in time: `SQLITE_BUSY` or
/// `SQLITE_LOCKED` and their variants.
fn is_lock_timeout(code: i32) -> bool {
    matches!(code & 0xff, 5 | 6)
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
        let j = crate::Journal::open(&url).await.unwrap();
        j.insert(&row("first"), &[ev("accepted")]).await.unwrap();
        let pool = j.sqlite().writer.clone();
        let head = crate::store::anchor::load_head(&pool).await.unwrap();
        let path = dir.path().join("j.db");
        let mut committer = crate::store::SqliteCommitter::open(&path, true, head).unwrap();
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
        assert_eq!(commit(&mut committer, &mut batch).await, 3, "run alone");
        let outcomes: Vec<bool> = futures_ok(answers).await;
        assert_eq!(outcomes, [true, false, true]);
        // Three events landed after "first": seq 2, 3, 4, with the in-memory head on the last.
        let head = crate::store::anchor::load_head(&pool).await.unwrap();
        assert_eq!(committer.chain(), &head);
        assert_eq!(head.last_seq, 4);
        let report = j.verify().await.unwrap();
        assert!(report.intact(), "{report:?}");
        assert_eq!(report.checked, 4);
    }

    /// A committer whose every transaction waits out the busy timeout, counting its tries.
    struct Locked(u32);

    impl Committer for Locked {
        async fn run_committed(
            &mut self,
            _: &[&Write],
        ) -> Result<Vec<Result<(), JournalError>>, JournalError> {
            self.0 += 1;
            Err(JournalError::Sqlite {
                code: 5,
                message: "database is locked".into(),
            })
        }
    }

    /// The regression: a batch that failed on a lock was re-run write by write, each waiting
    /// out the busy timeout (10 s) again, so 500 writes held their callers over an hour.
    #[tokio::test]
    async fn a_batch_that_timed_out_on_a_lock_fails_whole_without_a_re_run() {
        let mut committer = Locked(0);
        let mut batch = Vec::new();
        let mut answers = Vec::new();
        for id in ["a", "b", "c"] {
            let (done, answer) = oneshot::channel();
            batch.push(Job {
                write: Write::Insert(row(id), vec![]),
                done,
            });
            answers.push(answer);
        }
        assert_eq!(commit(&mut committer, &mut batch).await, 0);
        assert_eq!(committer.0, 1, "tried once, not again write by write");
        for a in answers {
            let answer = a.await.unwrap();
            assert!(
                matches!(&answer, Err(JournalError::Sqlite { code: 5, message })
                    if message == "database is locked"),
                "{answer:?}"
            );
        }
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
