//! One device at run time: its driver, its poller, its signal cache and its liveness.
//!
//! Register devices (sim, Modbus): the poller reads every declared signal each `poll_ms`
//! (neighbouring addresses of one area merged into one request, never across gaps) and publishes
//! a [`Snapshot`] on a watch channel. Each read cycle gets a sequence number *when it is issued*;
//! a command records the counter when its write is acknowledged, and only values from cycles with
//! a higher number count as evidence — a poll already in flight during the write can never
//! confirm it.
//!
//! MQTT devices: a listener takes the messages of the device's topics from the broker connection
//! it shares with the other devices on that broker. A value's sequence number is the message's
//! number on that connection, and a publish's fence is the number of the last message received
//! before its PUBACK — the same rule: only messages that arrived after the acknowledgement count.
//! Retained messages (delivered on subscribe) update the cache with sequence 0, so they are never
//! evidence and never a sign of life. The device is offline when its status topic carries the
//! `offline` payload (its last will), when the broker connection is down, or after
//! `max_silence_s` without a message; every `poll_ms` the listener republishes the snapshot so
//! supervisors see a silence as it happens.

pub mod can;
mod mqtt;
mod opcua;
mod poller;

use crate::clock::Clock;
use crate::plan::{Publish, Request, WriteError};
use closedloop_driver::{Answer, Area, Data, Driver, Encoding, TransportError, Value, Write};
use closedloop_mqtt::{Link, MqttBroker};
use closedloop_plant::{Device, Source};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use closedloop_driver::sample::SnapshotTx;
pub use closedloop_driver::sample::{Liveness, SignalValue, Snapshot};

/// How the engine reaches one device.
#[derive(Clone)]
pub enum DeviceIo {
    /// Register-mapped and polled (sim, Modbus).
    Registers(Arc<dyn Driver>),
    /// An MQTT client of a broker; devices on one broker share the handle (one connection).
    Mqtt(MqttBroker),
    /// A node on a CAN bus; devices on one interface share its port.
    Can(Arc<can::CanIo>),
    /// Nodes of an OPC UA server; devices on one endpoint share its session.
    Opcua(closedloop_opcua::OpcuaClient),
}

/// A device's runtime.
pub struct DeviceRuntime {
    /// The plant's declaration.
    pub spec: Arc<Device>,
    io: DeviceIo,
    timeout: Duration,
    blocks: Vec<poller::Block>,
    issued: AtomicU64,
    poll_now: Notify,
    tx: SnapshotTx,
    clock: Clock,
    /// When this runtime was created: a device silent for a whole window since then is offline.
    started: Instant,
    /// OPC UA: the last acknowledgement's fence and server time (see `device/opcua.rs`).
    opcua_ack: std::sync::Mutex<Option<(u64, i64)>>,
}

impl DeviceRuntime {
    /// Wraps a driver; call [`DeviceRuntime::spawn_poller`] to start reading.
    pub fn new(spec: Arc<Device>, io: DeviceIo, clock: Clock) -> Arc<DeviceRuntime> {
        let blocks = poller::plan_blocks(&spec);
        let tx = SnapshotTx::new(Snapshot::before_first_read());
        Arc::new(DeviceRuntime {
            timeout: Duration::from_millis(spec.request_timeout_ms()),
            spec,
            io,
            blocks,
            issued: AtomicU64::new(0),
            poll_now: Notify::new(),
            tx,
            clock,
            started: Instant::now(),
            opcua_ack: std::sync::Mutex::new(None),
        })
    }

