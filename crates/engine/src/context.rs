//! State shared by the engine's tasks: devices, exclusive groups, live commands, the journal.

use crate::clock::Clock;
use crate::context::live::LiveCommand;
use crate::device::DeviceRuntime;
use closedloop_contract::Value;
use closedloop_journal::{CommandRow, Journal};
use closedloop_plant::Plant;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, watch};

mod group;
pub(crate) mod live;
mod taking;
#[cfg(test)]
mod tests;
pub use group::{Full, Group, QUEUE_CAPACITY};
pub(crate) use taking::Taking;

/// Something changed that a subscriber (MCP resource notifications) may care about.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A command's state or timeline changed.
    Command {
        /// Its id.
        command_id: String,
        /// Its device.
        device: String,
        /// Its status after the change.
        status: String,
        /// Announced by another gateway through the shared journal's feed: a command this
        /// gateway does not run (its trace span is that gateway's to export).
        elsewhere: bool,
    },
}

/// The engine's shared state.
pub struct Context {
    /// The validated plant.
    pub plant: Arc<Plant>,
    /// The durable journal.
    pub journal: Journal,
    /// Time.
    pub clock: Clock,
    /// Runtime of every device, by id.
    pub devices: BTreeMap<String, Arc<DeviceRuntime>>,
    groups: Mutex<HashMap<String, Arc<Group>>>,
    /// Commands being taken over from the journal here (`ownership/adopt.rs`): one taker at a time.
    taking: Mutex<std::collections::HashSet<String>>,
    live: Mutex<HashMap<String, Arc<LiveCommand>>>,
    /// The results of recently finished commands (`views/finished.rs`).
    pub finished: crate::views::finished::Finished,
    /// Change notifications (bounded: a slow subscriber misses changes, never blocks the engine).
    pub changes: broadcast::Sender<Change>,
    shutdown: watch::Sender<bool>,
    /// The standing alarms' states.
    pub alarms: crate::alarms::AlarmBoard,
    /// Which devices this gateway may write to (every one, unless several share the journal).
    pub ownership: crate::ownership::Ownership,
    /// The values this gateway publishes and the owners' it shows (`ownership/values.rs`).
    pub(crate) owners_values: crate::ownership::values::OwnersValues,
}

impl Context {
    /// Shared state for a started engine.
    pub fn new(
        plant: Arc<Plant>,
        journal: Journal,
        clock: Clock,
        devices: BTreeMap<String, Arc<DeviceRuntime>>,
        ownership: crate::ownership::Ownership,
    ) -> Context {
        Context {
            ownership,
            alarms: crate::alarms::AlarmBoard::new(&plant.alarms),
            plant,
            journal,
            clock,
            devices,
            groups: Mutex::new(HashMap::new()),
            taking: Mutex::new(Default::default()),
            live: Mutex::new(HashMap::new()),
            finished: crate::views::finished::Finished::default(),
            changes: broadcast::channel(1024).0,
            shutdown: watch::channel(false).0,
            owners_values: Default::default(),
        }
    }

