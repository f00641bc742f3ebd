//! A command while the engine holds it in memory: its journal row, its timeline, and the
//! handles that let callers wait on it and cancel it.

use crate::clock::Clock;
use crate::contract::Status;
use crate::views::result::CommandResult;
use closedloop_journal::{CommandRow, EventRow, Journal, JournalError};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// How many times a failed journal write is retried (50, 100, 200, 400, 800 ms apart).
const JOURNAL_RETRIES: u32 = 5;

/// The in-memory mirror of one journaled command.
///
/// # Invariants
/// `row` and `events` only ever change *after* the same change was committed to the journal, so
/// nothing a caller reads from memory can be lost by a crash.
pub struct LiveCommand {
    state: Mutex<LiveState>,
    version: watch::Sender<u64>,
    cancel: Notify,
    cancel_requested: AtomicBool,
    /// Wakes the supervisor of a dead-man action whose renewals can no longer come
    /// ([`LiveCommand::lapse`]).
    lapse: Notify,
    /// The epoch of the device lease it was accepted or recovered under (several gateways on
    /// one journal): its writes go under that lease only, never under a later one.
    epoch: Option<i64>,
}

struct LiveState {
    row: CommandRow,
    events: Vec<EventRow>,
    expected_end: Option<Instant>,
    /// The deadline, once dispatched (or recovered).
    deadline: Option<Instant>,
    /// The last time a caller asked about the command (a dead-man action's renewal).
    renewed: Instant,
    /// Why the dead-man action lapsed before its time, when it did (the session that started
    /// it ended).
    lapsed: Option<String>,
}

impl LiveCommand {
    /// Wraps an already-journaled row, accepted or recovered under the device lease of `epoch`
    /// (`None` without leases).
    pub fn new(row: CommandRow, events: Vec<EventRow>, epoch: Option<i64>) -> LiveCommand {
        LiveCommand {
            state: Mutex::new(LiveState {
                row,
                events,
                expected_end: None,
                deadline: None,
                renewed: Instant::now(),
                lapsed: None,
            }),
            version: watch::channel(0).0,
            cancel: Notify::new(),
            cancel_requested: AtomicBool::new(false),
            lapse: Notify::new(),
            epoch,
        }
    }

