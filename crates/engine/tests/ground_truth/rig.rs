//! Runs a case: the engine on a fresh SQLite journal, its simulated devices behind a recording
//! driver, the script's steps at their (virtual) times; then reads back everything the journal
//! says. What the devices physically did is recorded by the driver: every request the engine
//! makes is logged with the device's physical state (`SimDevice::peek`) at that instant.

#[path = "rig/board.rs"]
mod board;
#[path = "rig/record.rs"]
mod record;
#[path = "rig/setup.rs"]
mod setup;

pub use record::{Obs, ObsKind};

use super::spec::*;
use closedloop_engine::{CommandResult, Submission};
use closedloop_journal::{CommandRow, EventRow};
use record::Log;
use serde_json::json;
use setup::{journal_dir, read_alarms, read_journal, start, template};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

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
    /// The standing alarm's raises and clears, oldest first (wall-clock times).
    pub alarms: Vec<closedloop_journal::AlarmRow>,
}

/// A command's status, error code and `verified`, as journaled.
pub type CommandState = (String, Option<String>, bool);

/// Runs a case to its end (every command terminal, or given up on) and collects the outcome.
pub async fn run(case: &Case) -> Outcome {
    let dir = journal_dir();
    let mut rig = Rig::start(case, &dir).await;
    for (step, s) in case.steps.iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(s.delay_ms)).await;
        rig.step(step, &s.op).await;
    }
    let last_step_ms = rig.log.now_ms();
    for t in rig.tasks.drain(..) {
        let _ = t.await;
    }
    let unsettled = rig.settle(last_step_ms).await;
    rig.finish(unsettled).await
}

/// A case under way: its engine (restarted as the script says), what wraps its devices, and
/// what it has recorded so far.
struct Rig<'c> {
    case: &'c Case,
    plant: Arc<closedloop_plant::Plant>,
    url: String,
    log: Log,
    refusals: Vec<setup::Refusal>,
    boards: Vec<setup::BoardOf>,
    rt: setup::Running,
    epochs: Vec<Epoch>,
    /// Per command: how many of its events the journal held when each epoch ended.
    counts: Vec<BTreeMap<String, usize>>,
    at_restart: Vec<BTreeMap<String, CommandState>>,
    submitted: Arc<Mutex<Vec<Submitted>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ids: Vec<String>,
}

