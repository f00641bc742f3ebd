//! Setting up an engine's life: the case's SQLite journal (a copy of a migrated template, on
//! tmpfs when there is one), reading it back on the real clock, and starting an engine on it
//! with every simulated device behind a `Recorder`.

use super::Epoch;
use super::record::{Log, Recorder};
use closedloop_connect::Connection;
use closedloop_engine::Engine;
use closedloop_journal::{CommandRow, EventRow, Journal, ListFilter};
use closedloop_sim::SimDevice;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(super) fn journal_dir() -> tempfile::TempDir {
    // tmpfs when there is one: fsync is free, so a case costs less real time.
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().expect("a temporary directory")
}

thread_local! {
    /// An empty journal, created (and its schema migrated) once per thread: each case starts
    /// from a copy, which costs a fraction of creating one.
    static TEMPLATE: std::cell::RefCell<Option<(tempfile::TempDir, std::path::PathBuf)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `work` to its end on a runtime of its own, on the real clock: journal work outside a
/// case (the empty template, reading the journal after the engine stopped) needs no paused
/// time, and on the paused clock a slow machine could let sqlx's acquire timeout run out.
fn on_real_clock<T: Send>(work: impl std::future::Future<Output = T> + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(work)
        })
        .join()
        .expect("journal work")
    })
}

pub(super) fn template() -> std::path::PathBuf {
    if let Some(p) = TEMPLATE.with(|t| t.borrow().as_ref().map(|(_, p)| p.clone())) {
        return p;
    }
    let dir = journal_dir();
    let path = dir.path().join("template.db");
    on_real_clock(async {
        let j = Journal::open(&format!("sqlite://{}", path.display()))
            .await
            .expect("template journal");
        j.close().await;
    });
    TEMPLATE.with(|t| *t.borrow_mut() = Some((dir, path.clone())));
    path
}

pub(super) struct Running {
    pub(super) engine: Arc<Engine>,
    pub(super) sims: Vec<SimDevice>,
}

/// A device's refused feedback block: the switch `Op::Refuse` flips (kept across restarts, as
/// the device's own failure is) and the block it refuses.
pub(super) type Refusal = (
    Arc<std::sync::atomic::AtomicBool>,
    (closedloop_contract::Area, u16),
);

/// A relay behind a board (`board.rs`): how it reports, and its mode (kept across restarts).
pub(super) type BoardOf = Option<(crate::spec::Push, super::board::ModeCell)>;

/// What wraps the simulated devices: the log, each one's refusal, each relay's board if any.
pub(super) type Wrapping<'a> = (&'a Log, &'a [Refusal], &'a [BoardOf]);

pub(super) async fn start(
    plant: &Arc<closedloop_plant::Plant>,
    url: &str,
    (log, refusals, boards): Wrapping<'_>,
    epoch: usize,
    keep: Option<Vec<SimDevice>>,
    epochs: &mut Vec<Epoch>,
) -> Running {
    let built = closedloop_connect::build_drivers(plant).expect("drivers");
    let ids: Vec<String> = plant.devices.iter().map(|d| d.id.clone()).collect();
    let sims: Vec<SimDevice> = match keep {
        Some(s) => s,
        None => ids.iter().map(|id| built.sims[id].clone()).collect(),
    };
    let map: BTreeMap<String, Connection> = ids
        .iter()
        .zip(&sims)
        .enumerate()
        .map(|(dev, (id, sim))| {
            let (refuse, feedback) = refusals[dev].clone();
            let rec = Recorder {
                sim: sim.clone(),
                dev,
                epoch,
                log: log.clone(),
                refuse,
                feedback,
            };
            (id.clone(), Connection::Registers(Arc::new(rec)))
        })
        .collect();
    // Opened on the real clock: right after the previous engine closed the journal, SQLite may
    // answer "busy" while that close checkpoints, and sqlx retries after a backoff — a sleep
    // the paused clock skips, so its retries ran out in no real time (`PoolTimedOut`, about
    // one case in 5,000). The pools work on from the case's runtime.
    let journal = on_real_clock(Journal::open(url)).expect("journal opens");
    let start_ms = log.now_ms();
    let mut links = closedloop_connect::Drivers {
        map,
        sims: BTreeMap::new(),
    }
    .open(&plant.devices)
    .expect("links");
    for (dev, board) in boards.iter().enumerate() {
        let Some((push, mode)) = board else {
            continue;
        };
        let spec = &plant.devices[dev];
        let board = super::board::Board {
            sim: sims[dev].clone(),
            dev,
            epoch,
            log: log.clone(),
            push: *push,
            mode: Arc::clone(mode),
            window: std::time::Duration::from_secs_f64(spec.liveness.max_silence_s),
            timeout: std::time::Duration::from_millis(spec.request_timeout_ms()),
            clock: links.clock,
            started: tokio::time::Instant::now(),
            tx: closedloop_link::SnapshotTx::new(closedloop_link::Snapshot::before_first_read()),
            seq: std::sync::atomic::AtomicU64::new(0),
        };
        links.map.insert(spec.id.clone(), Arc::new(board));
    }
    let engine = Engine::start(Arc::clone(plant), journal, links)
        .await
        .expect("engine starts");
    // The engine's own mapping of the paused clock to wall-clock ms: reading the wall clock here
    // instead, a thread descheduled between that reading and the engine's (16 ms on a loaded
    // machine) shifted every journal time and the harness found writes "by no command".
    let wall_ms = engine.clock().wall_ms(log.instant_of(start_ms));
    epochs.push(Epoch { start_ms, wall_ms });
    Running {
        engine: Arc::new(engine),
        sims,
    }
}

/// Every standing alarm's raise and clear in the journal, oldest first (the engine must be shut
/// down).
pub(super) fn read_alarms(url: &str) -> Vec<closedloop_journal::AlarmRow> {
    on_real_clock(async {
        let j = Journal::open(url).await.expect("journal reopens");
        let rows = j.alarm_events(0, 100_000).await.expect("alarm rows");
        j.close().await;
        rows
    })
}

/// Every command in the journal with its events (the engine must be shut down).
pub(super) fn read_journal(url: &str) -> BTreeMap<String, (CommandRow, Vec<EventRow>)> {
    on_real_clock(read_journal_now(url))
}

async fn read_journal_now(url: &str) -> BTreeMap<String, (CommandRow, Vec<EventRow>)> {
    let j = Journal::open(url).await.expect("journal reopens");
    let filter = ListFilter {
        device: None,
        status: None,
        limit: 100_000,
    };
    let mut out = BTreeMap::new();
    for row in j.list(&filter).await.expect("journal lists") {
        let events = j.events(&row.command_id).await.expect("journal events");
        out.insert(row.command_id.clone(), (row, events));
    }
    j.close().await;
    out
}
