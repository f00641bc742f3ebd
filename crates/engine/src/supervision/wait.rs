//! The supervision loop of a running command: everything it waits on (the device's every
//! sample, other devices' samples, readback and read-on-request timers, the settle read, the
//! deadline, standing alarms, a dead-man keepalive, cancel and shutdown), set up once in
//! [`Watch`]; each turn takes the first thing that happens and turns it into a machine event.
//!
//! # Invariants
//! - Every sample is judged, not only the latest: a short `fail_when` pulse between two
//!   snapshots a watch channel would merge must still fail the command.
//! - At the deadline, samples already delivered are judged before the verdict.

use crate::device::Snapshot;
use crate::machine::profile::AsCheck;
use crate::machine::{Check, Event};
use crate::supervision::{Supervisor, shutdown_signal};
use closedloop_link::Reporting;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

/// What woke the supervision loop.
enum Wake {
    Snapshot(Snapshot),
    Readback,
    Event(Event),
}

/// What one turn of the loop found.
enum Turn {
    /// Something to judge or feed to the machine.
    Wake(Wake),
    /// Nothing that concerns the command (a timer that only asked for a read, an alarm change
    /// that blocks nothing): wait again.
    Again,
    /// The device's sample stream closed: the engine is going away.
    Stop,
}

/// Everything a supervising command waits on, set up once when supervision starts.
struct Watch {
    /// The device's every sample.
    samples: broadcast::Receiver<Snapshot>,
    /// Forwarders that wake `others` when a device the criteria read delivers a sample.
    _forwarders: Option<JoinSet<()>>,
    others: Option<mpsc::Receiver<()>>,
    shutdown: watch::Receiver<bool>,
    deadline: Instant,
    /// Readback verification: the written blocks are read back every `poll_every`.
    readback: bool,
    poll_every: Duration,
    next_readback: Instant,
    /// A device that reports changes only (OPC UA) never sends again a value the write itself
    /// set: its nodes are read every `poll_every` while the command runs, and reads issued
    /// after the acknowledgement are fresh evidence.
    reads_on_request: bool,
    next_read: Instant,
    /// A read asked for `expect_s` after the ack, when the action should be done: without it
    /// the confirmation waits for the next poll (up to a whole period late), and "already so",
    /// which confirms only on a read taken then, would wait for a device that reports changes
    /// only to send a value that did not change.
    settle_poll: Option<Instant>,
    keepalive: Option<Duration>,
    alarms: watch::Receiver<u64>,
    /// Whether a standing alarm may block this device.
    watched: bool,
}

impl Supervisor {
    /// Judges fresh reads until the machine reaches a terminal status.
    pub(crate) async fn supervise(&mut self) {
        let mut w = self.watches();
        while self.machine.is_supervising() {
            // Let go of (its device's lease lost): the journal and the new owner say the rest,
            // and nothing here may read on for it.
            if self.ctx.ownership.shared() && !self.ctx.holds(&self.command_id, &self.cmd) {
                return;
            }
            let wake = match self.next_wake(&mut w).await {
                Turn::Wake(wake) => wake,
                Turn::Again => continue,
                Turn::Stop => return,
            };
            let event = match wake {
                Wake::Snapshot(snap) => match self.judge(&snap).await {
                    Some(e) => e,
                    None => continue,
                },
                Wake::Readback => match self.readback().await {
                    Some(e) => e,
                    None => continue,
                },
                Wake::Event(Event::Deadline { .. }) if !w.readback => {
                    if self.judge_delivered(&mut w.samples).await {
                        continue;
                    }
                    let answering = self.answering();
                    Event::Deadline { answering }
                }
                Wake::Event(Event::AlarmRaised { name, detail }) => {
                    // Journaled ahead of the stop it triggers (`Supervisor::deciding`).
                    let why = json!({"name": name, "why": detail});
                    self.deciding = Some(("alarm", why));
                    Event::AlarmRaised { name, detail }
                }
                Wake::Event(e) => e,
            };
            let was_shutdown = event == Event::Shutdown;
            let fx = self.feed(event).await;
            if was_shutdown && fx.is_empty() {
                // No cancel plan: leave it `running` for the next start to supervise.
                return;
            }
        }
    }

