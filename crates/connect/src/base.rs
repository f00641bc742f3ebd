//! What every link keeps whatever its protocol: the device's declaration, the channel its
//! samples go out on, the clock they are stamped with, and when reading began.

use closedloop_link::{Clock, Liveness, Snapshot, SnapshotTx, judge_liveness};
use closedloop_plant::Device;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The part of a link every protocol shares.
pub(crate) struct Base {
    /// The plant's declaration.
    pub spec: Arc<Device>,
    /// Where samples are published.
    pub tx: SnapshotTx,
    /// The clock samples are stamped with (the engine's).
    pub clock: Clock,
    /// When this link was created: a device silent for a whole window since then is offline.
    pub started: Instant,
    /// The device's request timeout.
    pub timeout: Duration,
}

impl Base {
    pub fn new(spec: Arc<Device>, clock: Clock) -> Base {
        Base {
            timeout: Duration::from_millis(spec.request_timeout_ms()),
            spec,
            tx: SnapshotTx::new(Snapshot::before_first_read()),
            clock,
            started: Instant::now(),
        }
    }

    /// Device id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The latest sample as published.
    pub fn snapshot(&self) -> Snapshot {
        self.tx.borrow().clone()
    }

    /// The latest sample with its liveness judged now.
    pub fn current(&self) -> Snapshot {
        let mut snap = self.snapshot();
        snap.liveness = self.judge_liveness(&snap);
        snap
    }

    /// [`Base::current`]'s liveness alone: the sample is looked at where it lies, not copied.
    pub fn liveness(&self) -> Liveness {
        self.judge_liveness(&self.tx.borrow())
    }

    /// Liveness from the last sign of life, judged now against the device's window.
    pub fn judge_liveness(&self, snap: &Snapshot) -> Liveness {
        let window = Duration::from_secs_f64(self.spec.liveness.max_silence_s);
        judge_liveness(snap, window, self.started)
    }

    /// Publishes a listener's sample, its last-seen time and liveness judged now.
    pub fn publish(&self, mut snap: Snapshot) {
        snap.last_seen_ms = snap.last_valid.map(|t| self.clock.wall_ms(t));
        snap.liveness = self.judge_liveness(&snap);
        self.tx.send_replace(snap);
    }
}
