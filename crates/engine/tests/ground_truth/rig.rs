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
    let toml = case_toml(case);
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
    let refusals: Vec<setup::Refusal> = (case.devices.iter())
        .map(|d| (Arc::default(), crate::alarm::feedback_block(&d.model)))
        .collect();
    let boards: Vec<setup::BoardOf> = (case.devices.iter())
        .map(|d| d.push.map(|p| (p, Arc::new(Mutex::new(p.start)))))
        .collect();
    let mut rt = start(
        &plant,
        &url,
        (&log, &refusals, &boards),
        0,
        None,
        &mut epochs,
    )
    .await;
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
            Op::Refuse { device, on } => {
                refusals[*device]
                    .0
                    .store(*on, std::sync::atomic::Ordering::SeqCst);
                let state = rt.sims[*device].peek();
                let what = ObsKind::Fault(format!("refuse {on}"));
                log.push(epochs.len() - 1, *device, what, state);
            }
            Op::Board { device, mode } => {
                if let Some((_, cell)) = &boards[*device] {
                    *cell.lock().unwrap_or_else(|p| p.into_inner()) = *mode;
                }
                let state = rt.sims[*device].peek();
                let what = ObsKind::Fault(format!("board {mode:?}"));
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
                let devices = (&log, refusals.as_slice(), boards.as_slice());
                rt = start(&plant, &url, devices, epochs.len(), keep, &mut epochs).await;
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
    let alarms = read_alarms(&url);
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
        alarms,
    }
}
