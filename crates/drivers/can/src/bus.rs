//! [`CanBus`]: one handle for every transport (slcan over a serial port today, SocketCAN behind
//! the `socketcan` feature). A task per bus owns the port and does all the I/O; the handle sends
//! frames through a bounded queue and hands out receivers of the frames the bus delivers
//! (rumqttc's event loop / client split).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::error::BusError;
use crate::frame::Frame;

/// Frames received but not yet taken by a slow [`Frames`] receiver. On overflow the oldest are
/// dropped for that receiver and counted in [`Stats::lagged`]: a signal's next frame replaces
/// a lost one, and a reader that lags never stalls the bus or the other readers.
pub const FRAME_BUFFER: usize = 1024;
/// Frames waiting to be written to the transport. When full, [`CanBus::send`] waits for room.
pub const SEND_QUEUE: usize = 64;
/// How long the adapter may take to answer a command or a frame. A silent adapter closes the
/// link (the answers are matched in order, so a late one would be taken for the wrong frame).
pub const ANSWER_TIMEOUT: Duration = Duration::from_millis(1000);

/// Where a bus is, as a plant file's `interface` key writes it (`socketcan:can0`,
/// `slcan:/dev/ttyACM0`): the one parser is `closedloop_contract`'s, which the plant loader uses.
pub use closedloop_contract::CanInterface as Interface;

/// Counters of one bus, for liveness and diagnosis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames received from the bus.
    pub received: u64,
    /// Frames the transport accepted for sending (the slcan adapter acknowledged them).
    pub sent: u64,
    /// Lines from the adapter that were not slcan (noise, half lines), or CAN error frames.
    pub line_errors: u64,
    /// Frames dropped for readers that fell more than [`FRAME_BUFFER`] frames behind.
    pub lagged: u64,
}

/// State the bus task and the handles share. Never locked across an `.await`.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) received: AtomicU64,
    pub(crate) sent: AtomicU64,
    pub(crate) line_errors: AtomicU64,
    lagged: AtomicU64,
    /// Why the task stopped, once it has.
    closed: Mutex<Option<BusError>>,
}

impl Shared {
    pub(crate) fn close(&self, error: BusError) {
        if let Ok(mut c) = self.closed.lock() {
            c.get_or_insert(error);
        }
    }

    fn closed(&self) -> Option<BusError> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }
}

/// A frame to send and where to say whether the transport took it.
pub(crate) struct Request {
    pub(crate) frame: Frame,
    pub(crate) reply: oneshot::Sender<Result<(), BusError>>,
}

/// What a transport task is given: requests to serve, where to deliver frames, the counters.
pub(crate) struct TaskEnds {
    pub(crate) requests: mpsc::Receiver<Request>,
    pub(crate) frames: broadcast::Sender<Frame>,
    pub(crate) shared: Arc<Shared>,
}

/// A handle on one open CAN bus.
///
/// Dropping every handle stops the bus task (an slcan adapter is sent `C\r` first). When the
/// transport fails (the port disappears, the adapter stops answering), the task stops, pending
/// and later sends fail with the reason, and [`Frames::next`] returns it: nothing hangs.
/// Reopening is the caller's decision.
#[derive(Debug)]
pub struct CanBus {
    interface: String,
    requests: mpsc::Sender<Request>,
    frames: broadcast::Receiver<Frame>,
    shared: Arc<Shared>,
}

impl CanBus {
    /// Opens the bus a plant file's `interface` names, at `bitrate` bit/s (slcan sets it; for
    /// SocketCAN the interface's own setting applies).
    pub async fn open(interface: &Interface, bitrate: u32) -> Result<CanBus, BusError> {
        match interface {
            Interface::Slcan(path) => crate::slcan::open_serial(path, bitrate).await,
            #[cfg(feature = "socketcan")]
            Interface::SocketCan(name) => crate::socketcan::open(name),
            #[cfg(not(feature = "socketcan"))]
            Interface::SocketCan(_) => Err(BusError::Interface {
                interface: interface.to_string(),
                reason: "this build has no SocketCAN support (cargo feature `socketcan` of closedloop-can)".into(),
            }),
        }
    }

    /// Makes the channels for a new bus task: the handle, and the ends the task keeps.
    pub(crate) fn channels(interface: String) -> (CanBus, TaskEnds) {
        let (req_tx, req_rx) = mpsc::channel(SEND_QUEUE);
        let (frames_tx, frames_rx) = broadcast::channel(FRAME_BUFFER);
        let shared = Arc::new(Shared::default());
        let bus = CanBus {
            interface,
            requests: req_tx,
            frames: frames_rx,
            shared: shared.clone(),
        };
        let ends = TaskEnds {
            requests: req_rx,
            frames: frames_tx,
            shared,
        };
        (bus, ends)
    }

    /// Sends one frame; returns once the transport has taken it (an slcan adapter acknowledged
    /// it, or the SocketCAN socket queued it). That is delivery to the adapter, not proof that
    /// any node received it: CAN's own acknowledgement is not visible through either.
    pub async fn send(&self, frame: Frame) -> Result<(), BusError> {
        frame.validate()?;
        let (reply, answer) = oneshot::channel();
        if self.requests.send(Request { frame, reply }).await.is_err() {
            return Err(self.gone());
        }
        answer.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// A receiver of every frame the bus delivers from now on.
    pub fn frames(&self) -> Frames {
        Frames {
            rx: self.frames.resubscribe(),
            shared: self.shared.clone(),
            interface: self.interface.clone(),
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        stats(&self.shared)
    }

    /// Why the bus stopped, if it has.
    pub fn closed(&self) -> Option<BusError> {
        self.shared.closed()
    }

    /// The interface, for logs and `detail` texts (`slcan:/dev/ttyACM0`).
    pub fn interface(&self) -> &str {
        &self.interface
    }

    fn gone(&self) -> BusError {
        closed_reason(&self.shared, &self.interface)
    }
}

fn stats(shared: &Shared) -> Stats {
    Stats {
        received: shared.received.load(Ordering::Relaxed),
        sent: shared.sent.load(Ordering::Relaxed),
        line_errors: shared.line_errors.load(Ordering::Relaxed),
        lagged: shared.lagged.load(Ordering::Relaxed),
    }
}

fn closed_reason(shared: &Shared, interface: &str) -> BusError {
    shared.closed().unwrap_or_else(|| BusError::Closed {
        interface: interface.to_string(),
        reason: "the bus task stopped".into(),
    })
}

/// The frames a bus delivers, from the moment [`CanBus::frames`] was called.
#[derive(Debug)]
pub struct Frames {
    rx: broadcast::Receiver<Frame>,
    shared: Arc<Shared>,
    interface: String,
}

impl Frames {
    /// The next frame; an error once the bus has stopped (the error says why). Frames this
    /// receiver was too slow to take are skipped and counted in [`Stats::lagged`].
    pub async fn next(&mut self) -> Result<Frame, BusError> {
        loop {
            match self.rx.recv().await {
                Ok(frame) => return Ok(frame),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.shared.lagged.fetch_add(n, Ordering::Relaxed);
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(closed_reason(&self.shared, &self.interface));
                }
            }
        }
    }
}

#[cfg(all(test, not(feature = "socketcan")))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn socketcan_without_the_feature_says_so() {
        let e = CanBus::open(&Interface::SocketCan("can0".into()), 500_000)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("cargo feature `socketcan`"), "{e}");
    }
}
