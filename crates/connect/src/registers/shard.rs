//! Polling a hall of register devices without a task and a timer per device.
//!
//! The devices of one poll period are seated in *shards* of up to [`SHARD_SIZE`]: one task and
//! one interval per shard. Each tick issues a cycle for every member not reading already; a read
//! asked for ([`Seat::ask`]) is issued at once, or right after the cycle in flight, which was
//! issued before the ask and so cannot prove anything that happened after it. One device's
//! cycles never overlap, so its cycle numbers are published in order. The cycles of a shard run
//! concurrently inside its task: a silent device waits out its timeout without holding up the
//! others. A device that answers at once (`Driver::read_now`: a simulated one without latency,
//! loss or CRC faults) is cycled right in the shard's task, without a future, a timeout timer
//! or a boxed read of its own. With a task and a timer per device, 8,000 relays polled every 100 ms cost the
//! runtime 80,000 task wake-ups and timer entries a second.

use super::RegisterLink;
use super::poller::{Alive, Cycle};
use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::MissedTickBehavior;

/// What a device's cycles keep between them: its liveness evidence and a cycle's buffers.
pub(super) type Kept = Box<(Alive, Cycle)>;

/// Devices per shard: a tick's cycles of one shard run in one go on one worker thread, so a
/// shard is kept small enough (a fraction of a millisecond of simulated devices) not to hold
/// up whatever else that thread runs.
pub const SHARD_SIZE: usize = 256;

/// The shards of one plant's register devices, by poll period: where [`RegisterLink::new`]
/// seats each device.
#[derive(Default)]
pub struct Shards {
    /// The shard being filled, per poll period in ms.
    filling: BTreeMap<u64, Arc<Shard>>,
}

impl Shards {
    /// A seat in a shard of `poll_ms`, in a new shard when the last one is full.
    pub(super) fn seat(&mut self, poll_ms: u64) -> Seat {
        let poll_ms = poll_ms.max(1);
        let shard = self
            .filling
            .entry(poll_ms)
            .and_modify(|s| {
                if s.seats() >= SHARD_SIZE {
                    *s = Shard::new(poll_ms);
                }
            })
            .or_insert_with(|| Shard::new(poll_ms));
        let slot = shard.take_seat();
        Seat {
            shard: Arc::clone(shard),
            slot,
        }
    }
}

/// One device's place in a shard.
pub(super) struct Seat {
    shard: Arc<Shard>,
    slot: usize,
}

impl Seat {
    /// Asks for a cycle issued after this call. Before the device is seated (its reader's own
    /// first cycle in flight) the ask is answered by the cycle seating starts.
    pub fn ask(&self) {
        let mut state = self.shard.lock();
        if state.running {
            state.asked.push(self.slot);
            drop(state);
            self.shard.wake.notify_one();
        }
    }

    /// Polls `link` from its shard until the returned guard is dropped; `kept` is what its
    /// cycles so far left (the liveness evidence).
    pub fn join(&self, link: Arc<RegisterLink>, kept: Kept) -> Member<'_> {
        let spawn = {
            let mut state = self.shard.lock();
            if state.members[self.slot].replace(link).is_none() {
                state.joined += 1;
            }
            state.changed = true;
            state.arrived.push((self.slot, kept));
            // A cycle at once: a read asked for during the reader's own first cycle is answered
            // by one issued after it.
            state.asked.push(self.slot);
            !std::mem::replace(&mut state.running, true)
        };
        if spawn {
            tokio::spawn(Arc::clone(&self.shard).run());
        } else {
            self.shard.wake.notify_one();
        }
        Member(self)
    }
}

/// A device being polled; dropping it takes the device out of its shard (a shard left without
/// members ends its task).
pub(super) struct Member<'a>(&'a Seat);

impl Drop for Member<'_> {
    fn drop(&mut self) {
        let seat = self.0;
        let mut state = seat.shard.lock();
        if state.members[seat.slot].take().is_some() {
            state.joined -= 1;
        }
        state.changed = true;
        drop(state);
        seat.shard.wake.notify_one();
    }
}

/// Devices of one poll period, polled by one task.
pub(super) struct Shard {
    period: Duration,
    state: Mutex<State>,
    /// Wakes the task: a read asked for, or a member gone.
    wake: Notify,
}

/// What the devices' tasks and the shard's task share.
#[derive(Default)]
struct State {
    /// The link in each seat, while it is polled.
    members: Vec<Option<Arc<RegisterLink>>>,
    /// How many seats hold a link.
    joined: usize,
    /// A member joined or left since the shard's task last copied `members` into its slots.
    changed: bool,
    /// What the cycles of devices seated since the last look left, by seat.
    arrived: Vec<(usize, Kept)>,
    /// Seats whose device was asked for a read, in the order asked.
    asked: Vec<usize>,
    /// Whether the shard's task runs.
    running: bool,
}

/// What the shard's task keeps of each seat between cycles.
#[derive(Default)]
struct Slot {
    /// The seat's link while it is polled: the task's own copy of `members`, so a tick touches
    /// neither the lock nor a reference count per device.
    link: Option<Arc<RegisterLink>>,
    /// A cycle of this device is in flight.
    busy: bool,
    /// A read was asked for while it was: another cycle follows at once.
    again: bool,
    /// When the cycle in flight was issued: a tick that finds it running for a whole period or
    /// more is a poll missed (an asked read issued since the last tick is not: reads then come
    /// more often than the period, not less).
    issued: Option<tokio::time::Instant>,
    /// Its liveness evidence and a cycle's buffers, lent to the cycle in flight.
    kept: Option<Kept>,
}

