//! The engine's API for the next layer (MCP, CLI, tests): submit, status with a bounded wait,
//! cancel, list, device state, and a stream of changes.

use crate::EngineError;
use crate::context::{Change, Context};
use crate::device::DeviceRuntime;
use crate::supervision::Supervisor;
use crate::views::result::CommandResult;
use closedloop_journal::{Journal, ListFilter};
use closedloop_link::Links;
use closedloop_plant::Plant;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, broadcast};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Longest wait a caller may ask for (`wait_s` is capped here).
pub const MAX_WAIT: Duration = Duration::from_secs(10);

/// A running engine.
pub struct Engine {
    pub(crate) ctx: Arc<Context>,
    stop_pollers: Arc<Notify>,
    pollers: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// The task writing alarms' raises and clears to the journal: awaited (bounded) at shutdown
    /// once the watchers are stopped, so the rows still waiting are written before it closes.
    alarm_rows: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// One lock per idempotency key in use: the lookup and the insert of a keyed submission happen
    /// under it, so two concurrent calls with one key can never create two commands.
    pub(crate) keys:
        std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

impl Engine {
    /// Starts pollers for every device, recovers unfinished commands from the journal, and
    /// returns once the engine takes submissions. `links` must hold one link per device
    /// (`closedloop_connect::Drivers::open` builds them from the plant).
    pub async fn start(
        plant: Arc<Plant>,
        journal: Journal,
        links: Links,
    ) -> Result<Engine, EngineError> {
        Engine::start_as(plant, journal, links, crate::ownership::host_name()).await
    }

    /// [`Engine::start`] as the gateway instance `instance`. On a journal several gateways
    /// share (PostgreSQL), it owns no device until [`Engine::keep_leases`] claims them, and it
    /// recovers each device's unfinished commands when it takes the device's lease, not here.
    pub async fn start_as(
        plant: Arc<Plant>,
        journal: Journal,
        links: Links,
        instance: String,
    ) -> Result<Engine, EngineError> {
        let lease = Duration::from_secs_f64(plant.server.lease_s);
        let ownership = crate::ownership::Ownership::new(instance, lease, journal.leases());
        let Links { clock, map } = links;
        let mut devices = BTreeMap::new();
        for d in &plant.devices {
            let link = map
                .get(&d.id)
                .ok_or_else(|| EngineError::NoDriver(d.id.clone()))?;
            devices.insert(
                d.id.clone(),
                DeviceRuntime::new(Arc::clone(d), Arc::clone(link)),
            );
        }
        let ctx = Arc::new(Context::new(plant, journal, clock, devices, ownership));
        let stop_pollers = Arc::new(Notify::new());
        let mut pollers = ctx
            .devices
            .values()
            .map(|d| d.spawn_reader(Arc::clone(&stop_pollers)))
            .collect::<Vec<_>>();
        let alarms = crate::alarms::watch::spawn(&ctx, &stop_pollers);
        pollers.extend(alarms.groups);
        let engine = Engine {
            ctx,
            stop_pollers,
            pollers: std::sync::Mutex::new(pollers),
            alarm_rows: std::sync::Mutex::new(alarms.journal),
            keys: std::sync::Mutex::new(std::collections::HashMap::new()),
            tasks: std::sync::Mutex::new(Vec::new()),
        };
        engine.recover().await?;
        Ok(engine)
    }

    /// Runs a command's supervisor; a panic in it ends the command (`supervision/crash.rs`).
    pub(crate) fn spawn(&self, sup: Supervisor) {
        let remains = crate::supervision::crash::Remains::of(&sup);
        self.spawn_task(crate::supervision::crash::ended_if_it_panics(
            remains,
            sup.run(),
        ));
    }

    /// Runs a command's task, tracked so that shutdown waits for it.
    pub(crate) fn spawn_task(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = tokio::spawn(task);
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(handle);
    }