    /// The epoch of the device lease it runs under, when there are leases.
    pub fn epoch(&self) -> Option<i64> {
        self.epoch
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        // A poisoned lock only means a panic elsewhere; the data is still the journal's mirror.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the current row.
    pub fn row(&self) -> CommandRow {
        self.lock().row.clone()
    }

    /// Milliseconds from the device's first acknowledgement to the last journaled change, when
    /// the device acknowledged: for a finished command, its time to truth.
    pub(crate) fn ack_to_end_ms(&self) -> Option<i64> {
        let s = self.lock();
        let ack = s.events.iter().find(|e| e.event == "device_ack")?.at_ms;
        Some(s.events.last()?.at_ms - ack)
    }

    /// The current status.
    pub fn status(&self) -> Status {
        Status::parse(&self.lock().row.status).unwrap_or(Status::Failed)
    }

    /// The result object now.
    pub fn result(&self) -> CommandResult {
        let s = self.lock();
        let now = Instant::now();
        let remaining = match s.expected_end {
            Some(end) => Some(end.saturating_duration_since(now).as_secs_f64()),
            None => Some(0.0),
        };
        let deadline_in = s
            .deadline
            .map(|d| d.saturating_duration_since(now).as_secs_f64());
        CommandResult::from_rows(&s.row, &s.events, remaining).with_deadline_in(deadline_in)
    }

    /// Sets the deadline the supervisor holds it to (at dispatch, or at recovery).
    pub fn set_deadline(&self, deadline: Instant) {
        self.lock().deadline = Some(deadline);
    }

    /// Sets when the action is expected to be done (dispatch + expect_s).
    pub fn set_expected_end(&self, end: Instant) {
        self.lock().expected_end = Some(end);
    }

    /// A caller asked about the command: a dead-man action keeps running.
    pub fn renew(&self) {
        self.lock().renewed = Instant::now();
    }

    /// Renews it when `asker` is who started it (the journaled caller): a status poll by a
    /// read-only token once kept another agent's jog running for 17 s. Whether it renewed.
    pub fn renew_by(&self, asker: &str) -> bool {
        let mut s = self.lock();
        let mine = s.row.caller.as_deref() == Some(asker);
        if mine {
            s.renewed = Instant::now();
        }
        mine
    }

    /// When a caller last asked about the command.
    pub fn renewed_at(&self) -> Instant {
        self.lock().renewed
    }

    /// Its renewals can no longer come (`why`: the MCP session that started it ended): a
    /// dead-man action ends now as if its keepalive had run out. The first reason stays.
    pub fn lapse(&self, why: &str) {
        self.lock().lapsed.get_or_insert_with(|| why.to_string());
        // A stored permit: a supervisor not yet waiting (still dispatching) sees it on its first turn.
        self.lapse.notify_one();
    }

    /// Why the command lapsed before its keepalive ran out, if it did.
    pub fn lapse_reason(&self) -> Option<String> {
        self.lock().lapsed.clone()
    }

    /// Resolves when [`LiveCommand::lapse`] was called.
    pub async fn lapsed(&self) {
        self.lapse.notified().await;
    }

    /// When the command is expected to end, if known.
    pub fn expected_end(&self) -> Option<Instant> {
        self.lock().expected_end
    }

    /// Applies `change` to a copy of the row, journals it with `events`, then publishes it.
    ///
    /// A failing journal is retried quickly a few times, then every second for as long as it
    /// takes: the change is not shown to anyone until it is on disk, and the command's task waits
    /// here — holding its device, so nothing else is sent to it — rather than go on unrecorded.
    /// Only a shutdown (`stop` turning true) gives up, with the error; the next start recovers
    /// the command from what the journal holds. With `stop = None` the entry is a note (a
    /// reading on the timeline): tried once, and on failure left out.
    pub async fn record(
        &self,
        journal: &Journal,
        clock: &Clock,
        change: impl FnOnce(&mut CommandRow),
        events: Vec<(&str, serde_json::Value)>,
        mut stop: Option<watch::Receiver<bool>>,
        fence: Option<&closedloop_journal::Fence>,
    ) -> Result<(), JournalError> {
        let now = clock.now_ms();
        let mut row = self.row();
        change(&mut row);
        row.updated_at_ms = now;
        let events: Vec<EventRow> = events
            .into_iter()
            .map(|(e, data)| EventRow {
                at_ms: now,
                event: e.to_string(),
                data,
            })
            .collect();
        // A transient failure (a locked database, a full disk being cleared) must not leave the
        // command's state unrecorded: retry a few times before giving up with the error.
        let mut attempt = 0u32;
        loop {
            let written = match fence {
                Some(f) => journal.update_fenced(&row, &events, f).await,
                None => journal.update(&row, &events).await,
            };
            match written {
                Ok(()) => break,
                // The lease is gone: retrying cannot help, and the new owner takes over.
                Err(e @ JournalError::Fenced { .. }) => return Err(e),
                // A note (`stop` is None) is tried once: it must never hold the command up.
                Err(e) if stop.is_none() => return Err(e),
                Err(e) if attempt < JOURNAL_RETRIES => {
                    attempt += 1;
                    tracing::warn!(command_id = %row.command_id, error = %e, attempt, "journal write failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                }
                Err(e) => {
                    if attempt == JOURNAL_RETRIES || attempt.is_multiple_of(30) {
                        tracing::error!(command_id = %row.command_id, error = %e,
                            "journal unavailable; holding the command (and its device) until it takes the write");
                    }
                    attempt += 1;
                    let Some(stop) = stop.as_mut() else {
                        return Err(e);
                    };
                    if *stop.borrow() {
                        return Err(e);
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                        _ = stop.wait_for(|s| *s) => return Err(e),
                    }
                }
            }
        }
        {
            let mut s = self.lock();
            s.row = row;
            s.events.extend(events);
        }
        self.version.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Waits until the status is terminal or `until` passes.
    pub async fn wait_terminal(&self, until: Instant) {
        let mut rx = self.version.subscribe();
        loop {
            if self.status().is_terminal() {
                return;
            }
            if tokio::time::timeout_at(until, rx.changed()).await.is_err() {
                return;
            }
        }
    }

    /// A receiver that wakes on every recorded change.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Asks the supervisor to cancel. Idempotent.
    pub fn request_cancel(&self) {
        if !self.cancel_requested.swap(true, Ordering::SeqCst) {
            self.cancel.notify_one();
        }
    }

    /// Resolves when a cancel was requested.
    pub async fn cancelled(&self) {
        self.cancel.notified().await;
    }
}
