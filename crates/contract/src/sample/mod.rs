//! What a device's reads become: a [`Snapshot`] of its signals' [`Reading`]s, each value numbered
//! by the read that produced it, and its [`Liveness`]; and the channel that publishes them
//! ([`SnapshotTx`]).
//! Here, beside the driver seam, because every protocol's reader publishes the same samples and
//! the engine judges them one way, whatever the protocol.
//!
//! The channel has two kinds of readers: those who want the present (the
//! latest snapshot: device state, resources, dispatch) and supervisors, who must judge every
//! sample a driver delivered — a watch channel alone keeps only the latest, and a `fail_when`
//! pulse between two snapshots read by a busy supervisor would be lost.

mod reading;

pub use reading::{Failure, Freshness, Reading, SignalValue, Unusable};
use serde::Serialize;
use std::collections::BTreeMap;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// Whether a device is answering (docs/architecture.md, liveness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// No valid answer yet, and polling began less than `max_silence_s` ago.
    Unknown,
    /// A valid answer (data or a Modbus exception) within `max_silence_s`.
    Online,
    /// No valid answer for longer than `max_silence_s` (or none at all in the first window).
    Offline,
}

impl Liveness {
    /// The name MCP results use (`online`, `offline`, `unknown`), without serialising.
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Unknown => "unknown",
            Liveness::Online => "online",
            Liveness::Offline => "offline",
        }
    }
}

/// The device's cache and liveness after a read cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The cycle this snapshot closes.
    pub seq: u64,
    /// Each signal ever read, by name: its last good value and whether its last read failed
    /// (`reading.rs`: read only through the rule there).
    readings: BTreeMap<String, Reading>,
    /// Liveness after this cycle.
    pub liveness: Liveness,
    /// Wall-clock ms of the last valid answer.
    pub last_seen_ms: Option<i64>,
    /// The last thing that went wrong reading the device, for `detail` texts.
    pub last_error: Option<String>,
    /// Whether the last failure was a checksum error (answers arrive, garbled).
    pub crc_failing: bool,
    /// Monotonic instant of the last valid answer, for judging liveness at any later moment.
    pub last_valid: Option<Instant>,
    /// Offline whatever the silence says: the device announced it (its last will on the status
    /// topic), or the connection to its broker is down. `last_error` says which.
    pub down: bool,
}

impl Snapshot {
    /// A device's snapshot before its first read: no values, liveness unknown.
    pub fn before_first_read() -> Snapshot {
        Snapshot {
            seq: 0,
            readings: BTreeMap::new(),
            liveness: Liveness::Unknown,
            last_seen_ms: None,
            last_error: None,
            crc_failing: false,
            last_valid: None,
            down: false,
        }
    }

    /// [`Snapshot::before_first_read`] with `liveness`: a test's sample, or a link's first.
    pub fn with_liveness(liveness: Liveness) -> Snapshot {
        Snapshot {
            liveness,
            ..Snapshot::before_first_read()
        }
    }
}

/// How many samples a supervisor may fall behind before it loses the oldest (it is told, and
/// judges the latest snapshot then).
const SAMPLES: usize = 256;

/// Publishes each snapshot to the latest-value channel and, while a supervisor listens, to the
/// every-sample channel.
///
/// The every-sample channel exists only while someone listens: a broadcast channel allocates
/// all its slots up front (256 snapshots), which for thousands of idle devices was most of the
/// gateway's memory.
pub struct SnapshotTx {
    latest: watch::Sender<Snapshot>,
    every: std::sync::Mutex<Option<broadcast::Sender<Snapshot>>>,
}

impl SnapshotTx {
    /// A channel holding `first` as the latest snapshot.
    pub fn new(first: Snapshot) -> SnapshotTx {
        SnapshotTx {
            latest: watch::channel(first).0,
            every: std::sync::Mutex::new(None),
        }
    }

    /// The latest snapshot (do not hold the guard across an await).
    pub fn borrow(&self) -> watch::Ref<'_, Snapshot> {
        self.latest.borrow()
    }

    /// A receiver of the latest snapshot.
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.latest.subscribe()
    }

    /// A receiver of every snapshot published from now on.
    pub fn samples(&self) -> broadcast::Receiver<Snapshot> {
        let mut every = self.every.lock().unwrap_or_else(|p| p.into_inner());
        match every.as_ref() {
            Some(tx) => tx.subscribe(),
            None => {
                let (tx, rx) = broadcast::channel(SAMPLES);
                *every = Some(tx);
                rx
            }
        }
    }

    /// Publishes a sample made by changing the latest snapshot in place: a poll cycle of an
    /// idle device then clones nothing (its values keep their names and sources). The
    /// every-sample channel is dropped once nobody listens.
    pub fn send_modify(&self, change: impl FnOnce(&mut Snapshot)) {
        // Nobody waiting: no wake-ups to send (a later receiver starts from this value).
        self.latest.send_if_modified(|snap| {
            change(snap);
            self.latest.receiver_count() > 0
        });
        let mut every = self.every.lock().unwrap_or_else(|p| p.into_inner());
        match every.as_ref() {
            Some(tx) if tx.receiver_count() > 0 => {
                let _ = tx.send(self.latest.borrow().clone());
            }
            Some(_) => *every = None,
            None => {}
        }
    }

    /// Publishes a snapshot (a sample: a message, a frame, an update) in place of the latest.
    pub fn send_replace(&self, snap: Snapshot) {
        self.send_modify(|latest| *latest = snap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(seq: u64) -> Snapshot {
        Snapshot {
            seq,
            liveness: Liveness::Online,
            ..Snapshot::before_first_read()
        }
    }

    #[tokio::test]
    async fn a_supervisor_sees_every_sample_where_the_watch_keeps_only_the_latest() {
        let tx = SnapshotTx::new(snap(0));
        let mut latest = tx.subscribe();
        let mut every = tx.samples();
        for seq in 1..=3 {
            tx.send_replace(snap(seq));
        }
        latest.changed().await.expect("open");
        assert_eq!(
            latest.borrow_and_update().seq,
            3,
            "the watch merged 1 and 2 away"
        );
        for seq in 1..=3 {
            assert_eq!(every.recv().await.expect("a sample").seq, seq);
        }
    }

    #[tokio::test]
    async fn the_every_sample_channel_exists_only_while_someone_listens() {
        let tx = SnapshotTx::new(snap(0));
        tx.send_replace(snap(1));
        assert!(tx.every.lock().unwrap().is_none(), "no listener, no buffer");
        let mut first = tx.samples();
        tx.send_replace(snap(2));
        assert_eq!(first.recv().await.expect("a sample").seq, 2);
        drop(first);
        tx.send_replace(snap(3));
        assert!(
            tx.every.lock().unwrap().is_none(),
            "freed with its last listener"
        );
        let mut again = tx.samples();
        tx.send_replace(snap(4));
        assert_eq!(again.recv().await.expect("a sample").seq, 4);
    }
}
