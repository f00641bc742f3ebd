//! Exclusive groups: one actuating command at a time per group, the rest waiting in FIFO order
//! in a bounded queue (`exclusive`, `queue`, `queue_timeout_s` in the plant file).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many commands may wait for one exclusive group; one more is rejected `DEVICE_BUSY`.
pub const QUEUE_CAPACITY: usize = 32;

/// One exclusive group: one actuating command at a time, the rest wait in FIFO order.
pub struct Group {
    sem: Arc<Semaphore>,
    /// Commands accepted and waiting for the group.
    pub queued: AtomicUsize,
    /// Serialises [`Group::reserve`]: its check and its increment are one step, so two
    /// concurrent `queue = false` submissions can never both find the group free.
    admission: Mutex<()>,
}

/// Why a group took no more commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Busy, and the action does not queue.
    Busy,
    /// [`QUEUE_CAPACITY`] commands already wait.
    Queue,
}

impl Group {
    pub(super) fn new() -> Group {
        Group {
            sem: Arc::new(Semaphore::new(1)),
            queued: AtomicUsize::new(0),
            admission: Mutex::new(()),
        }
    }

    /// Takes a place in the queue, in one step with the check: refused when the group is busy
    /// (held or with commands waiting) and `queue` is false, or when the queue is full. The
    /// place is given back by [`Context::dequeued`].
    pub fn reserve(&self, queue: bool) -> Result<(), Full> {
        let _one_at_a_time = self.admission.lock().unwrap_or_else(|p| p.into_inner());
        let waiting = self.queued.load(Ordering::SeqCst);
        if !queue && (self.is_busy() || waiting > 0) {
            return Err(Full::Busy);
        }
        if waiting >= QUEUE_CAPACITY {
            return Err(Full::Queue);
        }
        self.queued.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Waits for the group (FIFO). `None` only if the semaphore was closed.
    pub async fn acquire(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.sem).acquire_owned().await.ok()
    }

    /// Takes the group if it is free right now.
    pub fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.sem).try_acquire_owned().ok()
    }

    /// Whether a command holds the group.
    pub fn is_busy(&self) -> bool {
        self.sem.available_permits() == 0
    }
}