    /// Sets up what the loop waits on.
    fn watches(&self) -> Watch {
        let others: BTreeSet<String> = self.criterion_refs().into_iter().map(|(d, _)| d).collect();
        let (forwarders, others) =
            match crate::supervision::others::wakes(&self.ctx, self.dev.id(), &others) {
                Some((set, rx)) => (Some(set), Some(rx)),
                None => (None, None),
            };
        let readback = self.action.verification.as_check() == Check::Readback;
        let poll_every = Duration::from_millis(self.dev.spec.poll_ms.max(1));
        let settle_ms = self.settle_until_ms - self.ctx.clock.now_ms();
        let mut alarms = self.ctx.alarms.watch();
        // An alarm raised between dispatch's check and now is seen on the first turn.
        alarms.mark_changed();
        let watched = self
            .ctx
            .plant
            .alarms
            .iter()
            .any(|a| a.blocks.iter().any(|d| d == self.dev.id()));
        Watch {
            samples: self.dev.samples(),
            _forwarders: forwarders,
            others,
            shutdown: self.ctx.shutdown_rx(),
            deadline: self.deadline.unwrap_or_else(Instant::now),
            readback,
            poll_every,
            next_readback: Instant::now(),
            reads_on_request: self.dev.reporting() == Reporting::ChangesOnly && !readback,
            next_read: Instant::now() + poll_every,
            // Recovered commands count from a journaled ack time: a millisecond more there.
            settle_poll: (settle_ms >= 0).then(|| {
                self.settle_at
                    .unwrap_or_else(|| Instant::now() + Duration::from_millis(settle_ms as u64 + 1))
            }),
            keepalive: self.action.keepalive_s.map(Duration::from_secs_f64),
            alarms,
            watched,
        }
    }

    /// Waits for the first thing that concerns the command.
    async fn next_wake(&mut self, w: &mut Watch) -> Turn {
        let keepalive = w.keepalive.unwrap_or(Duration::ZERO);
        tokio::select! {
            sample = w.samples.recv(), if !w.readback => match sample {
                Ok(snap) => Turn::Wake(Wake::Snapshot(snap)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let row = self.cmd.row();
                    tracing::warn!(request_id = %row.request_id, command_id = %row.command_id,
                                   device = %self.dev.id(), missed = n, "supervisor fell behind the device's samples");
                    Turn::Wake(Wake::Snapshot(self.dev.snapshot()))
                }
                Err(broadcast::error::RecvError::Closed) => Turn::Stop,
            },
            Some(()) = async { w.others.as_mut()?.recv().await }, if w.others.is_some() && !w.readback => {
                Turn::Wake(Wake::Snapshot(self.dev.snapshot()))
            }
            _ = sleep_until(w.next_readback), if w.readback => {
                w.next_readback = Instant::now() + w.poll_every;
                Turn::Wake(Wake::Readback)
            }
            _ = sleep_until(w.next_read), if w.reads_on_request => {
                w.next_read = Instant::now() + w.poll_every;
                self.dev.poll_now();
                Turn::Again
            }
            _ = sleep_until(w.settle_poll.unwrap_or(w.deadline)), if w.settle_poll.is_some() => {
                w.settle_poll = None;
                self.dev.poll_now();
                Turn::Again
            }
            _ = sleep_until(w.deadline) => {
                let answering = self.answering();
                Turn::Wake(Wake::Event(Event::Deadline { answering }))
            }
            // A standing alarm that blocks this device: stop, whatever the command's state.
            changed = w.alarms.changed(), if w.watched => match changed {
                Err(_) => Turn::Again,
                Ok(()) => match self.ctx.alarms.blocking(&self.ctx.plant.alarms, self.dev.id()) {
                    Some((name, detail)) => Turn::Wake(Wake::Event(Event::AlarmRaised { name, detail })),
                    None => Turn::Again,
                },
            },
            // A dead-man action: due when its caller last asked plus keepalive_s.
            _ = sleep_until(self.cmd.renewed_at() + keepalive), if w.keepalive.is_some() => {
                match self.cmd.renewed_at() + keepalive <= Instant::now() {
                    true => Turn::Wake(Wake::Event(Event::KeepaliveLapsed)),
                    false => Turn::Again,
                }
            }
            // Its renewals can no longer come (the session that started it ended): a lapse now.
            _ = self.cmd.lapsed(), if w.keepalive.is_some() => {
                Turn::Wake(Wake::Event(Event::KeepaliveLapsed))
            }
            _ = self.cmd.cancelled() => Turn::Wake(Wake::Event(Event::CancelRequested)),
            _ = shutdown_signal(&mut w.shutdown), if !self.shutdown_seen => {
                self.shutdown_seen = true;
                Turn::Wake(Wake::Event(Event::Shutdown))
            }
        }
    }

    /// At the deadline, judges the samples already delivered first: a read that came back in
    /// the same instant as the deadline is evidence the verdict must not ignore (a heater that
    /// warmed, read at the deadline, did not "never move"). Returns true when one of them ended
    /// the command.
    async fn judge_delivered(&mut self, samples: &mut broadcast::Receiver<Snapshot>) -> bool {
        while let Ok(snap) = samples.try_recv() {
            if let Some(event) = self.judge(&snap).await {
                self.feed(event).await;
                if !self.machine.is_supervising() {
                    return true;
                }
            }
        }
        false
    }
}
