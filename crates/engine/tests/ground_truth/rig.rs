//! Runs a case: the engine on a fresh SQLite journal, its simulated devices behind a recording
//! driver, the script's steps at their (virtual) times; then reads back everything the journal
//! says. What the devices physically did is recorded by the driver: every request the engine
//! makes is logged with the device's physical state (`SimDevice::peek`) at that instant.

use super::spec::*;
use closedloop_connect::Connection;
use closedloop_driver::{Answer, Area, BoxFuture, Data, Driver, Write};
use closedloop_engine::{CommandResult, Engine, Submission};
use closedloop_journal::{CommandRow, EventRow, Journal, ListFilter};
use closedloop_sim::{SimDevice, SimState};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// One thing that happened at a device, with its physical state then.
#[derive(Debug, Clone)]
pub struct Obs {
    /// Microseconds since the case began (virtual time).
    pub t_us: u64,
    pub epoch: usize,
    pub dev: usize,
    pub kind: ObsKind,
    /// The physical truth at `t_us`, before a write takes effect.
    pub state: SimState,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ObsKind {
    /// A read the engine issued; `answered`: data came back (the engine saw the values);
    /// `lied`: it reported a relay's contact the other way round from the physical one.
    Read {
        block: (Area, u16, u16),
        answered: bool,
        lied: bool,
        /// Case time (ms) the answer (or error) came back; the issue time while none did.
        done_ms: i64,
    },
    /// A write the engine sent (`Write`'s display).
    Write { what: String },
    /// The answer to the write logged at `sent`: `ok` when the device acknowledged it.
    WriteDone { sent: usize, ok: bool },
    /// The script injected or cleared a fault.
    Fault(String),
}

impl Obs {
    pub fn t_ms(&self) -> i64 {
        (self.t_us / 1000) as i64
    }

    /// A read whose answer (with data) was back by case time `t`.
    pub fn seen_by(&self, t: i64) -> bool {
        matches!(self.kind, ObsKind::Read { answered: true, done_ms, .. } if done_ms <= t)
    }
}

/// The shared log of every device.
#[derive(Clone)]
pub struct Log {
    t0: Instant,
    obs: Arc<Mutex<Vec<Obs>>>,
}

impl Log {
    fn push(&self, epoch: usize, dev: usize, kind: ObsKind, state: SimState) -> usize {
        let t_us = Instant::now().duration_since(self.t0).as_micros() as u64;
        let mut obs = self.obs.lock().unwrap_or_else(|p| p.into_inner());
        obs.push(Obs {
            t_us,
            epoch,
            dev,
            kind,
            state,
        });
        obs.len() - 1
    }

    /// Records the answer to the read logged at `i`: data (`Some`), or an exception or a
    /// transport error (`None`).
    fn answered(&self, i: usize, data: Option<&Data>) {
        let done_ms = self.now_ms();
        let mut obs = self.obs.lock().unwrap_or_else(|p| p.into_inner());
        let contact = obs[i].state.contact;
        let ObsKind::Read { block, .. } = &mut obs[i].kind else {
            return;
        };
        let (area, start, _) = *block;
        let lied = match (data, contact) {
            (Some(Data::Bits(bits)), Some(contact))
                if area == Area::DiscreteInput && start == 0 =>
            {
                bits.first().is_some_and(|b| *b != contact)
            }
            _ => false,
        };
        obs[i].kind = ObsKind::Read {
            block: (area, start, data.map_or(0, data_len)),
            answered: data.is_some(),
            lied,
            done_ms,
        };
    }

    pub fn now_ms(&self) -> i64 {
        Instant::now().duration_since(self.t0).as_millis() as i64
    }

    /// The instant `ms` milliseconds after the log began.
    pub fn instant_of(&self, ms: i64) -> Instant {
        self.t0 + std::time::Duration::from_millis(ms.max(0) as u64)
    }
}

fn data_len(d: &Data) -> u16 {
    match d {
        Data::Bits(b) => b.len() as u16,
        Data::Words(w) => w.len() as u16,
    }
}

/// A simulated device behind a driver that logs every request with the physical state.
struct Recorder {
    sim: SimDevice,
    dev: usize,
    epoch: usize,
    log: Log,
}

impl Recorder {
    /// Logs a read about to be issued, with the physical state it is issued in: before the
    /// read, so a read issued before a write's acknowledgement is logged before it.
    fn issued(&self, area: Area, start: u16, count: u16) -> usize {
        let kind = ObsKind::Read {
            block: (area, start, count),
            answered: false,
            lied: false,
            done_ms: self.log.now_ms(),
        };
        self.log.push(self.epoch, self.dev, kind, self.sim.peek())
    }