    /// The journal's writes and commits so far (see `Journal::write_counts`): how many writes
    /// one fsync served.
    pub fn journal_write_counts(&self) -> (u64, u64) {
        self.ctx.journal.write_counts()
    }

    /// The clock that stamps this engine's timelines and journal rows: whoever must map those
    /// wall-clock milliseconds back to instants (a test on a paused clock) uses this one rather
    /// than reading the wall clock again at another moment.
    pub fn clock(&self) -> crate::clock::Clock {
        self.ctx.clock
    }

    /// This gateway's instance name and lease length when several gateways share the journal
    /// (a PostgreSQL journal: leases in use); `None` for a journal this gateway owns whole.
    pub fn shared_instance(&self) -> Option<(&str, std::time::Duration)> {
        let o = &self.ctx.ownership;
        o.shared().then(|| (o.instance(), o.lease))
    }

    /// Where confirmations are kept when several gateways share the journal (PostgreSQL), so a
    /// token one gateway issues is redeemed at any; `None` for a journal this gateway owns whole.
    pub fn shared_confirmations(&self) -> Option<closedloop_journal::SharedConfirmations> {
        self.ctx.journal.confirmations()
    }

    /// The plant this engine serves.
    pub fn plant(&self) -> &Plant {
        &self.ctx.plant
    }

    /// The result object of a command, waiting up to `wait` (capped at [`MAX_WAIT`]) for a
    /// terminal status. `UnknownCommand` when no command has this id.
    pub async fn status(
        &self,
        command_id: &str,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        if let Some(cmd) = self.ctx.live(command_id) {
            // Asking about a command keeps a dead-man action (`keepalive_s`) running.
            cmd.renew();
            if !wait.is_zero() {
                cmd.wait_terminal(Instant::now() + wait.min(MAX_WAIT)).await;
            }
            return Ok(cmd.result());
        }
        if let Some(done) = self.ctx.finished.get(command_id) {
            return Ok(done);
        }
        self.renew_elsewhere_by(command_id, None).await;
        if self.ctx.ownership.shared() && !wait.is_zero() {
            // Another gateway may be running it: wait on the journal.
            return self.follow(command_id, wait).await;
        }
        self.read_journal(command_id).await
    }

    /// [`Engine::status`] asked by the caller named `asker` (a token's name): a dead-man action
    /// (`keepalive_s`) is renewed only when `asker` started it — anyone else who may read it
    /// reads it as [`Engine::peek`] does. The MCP layer asks through here.
    pub async fn status_by(
        &self,
        command_id: &str,
        wait: Duration,
        asker: &str,
    ) -> Result<CommandResult, EngineError> {
        if let Some(cmd) = self.ctx.live(command_id) {
            cmd.renew_by(asker);
            if !wait.is_zero() {
                cmd.wait_terminal(Instant::now() + wait.min(MAX_WAIT)).await;
            }
            return Ok(cmd.result());
        }
        if let Some(done) = self.ctx.finished.get(command_id) {
            return Ok(done);
        }
        self.renew_elsewhere_by(command_id, Some(asker)).await;
        if self.ctx.ownership.shared() && !wait.is_zero() {
            return self.follow(command_id, wait).await;
        }
        self.read_journal(command_id).await
    }

    /// Whether `asker` started the command `command_id` (the journaled caller): who may renew
    /// a dead-man action. `UnknownCommand` when no command has this id.
    pub async fn started_by(&self, command_id: &str, asker: &str) -> Result<bool, EngineError> {
        if let Some(cmd) = self.ctx.live(command_id) {
            return Ok(cmd.row().caller.as_deref() == Some(asker));
        }
        match self.ctx.journal.get(command_id).await? {
            Some(row) => Ok(row.caller.as_deref() == Some(asker)),
            None => Err(EngineError::UnknownCommand(command_id.to_string())),
        }
    }

