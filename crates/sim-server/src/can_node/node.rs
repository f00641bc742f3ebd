//! [`CanNode`]: one simulated device on a simulated CAN bus — the handle the control endpoint
//! injects faults through — and the task that runs it.
//!
//! Every `period_ms` the task reads the device's registers and sends the status message (unless
//! the device is silent). A command frame is lost to `drop_rate`, or waits out `latency_ms`
//! (at most [`MAX_DELAYED`] at once; one more makes the oldest lost), then becomes register
//! writes on the device — unless the device is silent by then. Silence also forgets the commands
//! still waiting, as a reboot forgets its input buffer.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use closedloop_can::{Frame, Message, decode, encode};
use closedloop_contract::Driver;
use closedloop_sim::{
    FaultConfig, FaultKind, FaultSpec, SimConfig, SimConfigError, SimDevice, SimState,
};
use tokio::sync::{broadcast, mpsc};
use tokio::time::{Duration, Instant, MissedTickBehavior};

use super::faults::{NodeFaults, held_by_node, refusal, rekey};
use super::signals::{DEVICE_WAIT, Kind, Step, command_steps, read_status};

/// Command frames waiting out `latency_ms` at most, per node.
pub const MAX_DELAYED: usize = 64;

/// Which end of a bus a frame came from: a node's index, or the host.
pub(crate) type Origin = usize;
/// The host (whoever has the pty open), as an [`Origin`].
pub(crate) const HOST: Origin = usize::MAX;

/// A simulated CAN node. Cheap to clone: clones share the node, and its device.
///
/// It runs (sends its status, takes commands) for as long as the
/// [`SimBus`](super::SimBus) it was started on; the handle outlives it harmlessly.
#[derive(Clone)]
pub struct CanNode {
    inner: Arc<Inner>,
}

struct Inner {
    device: String,
    bus: String,
    /// The device, with every fault except those the node holds.
    sim: SimDevice,
    /// The `[device.sim]` table without its faults, to check injected faults against.
    table: SimConfig,
    /// Never held across an `.await`.
    faults: Mutex<NodeFaults>,
}

impl std::fmt::Debug for CanNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CanNode")
            .field("device", &self.inner.device)
            .field("bus", &self.inner.bus)
            .field("model", &self.inner.sim.model().name())
            .finish_non_exhaustive()
    }
}

impl CanNode {
    /// Builds the node's device from a checked table: faults the node holds go to the node, the
    /// rest to the device.
    pub(crate) fn new(
        device: &str,
        bus: &str,
        config: &SimConfig,
    ) -> Result<CanNode, SimConfigError> {
        let mut valid = config.validate()?;
        check_faults(&valid.faults, valid.model.name())?;
        let (held, kept): (Vec<FaultSpec>, Vec<FaultSpec>) = valid
            .faults
            .iter()
            .partition(|s| held_by_node(s.fault.kind()));
        valid.faults = kept;
        let sim = SimDevice::new(&valid)?;
        let now = Instant::now();
        let mut faults = NodeFaults::new(valid.seed ^ 0xCA4E_0000_D509_0001);
        for spec in held {
            faults.inject(spec, now);
        }
        Ok(CanNode {
            inner: Arc::new(Inner {
                device: device.to_string(),
                bus: bus.to_string(),
                sim,
                table: SimConfig {
                    faults: Vec::new(),
                    ..config.clone()
                },
                faults: Mutex::new(faults),
            }),
        })
    }

    /// The device id.
    pub fn device(&self) -> &str {
        &self.inner.device
    }

    /// The bus it is on.
    pub fn bus(&self) -> &str {
        &self.inner.bus
    }

    /// The physical truth now (whatever the node reports), for tests and diagnosis.
    pub fn peek(&self) -> SimState {
        self.inner.sim.peek()
    }

    /// Checks a fault written as in the plant file (keys prefixed `fault.`) as a CAN node's
    /// table is checked — `nak` and `crc_error` are refused with the reason — and injects it.
    pub fn inject_config(&self, fault: &FaultConfig) -> Result<(), SimConfigError> {
        let table = SimConfig {
            faults: vec![fault.clone()],
            ..self.inner.table.clone()
        };
        let valid = table.validate().map_err(rekey)?;
        let model = valid.model.name();
        for spec in valid.faults {
            if let Some(why) = refusal(spec.fault.kind()) {
                return Err(not_for_can("fault.kind", spec.fault.kind(), model, why));
            }
            if held_by_node(spec.fault.kind()) {
                self.lock().inject(spec, Instant::now());
            } else {
                self.inner.sim.inject(spec);
            }
        }
        Ok(())
    }

    /// Removes the fault of `kind`, if any; a node held off by it comes back as after a boot.
    pub fn clear(&self, kind: FaultKind) {
        if held_by_node(kind) {
            self.lock().clear(kind);
        } else {
            self.inner.sim.clear(kind);
        }
    }

    /// Removes every fault.
    pub fn clear_all(&self) {
        self.inner.sim.clear_all();
        for kind in FaultKind::ALL {
            self.lock().clear(kind);
        }
    }

    /// The faults pending or in force, in the order docs/simulator.md lists their kinds.
    pub fn faults(&self) -> Vec<FaultSpec> {
        let mut all = self.inner.sim.faults();
        all.extend(self.lock().specs());
        all.sort_by_key(|s| FaultKind::ALL.iter().position(|k| *k == s.fault.kind()));
        all
    }

    fn lock(&self) -> MutexGuard<'_, NodeFaults> {
        self.inner
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn silent(&self) -> bool {
        self.inner.sim.peek().silent
    }
}