    /// The exclusive group of this name, created on first use.
    pub fn group(&self, name: &str) -> Arc<Group> {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            g.entry(name.to_string())
                .or_insert_with(|| Arc::new(Group::new())),
        )
    }

    /// The usable values (`DeviceRuntime::usable_values`) of the devices an action reads
    /// (`Action::devices_read`): a command's scope costs what its expressions read, not the size
    /// of the plant, and holds no value that was not read well within its device's window.
    pub fn scope_for(
        &self,
        action: &closedloop_plant::Action,
    ) -> BTreeMap<String, BTreeMap<String, Value>> {
        let now_ms = self.clock.now_ms();
        action
            .devices_read()
            .into_iter()
            .filter_map(|id| {
                let d = self.devices.get(&id)?;
                Some((id, d.usable_values(&d.current(), now_ms)))
            })
            .collect()
    }

    /// Registers a live command.
    pub fn remember(&self, cmd: Arc<LiveCommand>) {
        let id = cmd.row().command_id;
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, cmd);
    }

    /// Registers a live command unless one of its id is live already; whether it did. A
    /// gateway's own fresh command and a take-over of it from the journal (`ownership/adopt.rs`) may
    /// race: one wins, and only that one runs.
    pub fn remember_new(&self, cmd: Arc<LiveCommand>) -> bool {
        let id = cmd.row().command_id;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.contains_key(&id) {
            return false;
        }
        live.insert(id, cmd);
        true
    }

    /// A live command by id.
    pub fn live(&self, id: &str) -> Option<Arc<LiveCommand>> {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// When the commands holding or waiting for `group` are expected to be done: the moment a
    /// command queued now may start (a queued command's estimate includes that wait).
    pub fn group_free_at(&self, group: &str) -> Option<tokio::time::Instant> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.values()
            .filter(|c| {
                let row = c.row();
                self.plant
                    .device(&row.device)
                    .and_then(|d| d.action(&row.action))
                    .is_some_and(|a| a.exclusive == group)
            })
            .filter_map(|c| c.expected_end())
            .max()
    }

    /// Drops a finished command from memory: from now on it is served from the journal, or
    /// from the recently finished results while it is among them.
    pub fn forget(&self, cmd: &LiveCommand) {
        let result = cmd.result();
        let id = result.command_id.clone();
        // At shutdown, or once its device's lease is lost, a command can be forgotten
        // unfinished: only an end is counted and kept (the journal says the rest).
        if result.status.is_terminal() {
            crate::metrics::ended(
                &result.device,
                &result.action,
                result.status,
                result.error_code.as_ref(),
                cmd.ack_to_end_ms(),
            );
            self.finished.keep(result);
        }
        self.let_go(cmd, &id);
    }

    /// Whether `cmd` is still the live command of its id `id` (not let go of because its
    /// lease was lost, nor superseded by a recovery under a later lease).
    pub(crate) fn holds(&self, id: &str, cmd: &LiveCommand) -> bool {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(id)
            .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), cmd))
    }

    /// Unmaps `cmd` — only this very command: a newer one of the same id (recovered or taken
    /// over under a later lease) stays.
    fn let_go(&self, cmd: &LiveCommand, id: &str) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live
            .get(id)
            .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), cmd))
        {
            live.remove(id);
        }
    }

    /// Journals a change to a command and announces it; whether the journal took it. While the
    /// journal fails, the command's task waits here, holding its device (see
    /// `LiveCommand::record`); at shutdown the error is logged, `false` comes back, and the
    /// journal keeps the last state it took, which the next start recovers.
    pub async fn record(
        &self,
        cmd: &LiveCommand,
        change: impl FnOnce(&mut CommandRow),
        events: Vec<(&str, serde_json::Value)>,
    ) -> bool {
        let events_logged: Vec<String> = events.iter().map(|(e, _)| e.to_string()).collect();
        let written = match self.fence_for(cmd) {
            Ok(fence) => {
                let stop = Some(self.shutdown_rx());
                let fence = fence.as_ref();
                cmd.record(&self.journal, &self.clock, change, events, stop, fence)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let row = cmd.row();
            if matches!(e, closedloop_journal::JournalError::Fenced { .. }) {
                tracing::warn!(request_id = %row.request_id, command_id = %row.command_id, error = %e,
                    "lease lost: the command is left to the device's new owner");
                self.drop_fenced(cmd);
            } else {
                tracing::error!(request_id = %row.request_id, command_id = %row.command_id, error = %e, "journal write failed");
            }
            return false;
        }
        let row = cmd.row();
        tracing::info!(
            request_id = %row.request_id,
            command_id = %row.command_id,
            device = %row.device,
            action = %row.action,
            status = %row.status,
            events = ?events_logged,
            "command updated"
        );
        let _ = self.changes.send(Change::Command {
            command_id: row.command_id,
            device: row.device,
            status: row.status,
            elsewhere: false,
        });
        true
    }

    /// Journals a change with the quick retries only, and returns the error: for start-up
    /// recovery, where no shutdown can end a wait, so a journal that takes no writes must fail
    /// the start loudly instead of hanging it.
    pub async fn record_or_fail(
        &self,
        cmd: &LiveCommand,
        change: impl FnOnce(&mut CommandRow),
        events: Vec<(&str, serde_json::Value)>,
    ) -> Result<(), closedloop_journal::JournalError> {
        let (_give_up, now) = tokio::sync::watch::channel(true);
        let fence = self.fence_for(cmd)?;
        cmd.record(
            &self.journal,
            &self.clock,
            change,
            events,
            Some(now),
            fence.as_ref(),
        )
        .await
    }

    /// The lease a journal write about `cmd` goes under: the one it was accepted (or recovered)
    /// under.
    fn fence_for(
        &self,
        cmd: &LiveCommand,
    ) -> Result<Option<closedloop_journal::Fence>, closedloop_journal::JournalError> {
        if !self.ownership.shared() {
            return Ok(None);
        }
        self.fence_at(&cmd.row().device, cmd.epoch())
    }

    /// The lease a journal write about `device` goes under (`Ownership::fence_at`; `epoch`
    /// `None`: whichever this gateway holds now): `None` without leases, the journal's
    /// `Fenced` refusal when this gateway no longer holds the device under that epoch.
    pub(crate) fn fence_at(
        &self,
        device: &str,
        epoch: Option<i64>,
    ) -> Result<Option<closedloop_journal::Fence>, closedloop_journal::JournalError> {
        self.ownership.fence_at(device, epoch).map_err(|not| {
            closedloop_journal::JournalError::Fenced {
                device: device.to_string(),
                owner: self.ownership.instance().to_string(),
                epoch: not.lapsed_epoch.unwrap_or(0),
            }
        })
    }

    /// Lets go of a command whose device this gateway lost, or that recovery under a later
    /// lease superseded: no longer live here, nothing kept as its result (the journal is the
    /// truth about it). Only this very command: a newer one of the same id stays.
    pub(crate) fn drop_fenced(&self, cmd: &LiveCommand) {
        self.let_go(cmd, &cmd.row().command_id);
    }

    /// Whether a command this gateway supervises is on `device` (a lease is never handed over
    /// under one).
    pub fn busy_on(&self, device: &str) -> bool {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .any(|c| c.row().device == device)
    }

    /// Adds a reading to a command's timeline if the journal takes it at once; a note never
    /// holds the command up (a failure is logged), unlike a change of state.
    pub async fn note(&self, cmd: &LiveCommand, events: Vec<(&str, serde_json::Value)>) {
        let written = match self.fence_for(cmd) {
            Ok(fence) => {
                cmd.record(
                    &self.journal,
                    &self.clock,
                    |_| {},
                    events,
                    None,
                    fence.as_ref(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            let row = cmd.row();
            tracing::warn!(request_id = %row.request_id, command_id = %row.command_id, error = %e, "timeline note not journaled");
        }
    }

    /// A receiver that turns true when the gateway shuts down.
    pub fn shutdown_rx(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Tells every task to shut down.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// The ids of the commands held in memory now.
    pub fn live_ids(&self) -> Vec<String> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.keys().cloned().collect()
    }

    /// How many commands are still held in memory.
    pub fn live_count(&self) -> usize {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Lowers a group's queue count (a command left the queue).
    pub fn dequeued(&self, group: &str) {
        let g = self.group(group);
        let _ = g
            .queued
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
}