    /// The result object of a command as it stands, without renewing it: what a viewer (the
    /// operator page) reads. [`Engine::status`] counts as the caller still asking, which would
    /// keep a dead-man action (`keepalive_s`) running for as long as someone watches a page.
    pub async fn peek(&self, command_id: &str) -> Result<CommandResult, EngineError> {
        if let Some(cmd) = self.ctx.live(command_id) {
            return Ok(cmd.result());
        }
        if let Some(done) = self.ctx.finished.get(command_id) {
            return Ok(done);
        }
        self.read_journal(command_id).await
    }

    async fn read_journal(&self, command_id: &str) -> Result<CommandResult, EngineError> {
        let row = self
            .ctx
            .journal
            .get(command_id)
            .await?
            .ok_or_else(|| EngineError::UnknownCommand(command_id.into()))?;
        let events = self.ctx.journal.events(command_id).await?;
        // Not live but not terminal (its supervisor has not started yet): the time to its
        // journaled deadline is the honest estimate.
        let deadline_in = row
            .deadline_ms
            .map(|d| ((d - self.ctx.clock.now_ms()).max(0)) as f64 / 1000.0);
        let result = CommandResult::from_rows(&row, &events, deadline_in.or(Some(0.0)));
        Ok(result.with_deadline_in(deadline_in))
    }

    /// A receiver woken whenever the command changes (for progress notifications), if it is live.
    pub fn watch(&self, command_id: &str) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.ctx.live(command_id).map(|c| c.watch())
    }

    /// Asks for a command to be cancelled and returns its state once it ended — for an action
    /// with a cancel plan and `stopped_when`, once the device reads stopped — or when `wait`
    /// (capped at [`MAX_WAIT`]) ran out, whichever comes first.
    pub async fn cancel(
        &self,
        command_id: &str,
        wait: Duration,
    ) -> Result<CommandResult, EngineError> {
        let Some(cmd) = self.ctx.live(command_id) else {
            // Terminal (or unknown): terminal states never change. Unfinished and run by
            // another gateway (several on one journal): asked there (`ownership/handover.rs`).
            let now = self.read_journal(command_id).await?;
            if self.ctx.ownership.shared() && !now.status.is_terminal() {
                return self.cancel_elsewhere(command_id, wait).await;
            }
            return Ok(now);
        };
        cmd.request_cancel();
        cmd.wait_terminal(Instant::now() + wait.min(MAX_WAIT)).await;
        Ok(cmd.result())
    }

    /// Commands, newest first, without their timelines.
    pub async fn list(
        &self,
        device: Option<&str>,
        status: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CommandResult>, EngineError> {
        let filter = ListFilter {
            device: device.map(str::to_string),
            status: status.map(str::to_string),
            limit: limit.clamp(1, 1000),
        };
        let rows = self.ctx.journal.list(&filter).await?;
        Ok(rows
            .iter()
            .map(|r| match self.ctx.live(&r.command_id) {
                Some(live) => CommandResult {
                    timeline: vec![],
                    ..live.result()
                },
                None => CommandResult::from_rows(r, &[], None),
            })
            .collect())
    }

    /// Change notifications; a receiver that falls more than 1024 changes behind loses the oldest.
    pub fn changes(&self) -> broadcast::Receiver<Change> {
        self.ctx.changes.subscribe()
    }

    /// Shuts down: queued commands end `INTERRUPTED` (never sent late), running motion with a
    /// cancel plan gets its stop written, running commands without one stay `running` in the
    /// journal for the next start. Waits (bounded) for the supervisors, then stops the pollers.
    pub async fn shutdown(&self) {
        self.ctx.begin_shutdown();
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let all = futures_join(tasks);
        let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
        self.stop_pollers.notify_waiters();
        for p in self
            .pollers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            p.abort();
        }
        let rows = self
            .alarm_rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(rows) = rows {
            let _ = tokio::time::timeout(Duration::from_secs(5), rows).await;
        }
        self.ctx.journal.close().await;
    }

    /// How many commands are held in memory (accepted or running, or finishing a safe state).
    pub fn live_count(&self) -> usize {
        self.ctx.live_count()
    }
}

async fn futures_join(tasks: Vec<JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}