/// Refuses, by key, the faults a CAN node cannot suffer.
pub(crate) fn check_faults(faults: &[FaultSpec], model: &str) -> Result<(), SimConfigError> {
    for (i, spec) in faults.iter().enumerate() {
        if let Some(why) = refusal(spec.fault.kind()) {
            let key = format!("faults[{i}].kind");
            return Err(not_for_can(&key, spec.fault.kind(), model, why));
        }
    }
    Ok(())
}

fn not_for_can(key: &str, kind: FaultKind, model: &str, why: &str) -> SimConfigError {
    SimConfigError::FaultNotForModel {
        key: key.to_string(),
        kind,
        model: model.to_string(),
        why: why.to_string(),
    }
}

/// What a node's task needs besides its handle: the resolved messages and its place on the bus.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) kind: Kind,
    pub(crate) status: Message,
    pub(crate) command: Message,
    pub(crate) period: Duration,
}

/// A command frame's signals waiting out `latency_ms`.
struct Delayed {
    due: Instant,
    values: BTreeMap<String, f64>,
}

/// Runs a node until the bus goes away: status every period, commands as they come.
pub(crate) async fn run(
    node: CanNode,
    plan: Plan,
    me: Origin,
    mut bus: broadcast::Receiver<(Origin, Frame)>,
    out: mpsc::Sender<(Origin, Frame)>,
) {
    let mut tick = tokio::time::interval(plan.period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut delayed: VecDeque<Delayed> = VecDeque::new();
    let mut last_error: Option<String> = None;
    loop {
        let due = delayed.front().map(|d| d.due);
        tokio::select! {
            _ = tick.tick() => {
                if node.silent() {
                    delayed.clear();
                    continue;
                }
                let Some(frame) = status_frame(&node, &plan, &mut last_error).await else {
                    continue;
                };
                if out.try_send((me, frame)).is_err() {
                    tracing::debug!(device = node.device(), "bus queue full: a status frame is lost");
                }
            }
            got = bus.recv() => match got {
                Ok((from, frame)) if from != me => on_frame(&node, &plan, &frame, &mut delayed).await,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(device = node.device(), "{n} bus frames missed");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                let now = Instant::now();
                while delayed.front().is_some_and(|d| d.due <= now) {
                    if let Some(d) = delayed.pop_front() {
                        apply(&node, plan.kind, &d.values).await;
                    }
                }
            }
        }
    }
}

/// The status frame now, or `None` when the device went silent or the values do not encode
/// (a bug in the DBC or the model's ranges: logged once per distinct error).
async fn status_frame(
    node: &CanNode,
    plan: &Plan,
    last_error: &mut Option<String>,
) -> Option<Frame> {
    let read = read_status(plan.kind, &node.inner.sim).await.ok()?;
    // Every signal of the message must be given: the model's, or raw 0 for the others.
    let values: BTreeMap<String, f64> = plan
        .status
        .signals()
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                read.get(s.name.as_str()).copied().unwrap_or(s.offset),
            )
        })
        .collect();
    match encode(&plan.status, &values) {
        Ok(data) => {
            *last_error = None;
            Some(Frame::data(plan.status.id(), plan.status.extended(), data))
        }
        Err(e) => {
            let e = e.to_string();
            if last_error.as_ref() != Some(&e) {
                tracing::error!(device = node.device(), "cannot encode the status: {e}");
                *last_error = Some(e);
            }
            None
        }
    }
}

/// A frame seen on the bus: a command for this node is lost, delayed or applied.
async fn on_frame(node: &CanNode, plan: &Plan, frame: &Frame, delayed: &mut VecDeque<Delayed>) {
    let command = &plan.command;
    if frame.id != command.id() || frame.extended != command.extended() || frame.rtr {
        return;
    }
    if node.silent() {
        delayed.clear();
        return;
    }
    let now = Instant::now();
    let (lost, latency) = {
        let mut faults = node.lock();
        (faults.lose(now), faults.latency(now))
    };
    if lost {
        tracing::debug!(device = node.device(), "drop_rate: a command frame is lost");
        return;
    }
    let values: BTreeMap<String, f64> = decode(command, &frame.data)
        .into_iter()
        .map(|(name, v)| (name.to_string(), v))
        .collect();
    if latency.is_zero() {
        apply(node, plan.kind, &values).await;
        return;
    }
    if delayed.len() >= MAX_DELAYED {
        delayed.pop_front();
        tracing::debug!(
            device = node.device(),
            "latency_ms: too many commands waiting, the oldest is lost"
        );
    }
    let due = now + latency;
    let at = delayed
        .iter()
        .position(|d| d.due > due)
        .unwrap_or(delayed.len());
    delayed.insert(at, Delayed { due, values });
}

/// Writes a command's signals to the device's registers (unless it went silent meanwhile).
async fn apply(node: &CanNode, kind: Kind, values: &BTreeMap<String, f64>) {
    if node.silent() {
        return;
    }
    let by_name: BTreeMap<&str, f64> = values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    for step in command_steps(kind, &by_name) {
        let (signal, write) = match step {
            Step::Write(signal, write) => (signal, write),
            Step::Skip(why) => {
                tracing::info!(device = node.device(), "command not applied: {why}");
                continue;
            }
        };
        match tokio::time::timeout(DEVICE_WAIT, node.inner.sim.write(write)).await {
            Ok(Ok(Ok(()))) => node.lock().on_write(Instant::now()),
            Ok(Ok(Err(exception))) => tracing::info!(
                device = node.device(),
                "the device refused {signal} (exception {exception:?})"
            ),
            Ok(Err(_)) | Err(_) => return, // silent now: the rest is lost too
        }
    }
}