impl Shard {
    fn new(poll_ms: u64) -> Arc<Shard> {
        Arc::new(Shard {
            period: Duration::from_millis(poll_ms),
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        })
    }

    /// The state (its lock is never held across an await, so a poisoned one is still sound).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn seats(&self) -> usize {
        self.lock().members.len()
    }

    fn take_seat(&self) -> usize {
        let mut state = self.lock();
        state.members.push(None);
        state.members.len() - 1
    }

    /// The shard's task: a cycle per member each tick, asked reads at once, until no member
    /// is left.
    async fn run(self: Arc<Self>) {
        let _running = Running(&self);
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut slots: Vec<Slot> = Vec::new();
        let mut flying = FuturesUnordered::new();
        // The seats asked for a read, taken under the lock and cycled outside it (a cycle
        // answered at once runs right here): kept from turn to turn.
        let mut asked: Vec<usize> = Vec::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    settle(&mut self.lock(), &mut slots);
                    for (slot, s) in slots.iter_mut().enumerate() {
                        missed(s, self.period);
                        flying.extend(start(s, slot));
                    }
                }
                () = self.wake.notified() => {
                    let mut state = self.lock();
                    settle(&mut state, &mut slots);
                    std::mem::swap(&mut asked, &mut state.asked);
                    drop(state);
                    for slot in asked.drain(..) {
                        let s = &mut slots[slot];
                        if s.busy {
                            s.again = s.link.is_some();
                        } else {
                            flying.extend(start(s, slot));
                        }
                    }
                }
                Some(done) = flying.next() => {
                    // Every cycle that has ended, before going back to the select: in-process
                    // devices end a whole tick's cycles at once, and a turn of the select per
                    // cycle (a timer and a `Notify` registered again each time) cost more than
                    // the cycles themselves. A cycle still in flight wakes the task as before:
                    // the select polls `flying` again with the task's waker.
                    let mut next = Some(done);
                    while let Some((slot, kept)) = next {
                        let s: &mut Slot = &mut slots[slot];
                        s.busy = false;
                        s.kept = Some(kept);
                        if std::mem::take(&mut s.again) {
                            // The member may have left while its cycle ran.
                            settle(&mut self.lock(), &mut slots);
                            flying.extend(start(&mut slots[slot], slot));
                        }
                        next = flying.next().now_or_never().flatten();
                    }
                }
            }
            if self.ended() {
                return;
            }
        }
    }

    /// True once no member is left: the task ends, dropping the cycles still in flight (a
    /// member that leaves while others stay lets its cycle in flight finish). A device seated
    /// later starts the task again.
    fn ended(&self) -> bool {
        let mut state = self.lock();
        // Under the lock that seating takes: a device seated from now on starts a new task.
        state.running = state.joined > 0;
        !state.running
    }
}

/// Marks the shard's task stopped when a cycle panics in it: its devices then read offline
/// (nothing answers for them) rather than asks piling up for a task that is gone.
struct Running<'a>(&'a Shard);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut state = self.0.lock();
            state.running = false;
            state.asked.clear();
            tracing::error!(
                devices = state.joined,
                "a register poll shard's task panicked; its devices are no longer read"
            );
        }
    }
}

/// A slot for every seat, each member's link in its slot, and what arriving devices' cycles
/// left in theirs.
fn settle(state: &mut State, slots: &mut Vec<Slot>) {
    slots.resize_with(state.members.len(), Slot::default);
    if std::mem::take(&mut state.changed) {
        for (s, member) in slots.iter_mut().zip(&state.members) {
            s.link.clone_from(member);
        }
    }
    for (slot, kept) in state.arrived.drain(..) {
        slots[slot].kept = Some(kept);
    }
}

/// Counts a tick at which the member in `slot` was still reading a cycle issued a whole
/// `period` ago or more (`Link::polls_missed`).
fn missed(s: &Slot, period: Duration) {
    let late = s.busy && s.issued.is_some_and(|t| t.elapsed() >= period);
    if let Some(link) = s.link.as_ref().filter(|_| late) {
        link.missed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A cycle of the member in `slot` unless one is in flight or the seat is empty: run here when
/// the device answers at once (an in-process device; nothing to wait for), else returned to be
/// awaited — the slot is busy until it ends.
fn start(s: &mut Slot, slot: usize) -> Option<impl Future<Output = (usize, Kept)> + Send + use<>> {
    let link = s.link.as_ref().filter(|_| !s.busy)?;
    let mut kept = s.kept.take().unwrap_or_default();
    let (alive, got) = &mut *kept;
    if link.timed_cycle_now(alive, got) {
        s.kept = Some(kept);
        return None;
    }
    s.busy = true;
    s.issued = Some(tokio::time::Instant::now());
    let link = Arc::clone(link);
    Some(async move {
        let (alive, got) = &mut *kept;
        link.timed_cycle(alive, got).await;
        (slot, kept)
    })
}

#[cfg(test)]
mod tests;
