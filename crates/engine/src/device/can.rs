//! CAN devices: frames from a bus port shared by every device on one interface, decoded through
//! each device's DBC file.
//!
//! Frames are numbered on their port as they arrive, and a sent frame's fence is the number of
//! frames the bus had delivered when the adapter took it: only frames numbered above the fence
//! arrived after the write (the rule of the parent module). A frame this receiver lagged behind
//! on is skipped, which only makes later numbers smaller — later frames are then taken for older,
//! never older ones for newer. The port reopens a lost bus with backoff; while it is down every
//! device on it is offline with the reason.

use super::*;
use closedloop_can::{BusError, CanBus, Dbc, Frame, Interface, Message};
use std::sync::Mutex;
use tokio::sync::broadcast;

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

/// A CAN device's view of its bus: the port, its DBC, and where each signal comes from.
pub struct CanIo {
    /// The shared port.
    pub port: Arc<CanPort>,
    /// The device's DBC.
    pub dbc: Arc<Dbc>,
    /// Latest value of every DBC signal of every message of the DBC seen on the bus (for
    /// `can_signals`): name → (value, wall ms, message).
    pub seen: Mutex<BTreeMap<String, (f64, i64, String)>>,
}

/// Resolves a plant's `message` (a name, or an id such as `0x1F0`) in a DBC.
pub fn find_message<'d>(dbc: &'d Dbc, message: &str) -> Result<&'d Message, String> {
    let id = message
        .strip_prefix("0x")
        .or_else(|| message.strip_prefix("0X"))
        .map(|hex| u32::from_str_radix(hex, 16))
        .or_else(|| {
            message
                .chars()
                .all(|c| c.is_ascii_digit())
                .then(|| message.parse())
        });
    match id {
        Some(Ok(id)) => dbc
            .message_for(id, false)
            .or_else(|| dbc.message_for(id, true))
            .ok_or_else(|| format!("{} has no message with id {message}", dbc.file())),
        Some(Err(_)) => Err(format!("\"{message}\" is not a message id")),
        None => dbc.message(message).map_err(|e| e.to_string()),
    }
}