    /// Device id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.tx.borrow().clone()
    }

    /// The latest snapshot with its liveness judged now rather than at the end of its cycle, so
    /// a device whose window ran out between two cycles (a slow, timing-out cycle) is already
    /// offline.
    pub fn current(&self) -> Snapshot {
        let mut snap = self.snapshot();
        snap.liveness = self.judge_liveness(&snap, self.started);
        snap
    }

    /// Liveness from the last sign of life, judged now.
    fn judge_liveness(&self, snap: &Snapshot, started: Instant) -> Liveness {
        let window = Duration::from_secs_f64(self.spec.liveness.max_silence_s);
        match snap.last_valid {
            _ if snap.down => Liveness::Offline,
            // Silent for a whole liveness window since reading began: that is offline, not
            // merely "not heard from yet".
            None if started.elapsed() > window => Liveness::Offline,
            None => Liveness::Unknown,
            Some(t) if t.elapsed() <= window => Liveness::Online,
            Some(_) => Liveness::Offline,
        }
    }

    /// A receiver that wakes on every read cycle (holding the latest snapshot only).
    pub fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.tx.subscribe()
    }

    /// A receiver of every sample published from now on, for judging each one.
    pub fn samples(&self) -> tokio::sync::broadcast::Receiver<Snapshot> {
        self.tx.samples()
    }

    /// The number of the last read cycle issued (for MQTT: of the last message received on the
    /// broker connection). Values numbered higher are fresh.
    pub fn issued_seq(&self) -> u64 {
        match &self.io {
            DeviceIo::Registers(_) => self.issued.load(Ordering::SeqCst),
            DeviceIo::Mqtt(broker) => broker.last_seq(),
            DeviceIo::Can(io) => io.port.last_seq(),
            DeviceIo::Opcua(client) => client.fence(),
        }
    }

    /// Records an OPC UA acknowledgement (fence and server time) and returns its fence.
    fn opcua_fence(&self, ack: &closedloop_opcua::Ack) -> u64 {
        if let Some(t) = ack.server_ms {
            *self.opcua_ack.lock().unwrap_or_else(|p| p.into_inner()) = Some((ack.seq, t));
        }
        ack.seq
    }

    /// The device's DBC, for a CAN device.
    pub fn dbc(&self) -> Option<&closedloop_can::Dbc> {
        match &self.io {
            DeviceIo::Can(io) => Some(&io.dbc),
            _ => None,
        }
    }

    /// The OPC UA session of an OPC UA device.
    pub fn opcua(&self) -> Option<&closedloop_opcua::OpcuaClient> {
        match &self.io {
            DeviceIo::Opcua(c) => Some(c),
            _ => None,
        }
    }

    /// The CAN side of a CAN device.
    pub fn can(&self) -> Option<&can::CanIo> {
        match &self.io {
            DeviceIo::Can(io) => Some(io),
            _ => None,
        }
    }

    /// Whether the device can be asked for a read now ([`DeviceRuntime::fresh`]); an MQTT device
    /// reports when it likes.
    pub fn can_be_asked(&self) -> bool {
        !matches!(self.io, DeviceIo::Mqtt(_))
    }

    /// Whether the device is register-mapped (raw register access and readback apply).
    pub fn is_register_based(&self) -> bool {
        matches!(self.io, DeviceIo::Registers(_))
    }

    /// Sends one request of a plan. Returns the fence: values numbered above it arrived after
    /// the acknowledgement. A publish expires after `expiry` (the command's deadline) and is
    /// bounded by it.
    pub async fn send(&self, req: &Request, expiry: Duration) -> Result<u64, WriteError> {
        match (req, &self.io) {
            (Request::Register(w), DeviceIo::Registers(_)) => {
                closedloop_driver::contract::register_write(self.write(w.clone()).await, w)?;
                Ok(self.issued_seq())
            }
            (Request::Publish(p), DeviceIo::Mqtt(broker)) => self.publish(broker, p, expiry).await,
            (Request::OpcuaWrite { node, value }, DeviceIo::Opcua(client)) => {
                let what = format!("writing {node}");
                match tokio::time::timeout(expiry.max(self.timeout), client.write(node, *value))
                    .await
                {
                    Ok(Ok(ack)) => Ok(self.opcua_fence(&ack)),
                    Ok(Err(e)) => Err(closedloop_opcua::write_error(&e, &what)),
                    Err(_) => Err(closedloop_opcua::no_answer(&what)),
                }
            }
            (
                Request::OpcuaCall {
                    object,
                    method,
                    args,
                },
                DeviceIo::Opcua(client),
            ) => {
                let what = format!("calling {method}");
                match tokio::time::timeout(
                    expiry.max(self.timeout),
                    client.call(object, method, args.clone()),
                )
                .await
                {
                    Ok(Ok((ack, _outputs))) => Ok(self.opcua_fence(&ack)),
                    Ok(Err(e)) => Err(closedloop_opcua::write_error(&e, &what)),
                    Err(_) => Err(closedloop_opcua::no_answer(&what)),
                }
            }
            (Request::Can(c), DeviceIo::Can(io)) => {
                match tokio::time::timeout(expiry.max(self.timeout), io.port.send(c.frame.clone()))
                    .await
                {
                    Ok(Ok(fence)) => Ok(fence),
                    Ok(Err(e)) => Err(closedloop_can::write_error(&e, &format!("sending {c}"))),
                    Err(_) => Err(WriteError {
                        code: crate::ErrorCode::DeviceOffline,
                        detail: format!("sending {c}: the adapter did not take it in time"),
                        transient: false,
                        maybe_applied: true,
                    }),
                }
            }
            (req, _) => Err(WriteError {
                code: crate::ErrorCode::BusNak,
                detail: format!("{req} does not fit the driver of {}", self.id()),
                transient: false,
                maybe_applied: false,
            }),
        }
    }

    async fn publish(
        &self,
        broker: &MqttBroker,
        p: &Publish,
        expiry: Duration,
    ) -> Result<u64, WriteError> {
        let sent = broker.publish(&p.topic, p.payload.clone().into_bytes(), p.qos, expiry);
        match tokio::time::timeout(expiry, sent).await {
            Ok(Ok(ack)) => Ok(ack.seq),
            Ok(Err(e)) => Err(closedloop_mqtt::write_error(&e, &p.topic)),
            Err(_) => Err(WriteError {
                code: crate::ErrorCode::DeviceOffline,
                detail: format!(
                    "publishing to {}: the broker did not acknowledge within {:.1} s",
                    p.topic,
                    expiry.as_secs_f64()
                ),
                transient: false,
                maybe_applied: true,
            }),
        }
    }

    /// Asks the poller to start a cycle now instead of at its next tick.
    pub fn poll_now(&self) {
        self.poll_now.notify_one();
    }

    /// A snapshot read after this call: the values a write is about to be judged against. A
    /// cached value may be up to one poll period (or one status frame) old — older than a fault
    /// that struck just before the command — so the poller is asked for a cycle now (a polled
    /// device), its nodes are read (OPC UA) or the next frame is awaited (a CAN node), bounded by
    /// `within`. MQTT devices report on change and cannot be asked, so their cache is as fresh as
    /// it gets. On timeout: the cache.
    pub async fn fresh(&self, within: Duration) -> Snapshot {
        if let DeviceIo::Opcua(client) = &self.io {
            // A subscription's next update may carry a sample taken before this call: read.
            return self.read_opcua_now(client, within).await;
        }
        if matches!(self.io, DeviceIo::Mqtt(_)) {
            return self.current();
        }
        let mut rx = self.subscribe();
        let after = self.issued_seq();
        self.poll_now();
        let _ = tokio::time::timeout(within, rx.wait_for(|s| s.seq > after)).await;
        self.current()
    }

    /// Sends one register write with the device's timeout.
    pub async fn write(&self, w: Write) -> Answer<()> {
        let DeviceIo::Registers(driver) = &self.io else {
            return Err(TransportError::Io(format!(
                "{} has no registers",
                self.id()
            )));
        };
        match tokio::time::timeout(self.timeout, driver.write(w)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    /// Reads one block with the device's timeout (readback verification).
    pub async fn read(&self, area: Area, start: u16, count: u16) -> Answer<Data> {
        let DeviceIo::Registers(driver) = &self.io else {
            return Err(TransportError::Io(format!(
                "{} has no registers",
                self.id()
            )));
        };
        match tokio::time::timeout(self.timeout, driver.read(area, start, count)).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError::Timeout(self.timeout.as_millis() as u64)),
        }
    }

    /// Starts the poll loop (for MQTT, the listener); it ends when `stop` is notified.
    pub fn spawn_poller(self: &Arc<Self>, stop: Arc<Notify>) -> tokio::task::JoinHandle<()> {
        let me = Arc::clone(self);
        match &self.io {
            DeviceIo::Mqtt(broker) => tokio::spawn(me.listen(broker.clone(), stop)),
            DeviceIo::Can(_) => tokio::spawn(me.listen_can(stop)),
            DeviceIo::Opcua(client) => tokio::spawn(me.listen_opcua(client.clone(), stop)),
            DeviceIo::Registers(_) => tokio::spawn(me.poll(stop)),
        }
    }
}