impl<'c> Rig<'c> {
    /// The case's plant on a copy of the template journal in `dir`, its first engine started.
    async fn start(case: &'c Case, dir: &tempfile::TempDir) -> Rig<'c> {
        let toml = case_toml(case);
        let plant = match closedloop_plant::parse(&toml, "case.toml", std::path::Path::new(".")) {
            Ok(p) => Arc::new(p),
            Err(e) => panic!("generated plant does not parse:\n{e}\n{toml}"),
        };
        let path = dir.path().join("journal.db");
        std::fs::copy(template(), &path).expect("journal template copied");
        let url = format!("sqlite://{}", path.display());
        let log = Log {
            t0: Instant::now(),
            obs: Arc::new(Mutex::new(Vec::new())),
        };
        let mut epochs = Vec::new();
        let refusals: Vec<setup::Refusal> = (case.devices.iter())
            .map(|d| (Arc::default(), crate::alarm::feedback_block(&d.model)))
            .collect();
        let boards: Vec<setup::BoardOf> = (case.devices.iter())
            .map(|d| d.push.map(|p| (p, Arc::new(Mutex::new(p.start)))))
            .collect();
        let rt = start(
            &plant,
            &url,
            (&log, &refusals, &boards),
            0,
            None,
            &mut epochs,
        )
        .await;
        let ids: Vec<String> = (0..case.devices.len())
            .map(|i| device_id(&case.devices, i))
            .collect();
        Rig {
            case,
            plant,
            url,
            log,
            refusals,
            boards,
            rt,
            epochs,
            counts: Vec::new(),
            at_restart: Vec::new(),
            submitted: Arc::default(),
            tasks: Vec::new(),
            ids,
        }
    }

    /// One step of the script, `step` its index.
    async fn step(&mut self, step: usize, op: &Op) {
        match op {
            Op::Submit {
                device,
                follow,
                arg,
                wait_ms,
            } => self.submit(step, *device, *follow, arg, *wait_ms),
            Op::Cancel { nth } => self.cancel(*nth),
            Op::Inject { device, fault } => {
                self.rt.sims[*device].inject(*fault);
                self.note(*device, format!("inject {fault:?}"));
            }
            Op::Clear { device, kind } => {
                self.rt.sims[*device].clear(*kind);
                self.note(*device, format!("clear {kind}"));
            }
            Op::Refuse { device, on } => {
                self.refusals[*device]
                    .0
                    .store(*on, std::sync::atomic::Ordering::SeqCst);
                self.note(*device, format!("refuse {on}"));
            }
            Op::Board { device, mode } => {
                if let Some((_, cell)) = &self.boards[*device] {
                    *cell.lock().unwrap_or_else(|p| p.into_inner()) = *mode;
                }
                self.note(*device, format!("board {mode:?}"));
            }
            Op::Restart { fresh } => self.restart(*fresh).await,
        }
    }

    /// Records what was done to `device` (`what`) with its physical state now.
    fn note(&self, device: usize, what: String) {
        let state = self.rt.sims[device].peek();
        let what = ObsKind::Fault(what);
        self.log.push(self.epochs.len() - 1, device, what, state);
    }

    /// Submits the step's command on a task of its own, recording what it returns.
    fn submit(&mut self, step: usize, device: usize, follow: bool, arg: &Arg, wait_ms: u64) {
        let d = &self.case.devices[device];
        let action = if follow { "follow" } else { d.action_name() };
        let args = match (arg, &d.model) {
            (Arg::On(on), _) => json!({ "on": on }),
            (Arg::Number(x), Model::Stepper { .. }) => json!({ "target_mm": x }),
            (Arg::Number(x), _) => json!({ "to_c": x }),
        };
        let sub = Submission {
            device: self.ids[device].clone(),
            action: action.into(),
            args: args.as_object().cloned().unwrap_or_default(),
            wait: Duration::from_millis(wait_ms),
            ..Submission::default()
        };
        let engine = Arc::clone(&self.rt.engine);
        let submitted = Arc::clone(&self.submitted);
        self.tasks.push(tokio::spawn(async move {
            let result = engine.submit(sub).await.map_err(|e| e.to_string());
            let s = Submitted {
                step,
                device,
                result,
            };
            submitted.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }));
    }

    /// Cancels the `nth` (modulo how many) command accepted so far, if any, on a task of its own.
    fn cancel(&mut self, nth: usize) {
        let known: Vec<String> = self
            .submitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|s| s.result.as_ref().ok().map(|r| r.command_id.clone()))
            .collect();
        if !known.is_empty() {
            let id = known[nth % known.len()].clone();
            let engine = Arc::clone(&self.rt.engine);
            self.tasks.push(tokio::spawn(async move {
                let _ = engine.cancel(&id, Duration::from_secs(2)).await;
            }));
        }
    }

    /// Waits for every task, shuts the engine down, notes what the journal holds, and starts a
    /// new engine: on the same simulated devices, or on fresh ones when `fresh`.
    async fn restart(&mut self, fresh: bool) {
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        self.rt.engine.shutdown().await;
        let held = read_journal(&self.url);
        self.counts.push(
            held.iter()
                .map(|(k, (_, e))| (k.clone(), e.len()))
                .collect(),
        );
        self.at_restart.push(
            held.iter()
                .map(|(k, (r, _))| {
                    let state = (r.status.clone(), r.error_code.clone(), r.verified);
                    (k.clone(), state)
                })
                .collect(),
        );
        let keep = (!fresh).then(|| self.rt.sims.clone());
        let devices = (&self.log, self.refusals.as_slice(), self.boards.as_slice());
        let epoch = self.epochs.len();
        self.rt = start(
            &self.plant,
            &self.url,
            devices,
            epoch,
            keep,
            &mut self.epochs,
        )
        .await;
    }

    /// Waits for every accepted command to end, for at most 120 s (virtual) after the last
    /// step: the ones that did not (or whose status failed), by id.
    async fn settle(&self, last_step_ms: i64) -> Vec<String> {
        let accepted: Vec<String> = self
            .submitted
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
                match self.rt.engine.status(id, Duration::from_secs(10)).await {
                    Ok(r) if r.status.is_terminal() => break,
                    Ok(_) if self.log.now_ms() - last_step_ms < 120_000 => continue,
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
        unsettled
    }

    /// Lets safe states and trailing stops happen, shuts the engine down and reads back
    /// everything the journal says, each event with the epoch that wrote it.
    async fn finish(self, unsettled: Vec<String>) -> Outcome {
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.rt.engine.shutdown().await;
        let held = read_journal(&self.url);
        let alarms = read_alarms(&self.url);
        let counts = &self.counts;
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
        let obs = self
            .log
            .obs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let submitted = self
            .submitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        Outcome {
            obs,
            epochs: self.epochs,
            submitted,
            journal,
            unsettled,
            at_restart: self.at_restart,
            alarms,
        }
    }
}