    fn came_back(&self, i: usize, answer: &Answer<Data>) {
        match answer {
            Ok(Ok(data)) => self.log.answered(i, Some(data)),
            _ => self.log.answered(i, None),
        }
    }
}

impl Driver for Recorder {
    fn read(&self, area: Area, start: u16, count: u16) -> BoxFuture<'_, Answer<Data>> {
        Box::pin(async move {
            let i = self.issued(area, start, count);
            let answer = self.sim.read(area, start, count).await;
            self.came_back(i, &answer);
            answer
        })
    }

    /// The poller's synchronous path, logged as `read` is. A read that would have to wait
    /// stays logged as a read never answered (it counts for nothing); the poller then reads
    /// the waiting way, logged anew. A cycle given up between two blocks (a fault starting in
    /// those microseconds) leaves its earlier blocks logged as answered though unpublished.
    fn read_now(&self, area: Area, start: u16, count: u16) -> Option<Answer<Data>> {
        let i = self.issued(area, start, count);
        let answer = self.sim.read_now(area, start, count)?;
        self.came_back(i, &answer);
        Some(answer)
    }

    fn answers_at_once(&self) -> bool {
        self.sim.answers_at_once()
    }

    fn write(&self, write: Write) -> BoxFuture<'_, Answer<()>> {
        Box::pin(async move {
            let what = ObsKind::Write {
                what: write.to_string(),
            };
            let sent = self.log.push(self.epoch, self.dev, what, self.sim.peek());
            let answer = self.sim.write(write).await;
            let done = ObsKind::WriteDone {
                sent,
                ok: matches!(answer, Ok(Ok(()))),
            };
            self.log.push(self.epoch, self.dev, done, self.sim.peek());
            answer
        })
    }

    fn describe(&self) -> String {
        self.sim.describe()
    }
}

/// One engine's life: where its clock stood when it started, to read its timestamps.
#[derive(Debug, Clone, Copy)]
pub struct Epoch {
    /// Case time (ms) of `Engine::start`.
    pub start_ms: i64,
    /// The engine clock's wall-clock ms at that instant.
    pub wall_ms: i64,
}

/// What a submission returned.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub step: usize,
    pub device: usize,
    pub result: Result<CommandResult, String>,
}

/// A command as the journal holds it at the end, each event with the epoch that wrote it.
#[derive(Debug, Clone)]
pub struct Journaled {
    pub row: CommandRow,
    pub events: Vec<(usize, EventRow)>,
}

/// Everything a case produced.
pub struct Outcome {
    pub obs: Vec<Obs>,
    pub epochs: Vec<Epoch>,
    pub submitted: Vec<Submitted>,
    pub journal: BTreeMap<String, Journaled>,
    /// Accepted commands still not terminal when the case gave up waiting.
    pub unsettled: Vec<String>,
    /// What the journal held when each restart shut the engine down: status, code, verified.
    pub at_restart: Vec<BTreeMap<String, CommandState>>,
}

/// A command's status, error code and `verified`, as journaled.
pub type CommandState = (String, Option<String>, bool);

