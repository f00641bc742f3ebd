//! A CAN interface kept open and shared by every device on it: frames numbered as they arrive,
//! the bus reopened with backoff after a failure, and each sent frame's fence.
//!
//! Frames are numbered on their port as they arrive, and a sent frame's fence is the number of
//! frames the bus had delivered when the adapter took it: only frames numbered above the fence
//! arrived after the write. A frame a receiver lagged behind on is skipped, which only makes
//! later numbers smaller — later frames are then taken for older, never older ones for newer.

use crate::{BusError, CanBus, Frame, Interface};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// Longest wait between attempts to reopen a bus.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Frames buffered for a slow device listener.
const FRAME_BUFFER: usize = 1024;

/// One received frame with its number on the port.
#[derive(Debug, Clone)]
pub struct Received {
    /// The frame.
    pub frame: Frame,
    /// Its number on the port (see the module doc).
    pub seq: u64,
    /// When it was taken from the bus.
    pub at: Instant,
}

/// The open bus and the number its frames count from.
struct Open {
    bus: Arc<CanBus>,
    base: u64,
}

/// A CAN interface kept open (reopened after a failure) and shared by its devices.
pub struct CanPort {
    interface: String,
    open: Mutex<Option<Open>>,
    frames: broadcast::Sender<Arc<Received>>,
    /// `Ok` while the bus is open; the reason it is not, otherwise.
    state: watch::Sender<Result<(), String>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for CanPort {
    fn drop(&mut self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
        }
    }
}

impl CanPort {
    /// Starts opening `interface` at `bitrate` in the background (inside a tokio runtime).
    pub fn start(interface: Interface, bitrate: u32) -> Arc<CanPort> {
        let (frames, _) = broadcast::channel(FRAME_BUFFER);
        let (state, _) = watch::channel(Err(format!("{interface} is not open yet")));
        let port = Arc::new(CanPort {
            interface: interface.to_string(),
            open: Mutex::new(None),
            frames,
            state,
            task: Mutex::new(None),
        });
        let weak = Arc::downgrade(&port);
        let task = tokio::spawn(run(weak, interface, bitrate)).abort_handle();
        *port.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        port
    }

    /// The interface as the plant names it.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Frames from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Received>> {
        self.frames.subscribe()
    }

    /// Open or not, and why not.
    pub fn state(&self) -> watch::Receiver<Result<(), String>> {
        self.state.subscribe()
    }

    fn current(&self) -> Option<(Arc<CanBus>, u64)> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.as_ref().map(|o| (Arc::clone(&o.bus), o.base))
    }

    /// The number of the last frame the bus has delivered: frames numbered above it are later.
    pub fn last_seq(&self) -> u64 {
        self.current()
            .map(|(bus, base)| base + bus.stats().received)
            .unwrap_or(0)
    }

    /// Sends one frame; returns its fence once the adapter has taken it.
    pub async fn send(&self, frame: Frame) -> Result<u64, BusError> {
        let Some((bus, base)) = self.current() else {
            let reason = match &*self.state.borrow() {
                Err(why) => why.clone(),
                Ok(()) => "the bus is reopening".into(),
            };
            return Err(BusError::Closed {
                interface: self.interface.clone(),
                reason,
            });
        };
        bus.send(frame).await?;
        Ok(base + bus.stats().received)
    }
}

/// Opens the bus, forwards its frames numbered, reopens it after a failure.
async fn run(port: std::sync::Weak<CanPort>, interface: Interface, bitrate: u32) {
    let mut backoff = Duration::from_millis(100);
    let mut base = 0u64;
    let mut last_logged: Option<String> = None;
    loop {
        let opened = CanBus::open(&interface, bitrate).await;
        let Some(p) = port.upgrade() else { return };
        let reason = match opened {
            Ok(bus) => {
                backoff = Duration::from_millis(100);
                last_logged = None;
                let bus = Arc::new(bus);
                let mut frames = bus.frames();
                *p.open.lock().unwrap_or_else(|e| e.into_inner()) = Some(Open {
                    bus: Arc::clone(&bus),
                    base,
                });
                p.state.send_modify(|s| *s = Ok(()));
                tracing::info!(interface = %interface, "CAN bus open");
                drop(p);
                let mut k = 0u64;
                let why = loop {
                    match frames.next().await {
                        Ok(frame) => {
                            k += 1;
                            let Some(p) = port.upgrade() else { return };
                            let _ = p.frames.send(Arc::new(Received {
                                frame,
                                seq: base + k,
                                at: Instant::now(),
                            }));
                        }
                        Err(e) => break e.to_string(),
                    }
                };
                base += bus.stats().received.max(k);
                let Some(p) = port.upgrade() else { return };
                *p.open.lock().unwrap_or_else(|e| e.into_inner()) = None;
                why
            }
            Err(e) => e.to_string(),
        };
        let Some(p) = port.upgrade() else { return };
        if last_logged.as_deref() != Some(reason.as_str()) {
            tracing::warn!(interface = %interface, error = %reason, "CAN bus down; reopening in {backoff:?}");
            last_logged = Some(reason.clone());
        }
        p.state.send_modify(|s| *s = Err(reason));
        drop(p);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
