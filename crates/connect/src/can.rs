//! CAN devices: frames from a bus port shared by every device on one interface
//! (`closedloop_can::CanPort`), decoded through each device's DBC file.
//!
//! A value's number is its frame's number on the port, and a sent frame's fence is the number
//! of frames the bus had delivered when the adapter took it: only frames numbered above the
//! fence arrived after the write. The port reopens a lost bus with backoff; while it is down
//! every device on it is offline with the reason.

use crate::base::Base;
use closedloop_can::{CanPort, Dbc, Field, Frame, Message, Received};
use closedloop_contract::{BoxFuture, Value};
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, PlanError, Reporting, Request, Snapshot, SnapshotTx,
    WriteError,
};
use closedloop_plant::{Device, Source, WriteEntry};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, broadcast};

/// A CAN frame ready to send, encoded from a DBC message.
#[derive(Debug, Clone, PartialEq)]
pub struct CanWrite {
    /// The DBC message it encodes.
    pub message: String,
    /// The frame.
    pub frame: Frame,
    /// Re-sent at this period while the command runs (CAN actuators often want cyclic frames).
    pub cycle_ms: Option<u64>,
}

impl fmt::Display for CanWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex: String = self.frame.data.iter().map(|b| format!("{b:02X}")).collect();
        write!(f, "CAN {} 0x{:X} [{hex}]", self.message, self.frame.id)?;
        if let Some(ms) = self.cycle_ms {
            write!(f, " every {ms} ms")?;
        }
        Ok(())
    }
}