impl DeviceRuntime {
    /// The CAN listener: frames of the device's messages into the cache, the port's state into
    /// liveness, and a republished snapshot every `poll_ms`.
    pub(super) async fn listen_can(self: Arc<Self>, stop: Arc<Notify>) {
        let DeviceIo::Can(io) = &self.io else { return };
        let mut frames = io.port.subscribe();
        let mut state = io.port.state();
        let mut tick = tokio::time::interval(Duration::from_millis(self.spec.poll_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // (id, extended) of the messages this device's signals come from.
        let mine: Vec<(u32, bool)> = self
            .spec
            .signals
            .iter()
            .filter_map(|s| match &s.source {
                Source::Can { message, .. } => find_message(&io.dbc, message).ok(),
                _ => None,
            })
            .map(|m| (m.id(), m.extended()))
            .collect();
        loop {
            let mut snap = self.snapshot();
            tokio::select! {
                r = frames.recv() => match r {
                    Ok(rx) => self.take_frame(io, &mine, &mut snap, &rx),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(device = %self.id(), skipped = n, "CAN listener fell behind");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                changed = state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = tick.tick() => {}
                _ = stop.notified() => return,
            }
            let down = state.borrow_and_update().clone().err();
            match &down {
                Some(why) => {
                    snap.last_error = Some(format!(
                        "the CAN bus {} is down: {why}",
                        io.port.interface()
                    ))
                }
                None if snap.down => snap.last_error = None,
                None => {}
            }
            snap.down = down.is_some();
            snap.last_seen_ms = snap.last_valid.map(|t| self.clock.wall_ms(t));
            snap.liveness = self.judge_liveness(&snap, self.started);
            self.tx.send_replace(snap);
        }
    }

    /// One frame into the snapshot, if it is one of the device's messages.
    pub(super) fn take_frame(
        &self,
        io: &CanIo,
        mine: &[(u32, bool)],
        snap: &mut Snapshot,
        rx: &Received,
    ) {
        let Some(message) = io.dbc.message_for(rx.frame.id, rx.frame.extended) else {
            return;
        };
        let at_ms = self.clock.wall_ms(rx.at);
        let decoded = closedloop_can::decode(message, &rx.frame.data);
        {
            let mut seen = io.seen.lock().unwrap_or_else(|p| p.into_inner());
            for (name, v) in &decoded {
                seen.insert((*name).to_string(), (*v, at_ms, message.name().to_string()));
            }
        }
        if !mine.contains(&(rx.frame.id, rx.frame.extended)) {
            return;
        }
        for s in &self.spec.signals {
            let Source::Can {
                message: m, signal, ..
            } = &s.source
            else {
                continue;
            };
            if !find_message(&io.dbc, m).is_ok_and(|found| found.name() == message.name()) {
                continue;
            }
            if let Some((_, v)) = decoded.iter().find(|(n, _)| *n == signal) {
                let value = if s.source.is_bool() {
                    Value::Bool(*v != 0.0)
                } else {
                    Value::Number(*v)
                };
                snap.values.insert(
                    s.name.clone(),
                    SignalValue {
                        value,
                        at_ms,
                        source: s.source.describe(),
                        seq: rx.seq,
                    },
                );
            }
        }
        snap.seq = snap.seq.max(rx.seq);
        snap.last_valid = Some(rx.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: NODE

BO_ 257 LampStatus: 1 NODE
 SG_ Contact : 0|1@1+ (1,0) [0|1] "" Vector__XXX
 SG_ Level : 1|7@1+ (0.5,0) [0|63.5] "%" Vector__XXX

BO_ 258 Other: 1 NODE
 SG_ Noise : 0|8@1+ (1,0) [0|255] "" Vector__XXX
"#;

    #[test]
    fn messages_resolve_by_name_and_by_id() {
        let dbc = Dbc::parse("t.dbc", DBC).expect("parses");
        assert_eq!(find_message(&dbc, "LampStatus").unwrap().id(), 257);
        assert_eq!(find_message(&dbc, "0x101").unwrap().name(), "LampStatus");
        assert_eq!(find_message(&dbc, "258").unwrap().name(), "Other");
        assert!(find_message(&dbc, "0x999").unwrap_err().contains("0x999"));
        assert!(find_message(&dbc, "Nope").is_err());
    }

    #[tokio::test]
    async fn frames_of_the_devices_messages_fill_the_cache_with_their_number() {
        let plant = closedloop_plant::parse(
            r#"
[[device]]
id = "lamp"
description = "t"
driver = { kind = "can", interface = "slcan:/nonexistent", dbc = "t.dbc" }
[device.signals]
contact = { message = "LampStatus", signal = "Contact", type = "bool" }
level = { message = "0x101", signal = "Level", unit = "%" }
"#,
            "t.toml",
            std::path::Path::new("."),
        )
        .expect("plant parses");
        let dbc = Arc::new(Dbc::parse("t.dbc", DBC).expect("parses"));
        let port = CanPort::start(Interface::parse("slcan:/nonexistent").unwrap(), 500_000);
        let io = CanIo {
            port,
            dbc,
            seen: Mutex::new(BTreeMap::new()),
        };
        let dev = DeviceRuntime::new(
            Arc::new(plant.devices[0].clone()),
            DeviceIo::Can(Arc::new(io)),
            Clock::new(),
        );
        let DeviceIo::Can(io) = &dev.io else {
            unreachable!()
        };
        let mine = [(257, false)];
        let mut snap = dev.snapshot();
        let other = Received {
            frame: Frame::data(258, false, vec![7]),
            seq: 4,
            at: Instant::now(),
        };
        dev.take_frame(io, &mine, &mut snap, &other);
        assert!(snap.values.is_empty() && snap.last_valid.is_none());
        assert_eq!(io.seen.lock().unwrap()["Noise"].0, 7.0);
        let lamp = Received {
            frame: Frame::data(257, false, vec![0b0000_0101]),
            seq: 5,
            at: Instant::now(),
        };
        dev.take_frame(io, &mine, &mut snap, &lamp);
        assert_eq!(snap.values["contact"].value, Value::Bool(true));
        assert_eq!(snap.values["level"].value, Value::Number(1.0));
        assert_eq!((snap.values["level"].seq, snap.seq), (5, 5));
        assert_eq!(snap.values["contact"].source, "CAN LampStatus Contact");
        assert!(snap.last_valid.is_some());
    }
}