fn journal_dir() -> tempfile::TempDir {
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

fn template() -> std::path::PathBuf {
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

struct Running {
    engine: Arc<Engine>,
    sims: Vec<SimDevice>,
}

async fn start(
    plant: &Arc<closedloop_plant::Plant>,
    url: &str,
    log: &Log,
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
            let rec = Recorder {
                sim: sim.clone(),
                dev,
                epoch,
                log: log.clone(),
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
    let links = closedloop_connect::Drivers {
        map,
        sims: BTreeMap::new(),
    }
    .open(&plant.devices)
    .expect("links");
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

/// Every command in the journal with its events (the engine must be shut down).
fn read_journal(url: &str) -> BTreeMap<String, (CommandRow, Vec<EventRow>)> {
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

/// Runs a case to its end (every command terminal, or given up on) and collects the outcome.
pub async fn run(case: &Case) -> Outcome {
    let toml = plant_toml(&case.devices);
    let plant = match closedloop_plant::parse(&toml, "case.toml", std::path::Path::new(".")) {
        Ok(p) => Arc::new(p),
        Err(e) => panic!("generated plant does not parse:\n{e}\n{toml}"),
    };
    let dir = journal_dir();
    let path = dir.path().join("journal.db");
    std::fs::copy(template(), &path).expect("journal template copied");
    let url = format!("sqlite://{}", path.display());
    let log = Log {
        t0: Instant::now(),
        obs: Arc::new(Mutex::new(Vec::new())),
    };
    let mut epochs = Vec::new();
    // Per command: how many of its events the journal held when each epoch ended.
    let mut counts: Vec<BTreeMap<String, usize>> = Vec::new();
    let mut at_restart = Vec::new();
    let mut rt = start(&plant, &url, &log, 0, None, &mut epochs).await;
    let submitted: Arc<Mutex<Vec<Submitted>>> = Arc::default();
    let mut tasks: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let ids: Vec<String> = (0..case.devices.len())
        .map(|i| device_id(&case.devices, i))
        .collect();
    for (step, s) in case.steps.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(s.delay_ms)).await;
        match &s.op {
            Op::Submit {
                device,
                follow,
                arg,
                wait_ms,
            } => {
                let d = &case.devices[*device];
                let action = if *follow { "follow" } else { d.action_name() };
                let args = match (arg, &d.model) {
                    (Arg::On(on), _) => json!({ "on": on }),
                    (Arg::Number(x), Model::Stepper { .. }) => json!({ "target_mm": x }),
                    (Arg::Number(x), _) => json!({ "to_c": x }),
                };
                let sub = Submission {
                    device: ids[*device].clone(),
                    action: action.into(),
                    args: args.as_object().cloned().unwrap_or_default(),
                    wait: Duration::from_millis(*wait_ms),
                    ..Submission::default()
                };
                let engine = Arc::clone(&rt.engine);
                let submitted = Arc::clone(&submitted);
                let device = *device;
                tasks.push(tokio::spawn(async move {
                    let result = engine.submit(sub).await.map_err(|e| e.to_string());
                    let s = Submitted {
                        step,
                        device,
                        result,
                    };
                    submitted.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                }));
            }
            Op::Cancel { nth } => {
                let known: Vec<String> = submitted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter_map(|s| s.result.as_ref().ok().map(|r| r.command_id.clone()))
                    .collect();
                if !known.is_empty() {
                    let id = known[nth % known.len()].clone();
                    let engine = Arc::clone(&rt.engine);
                    tasks.push(tokio::spawn(async move {
                        let _ = engine.cancel(&id, Duration::from_secs(2)).await;
                    }));
                }
            }
            Op::Inject { device, fault } => {
                rt.sims[*device].inject(*fault);
                let state = rt.sims[*device].peek();
                let what = ObsKind::Fault(format!("inject {fault:?}"));
                log.push(epochs.len() - 1, *device, what, state);
            }
            Op::Clear { device, kind } => {
                rt.sims[*device].clear(*kind);
                let state = rt.sims[*device].peek();
                let what = ObsKind::Fault(format!("clear {kind}"));
                log.push(epochs.len() - 1, *device, what, state);
            }
            Op::Restart { fresh } => {
                for t in tasks.drain(..) {
                    let _ = t.await;
                }
                rt.engine.shutdown().await;
                let held = read_journal(&url);
                counts.push(
                    held.iter()
                        .map(|(k, (_, e))| (k.clone(), e.len()))
                        .collect(),
                );
                at_restart.push(
                    held.iter()
                        .map(|(k, (r, _))| {
                            let state = (r.status.clone(), r.error_code.clone(), r.verified);
                            (k.clone(), state)
                        })
                        .collect(),
                );
                let keep = (!fresh).then(|| rt.sims.clone());
                rt = start(&plant, &url, &log, epochs.len(), keep, &mut epochs).await;
            }
        }
    }
    let last_step_ms = log.now_ms();
    for t in tasks.drain(..) {
        let _ = t.await;
    }
    // Every accepted command must end; give them a generous (virtual) while.
    let accepted: Vec<String> = submitted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|s| s.result.as_ref().ok())
        .filter(|r| r.status != closedloop_engine::Status::Rejected)
        .map(|r| r.command_id.clone())
        .collect();
    let mut unsettled = Vec::new();
    for id in &accepted {
        loop {
            match rt.engine.status(id, Duration::from_secs(10)).await {
                Ok(r) if r.status.is_terminal() => break,
                Ok(_) if log.now_ms() - last_step_ms < 120_000 => continue,
                Ok(_) => {
                    unsettled.push(id.clone());
                    break;
                }
                Err(e) => {
                    unsettled.push(format!("{id}: {e}"));
                    break;
                }
            }
        }
    }
    // Let safe states and trailing stops happen before the end.
    tokio::time::sleep(Duration::from_millis(300)).await;
    rt.engine.shutdown().await;
    let held = read_journal(&url);
    let journal = held
        .into_iter()
        .map(|(id, (row, events))| {
            let events = events
                .into_iter()
                .enumerate()
                .map(|(i, e)| {
                    let epoch = counts
                        .iter()
                        .position(|c| i < c.get(&id).copied().unwrap_or(0))
                        .unwrap_or(counts.len());
                    (epoch, e)
                })
                .collect();
            (id, Journaled { row, events })
        })
        .collect();
    let obs = log.obs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let submitted = submitted.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Outcome {
        obs,
        epochs,
        submitted,
        journal,
        unsettled,
        at_restart,
    }
}