impl Encoded for CanWrite {
    fn repeat_every(&self) -> Option<Duration> {
        self.cycle_ms.map(|ms| Duration::from_millis(ms.max(1)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One DBC signal as last seen on the bus: its physical value, or the raw value and label that
/// say the sender had none (`Err((raw, "SNA"))`); when; in which message.
pub type Seen = (Result<f64, (i128, String)>, i64, String);

/// A CAN node: its bus port (shared), its DBC, and every DBC signal seen on the bus.
pub struct CanLink {
    base: Base,
    port: Arc<CanPort>,
    dbc: Arc<Dbc>,
    /// Latest field of every DBC signal of every message of the DBC seen on the bus (for
    /// `can_signals`): name → (value or not available, wall ms, message).
    seen: Mutex<BTreeMap<String, Seen>>,
}

impl CanLink {
    /// A link for the device `spec` on `port`, decoding through `dbc`; [`Link::run`] starts
    /// listening.
    pub fn new(spec: Arc<Device>, port: Arc<CanPort>, dbc: Arc<Dbc>, clock: Clock) -> CanLink {
        CanLink {
            base: Base::new(spec, clock),
            port,
            dbc,
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// The device's DBC.
    pub fn dbc(&self) -> &Dbc {
        &self.dbc
    }

    /// Every DBC signal seen on the bus: name → (value, wall ms, message).
    pub fn seen(&self) -> BTreeMap<String, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn send_frame(&self, c: &CanWrite, expiry: Duration) -> Result<u64, WriteError> {
        let bound = expiry.max(self.base.timeout);
        match tokio::time::timeout(bound, self.port.send(c.frame.clone())).await {
            Ok(Ok(fence)) => Ok(fence),
            Ok(Err(e)) => Err(closedloop_can::write_error(&e, &format!("sending {c}"))),
            Err(_) => Err(WriteError::unanswered(format!(
                "sending {c}: the adapter did not take it in time"
            ))),
        }
    }

    /// The CAN listener: frames of the device's messages into the cache, the port's state into
    /// liveness, and a republished snapshot every `poll_ms`.
    async fn listen(self: Arc<Self>, stop: Arc<Notify>) {
        let mut frames = self.port.subscribe();
        let mut state = self.port.state();
        let mut tick = tokio::time::interval(Duration::from_millis(self.base.spec.poll_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // (id, extended) of the messages this device's signals come from.
        let mine: Vec<(u32, bool)> = self
            .base
            .spec
            .signals
            .iter()
            .filter_map(|s| match &s.source {
                Source::Can { message, .. } => find_message(&self.dbc, message).ok(),
                _ => None,
            })
            .map(|m| (m.id(), m.extended()))
            .collect();
        loop {
            let mut snap = self.base.snapshot();
            tokio::select! {
                r = frames.recv() => match r {
                    Ok(rx) => self.take_frame(&mine, &mut snap, &rx),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(device = %self.base.id(), skipped = n, "CAN listener fell behind");
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
                        self.port.interface()
                    ))
                }
                None if snap.down => snap.last_error = None,
                None => {}
            }
            snap.down = down.is_some();
            self.base.publish(snap);
        }
    }

    /// One frame into the snapshot, if it is one of the device's messages.
    fn take_frame(&self, mine: &[(u32, bool)], snap: &mut Snapshot, rx: &Received) {
        let Some(message) = self.dbc.message_for(rx.frame.id, rx.frame.extended) else {
            return;
        };
        let at_ms = self.base.clock.wall_ms(rx.at);
        let decoded = closedloop_can::read(message, &rx.frame.data);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            for (name, field) in &decoded {
                let value = match *field {
                    Field::Value(v) => Ok(v),
                    Field::NotAvailable { raw, label } => Err((raw, label.to_string())),
                };
                seen.insert(
                    (*name).to_string(),
                    (value, at_ms, message.name().to_string()),
                );
            }
        }
        if !mine.contains(&(rx.frame.id, rx.frame.extended)) {
            return;
        }
        for s in &self.base.spec.signals {
            let Source::Can {
                message: m, signal, ..
            } = &s.source
            else {
                continue;
            };
            if !find_message(&self.dbc, m).is_ok_and(|found| found.name() == message.name()) {
                continue;
            }
            // Only a signal this frame carries (its multiplexer page selected) is read from it:
            // another page's bits mean nothing for it.
            match decoded.iter().find(|(n, _)| *n == signal).map(|(_, f)| *f) {
                Some(Field::NotAvailable { raw, label }) => {
                    let why = format!(
                        "{} read raw {raw}, which {} labels \"{label}\": not available",
                        s.source.describe(),
                        self.dbc.file()
                    );
                    snap.no_value(&s.name, why, at_ms, rx.seq);
                }
                Some(Field::Value(v)) => {
                    let value = match s.source.is_bool() {
                        true => Value::Bool(v != 0.0),
                        false => Value::Number(v),
                    };
                    snap.record(&s.name, value, at_ms, rx.seq, || s.source.describe());
                }
                None => {}
            }
        }
        snap.seq = snap.seq.max(rx.seq);
        snap.last_valid = Some(rx.at);
    }
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

/// A CAN frame: every signal evaluated and encoded into its message through the device's DBC.
pub fn encode(dbc: &Dbc, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
    let WriteEntry::Can {
        message,
        signals,
        cycle_ms,
    } = entry
    else {
        return Err(PlanError(format!(
            "{} is not a CAN frame; a CAN device takes `message` write entries",
            entry.describe()
        )));
    };
    let msg = find_message(dbc, message).map_err(PlanError)?;
    let named: BTreeMap<String, f64> = signals
        .iter()
        .zip(&values.values)
        .map(|((name, _), v)| (name.clone(), v.as_f64()))
        .collect();
    let data = closedloop_can::encode(msg, &named)
        .map_err(|e| PlanError(format!("CAN {message}: {e}")))?;
    Ok(Arc::new(CanWrite {
        message: msg.name().to_string(),
        frame: Frame::data(msg.id(), msg.extended(), data),
        cycle_ms: *cycle_ms,
    }))
}

impl Link for CanLink {
    fn describe(&self) -> String {
        format!("can {}", self.port.interface())
    }

    fn reporting(&self) -> Reporting {
        Reporting::Frames
    }

    fn samples(&self) -> &SnapshotTx {
        &self.base.tx
    }

    fn current(&self) -> Snapshot {
        self.base.current()
    }

    fn liveness(&self) -> closedloop_link::Liveness {
        self.base.liveness()
    }

    fn fence(&self) -> u64 {
        self.port.last_seq()
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        encode(&self.dbc, entry, values)
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            match request.as_any().downcast_ref::<CanWrite>() {
                Some(c) => self.send_frame(c, expiry).await,
                None => Err(crate::misfit(request, self.base.id())),
            }
        })
    }

    /// A CAN node sends its frames of its own accord: a fresh read waits for the next.
    fn ask(&self) {}

    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(closedloop_link::ask_and_wait(self, within))
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(self.listen(stop))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_can::Interface;
    use tokio::time::Instant;

    const DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: NODE

BO_ 257 LampStatus: 1 NODE
 SG_ Contact : 0|1@1+ (1,0) [0|1] "" Vector__XXX
 SG_ Level : 1|7@1+ (0.5,0) [0|63.5] "%" Vector__XXX

BO_ 258 Other: 1 NODE
 SG_ Noise : 0|8@1+ (1,0) [0|255] "" Vector__XXX

VAL_ 257 Level 127 "SNA" 0 "Empty" ;
"#;

    /// The lamp of `DBC` with the given `[device.signals]` lines, on an slcan port that never opens.
    fn lamp(signals: &str) -> CanLink {
        let text = format!(
            "[[device]]\nid = \"lamp\"\ndescription = \"t\"\n\
             driver = {{ kind = \"can\", interface = \"slcan:/nonexistent\", dbc = \"t.dbc\" }}\n\
             [device.signals]\n{signals}\n"
        );
        let plant = closedloop_plant::parse(&text, "t.toml", std::path::Path::new("."))
            .expect("plant parses");
        let dbc = Arc::new(Dbc::parse("t.dbc", DBC).expect("parses"));
        let port = CanPort::start(Interface::parse("slcan:/nonexistent").unwrap(), 500_000);
        CanLink::new(Arc::clone(&plant.devices[0]), port, dbc, Clock::new())
    }

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
        let dev = lamp(
            r#"contact = { message = "LampStatus", signal = "Contact", type = "bool" }
level = { message = "0x101", signal = "Level", unit = "%" }"#,
        );
        let mine = [(257, false)];
        let mut snap = dev.base.snapshot();
        let other = Received {
            frame: Frame::data(258, false, vec![7]),
            seq: 4,
            at: Instant::now(),
        };
        dev.take_frame(&mine, &mut snap, &other);
        assert!(snap.readings().next().is_none() && snap.last_valid.is_none());
        assert_eq!(dev.seen()["Noise"].0, Ok(7.0));
        let lamp = Received {
            frame: Frame::data(257, false, vec![0b0000_0101]),
            seq: 5,
            at: Instant::now(),
        };
        dev.take_frame(&mine, &mut snap, &lamp);
        let read = |name: &str| snap.read_after(name, 0).expect("read").clone();
        assert_eq!(read("contact").value, Value::Bool(true));
        assert_eq!(read("level").value, Value::Number(1.0));
        assert_eq!((read("level").seq, snap.seq), (5, 5));
        assert_eq!(read("contact").source, "CAN LampStatus Contact");
        assert!(snap.last_valid.is_some());
    }

    #[tokio::test]
    async fn a_value_the_dbc_labels_not_available_is_no_value_until_a_number_comes() {
        let dev = lamp(r#"level = { message = "LampStatus", signal = "Level", unit = "%" }"#);
        let mine = [(257, false)];
        let mut snap = dev.base.snapshot();
        let frame = |byte: u8, seq: u64| Received {
            frame: Frame::data(257, false, vec![byte]),
            seq,
            at: Instant::now(),
        };
        dev.take_frame(&mine, &mut snap, &frame(0b0000_1000, 1));
        assert_eq!(
            snap.read_after("level", 0).unwrap().value,
            Value::Number(2.0)
        );
        dev.take_frame(&mine, &mut snap, &frame(0b1111_1110, 2));
        let reading = snap.reading("level").expect("a reading");
        let failure = reading.failure().expect("SNA is no value");
        assert!(failure.no_value, "{failure:?}");
        assert_eq!(
            failure.why,
            "CAN LampStatus Level read raw 127, which t.dbc labels \"SNA\": not available"
        );
        assert!(reading.current().is_none(), "the old 2 % is not current");
        dev.take_frame(&mine, &mut snap, &frame(0, 3));
        assert_eq!(
            snap.read_after("level", 2).unwrap().value,
            Value::Number(0.0)
        );
        assert!(snap.reading("level").unwrap().failure().is_none());
    }
}
