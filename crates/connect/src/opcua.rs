//! OPC UA devices: values kept fresh by monitored items on a session shared by every device on
//! one endpoint.
//!
//! A value's sequence number is its update's number on the session, and a write's or call's
//! fence is its acknowledgement's (`Ack::seq`): the rule of `closedloop-link`. Only Good values enter
//! the cache; a Bad or Uncertain one is named in `last_error` and leaves the last Good value, with
//! its old number, in place — it can never confirm a command. A `poll_now` (after a write, at
//! dispatch, when "already so" may confirm) reads every node, because a value that does not
//! change is never sent again. OPC UA sends values on change, so a device with steady values is
//! quiet by design: its nodes are also read three times per liveness window, and only a Good
//! value (sent or read) is a sign of life — a server that keeps its socket open and answers
//! nothing goes offline after `max_silence_s`. A lost session makes the device offline at once,
//! with the reason.
//!
//! A subscription update is numbered when it arrives, but the server may have sampled it before
//! the write was acknowledged: a sample whose own timestamp is not later than the
//! acknowledgement's (the same server's clock) is numbered at the fence, never above it. A read
//! is numbered when issued and answers with the node's value at that time, whatever its
//! timestamps: a value the write or call itself set keeps the timestamp it was set with (before
//! the acknowledgement) and is never sent again by the subscription, so a read issued after the
//! acknowledgement is fresh by its number alone.

mod request;

pub use request::{OpcuaRequest, encode};

use crate::base::Base;
use closedloop_contract::{BoxFuture, ErrorCode, Value};
use closedloop_link::{
    Clock, Encoded, Evaluated, Link, PlanError, ReadBack, Reporting, Request, Snapshot, SnapshotTx,
    WriteError,
};
use closedloop_opcua::{OpcuaClient, Update};
use closedloop_plant::{Device, Source, WriteEntry};
use serde_json::json;
use std::any::Any;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// An OPC UA device: nodes of a session shared by every device on one endpoint.
pub struct OpcuaLink {
    base: Base,
    client: OpcuaClient,
    /// The last acknowledgement's fence and server time (if its answer carried one).
    ack: Mutex<Option<(u64, Option<i64>)>>,
    /// Asks the reader for a read now.
    poll_now: Notify,
}

impl OpcuaLink {
    /// A link for the device `spec` on `client`'s session; [`Link::run`] starts monitoring.
    pub fn new(spec: Arc<Device>, client: OpcuaClient, clock: Clock) -> OpcuaLink {
        OpcuaLink {
            base: Base::new(spec, clock),
            client,
            ack: Mutex::new(None),
            poll_now: Notify::new(),
        }
    }

    /// The session, for the bridge tools (`opcua_browse`, `opcua_read`).
    pub fn client(&self) -> &OpcuaClient {
        &self.client
    }

    /// The nodes the device's signals come from, each once.
    fn nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .base
            .spec
            .signals
            .iter()
            .filter_map(|s| match &s.source {
                Source::Node { node, .. } => Some(node.clone()),
                _ => None,
            })
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// Records an acknowledgement (fence and server time) and returns its fence.
    fn fence_of(&self, ack: &closedloop_opcua::Ack) -> u64 {
        *self.ack.lock().unwrap_or_else(|p| p.into_inner()) = Some((ack.seq, ack.server_ms));
        ack.seq
    }

    /// Sends one write or call, bounded by the longer of `expiry` and the device's timeout.
    async fn request(&self, r: &OpcuaRequest, expiry: Duration) -> Result<u64, WriteError> {
        let bound = expiry.max(self.base.timeout);
        let (what, sent) = match r {
            OpcuaRequest::Write { node, value } => (
                format!("writing {node}"),
                tokio::time::timeout(bound, self.client.write(node, *value)).await,
            ),
            OpcuaRequest::Call {
                object,
                method,
                args,
            } => (
                format!("calling {method}"),
                tokio::time::timeout(bound, self.client.call(object, method, args.clone()))
                    .await
                    .map(|r| r.map(|(ack, _outputs)| ack)),
            ),
        };
        match sent {
            Ok(Ok(ack)) => Ok(self.fence_of(&ack)),
            Ok(Err(e)) => Err(closedloop_opcua::write_error(&e, &what)),
            Err(_) => Err(closedloop_opcua::no_answer(&what)),
        }
    }

    /// Reads a variable after the acknowledgement and compares it with the value written (a
    /// Float node holds it to single precision).
    async fn read_back_node(&self, node: &str, value: Value) -> ReadBack {
        let read = self.client.read(&[node.to_string()]).await;
        let Some(u) = read.ok().and_then(|mut v| v.pop()) else {
            return ReadBack {
                matched: false,
                evidence: None,
            };
        };
        let matched = u.good
            && match (u.value, value) {
                (Some(Value::Number(a)), Value::Number(b)) => {
                    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
                }
                (Some(a), b) => a == b,
                (None, _) => false,
            };
        let shown = closedloop_link::Shown::now(json!(u.value), self.base.clock.now_ms(), node);
        // The one evidence shape, and the node's status beside it.
        let mut evidence = shown.evidence();
        evidence["status"] = json!(u.status);
        ReadBack {
            matched,
            evidence: Some((node.to_string(), evidence)),
        }
    }

    /// The OPC UA listener: a monitor of the device's nodes into the cache, the session's state
    /// into liveness, and a republished snapshot every `poll_ms`.
    async fn listen(self: Arc<Self>, stop: Arc<Notify>) {
        let client = self.client.clone();
        let nodes = self.nodes();
        let mut monitor = client.monitor(&nodes, self.base.spec.poll_ms.max(1));
        let mut session_state = client.session_state();
        let mut tick = tokio::time::interval(Duration::from_millis(self.base.spec.poll_ms.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A read of every node three times per liveness window: a server may simply stop sending
        // a dead device's values (nothing changes), and only a read then says Bad.
        let check = Duration::from_secs_f64(self.base.spec.liveness.max_silence_s / 3.0)
            .max(Duration::from_millis(self.base.spec.poll_ms.max(1)));
        let mut check = tokio::time::interval(check);
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let endpoint = match &self.base.spec.driver {
            closedloop_plant::DriverConfig::Opcua { endpoint, .. } => endpoint.clone(),
            _ => String::new(),
        };
        // Nodes whose latest status is not Good.
        let mut bad: BTreeSet<String> = BTreeSet::new();
        loop {
            let mut snap = self.base.snapshot();
            tokio::select! {
                u = monitor.recv() => match u {
                    Some(u) => self.take_update(&mut snap, &mut bad, &u),
                    None => return,
                },
                changed = session_state.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = tick.tick() => {}
                // A read on request (after a write, at dispatch): OPC UA reports changes only,
                // so a value that did not change would never be read again after the write.
                // Reads are numbered when issued, so these count as fresh.
                _ = check.tick(), if !nodes.is_empty() && session_state.borrow().is_connected() => {
                    self.read_all(&client, &nodes, &mut snap, &mut bad).await;
                }
                _ = self.poll_now.notified(), if !nodes.is_empty() => {
                    self.read_all(&client, &nodes, &mut snap, &mut bad).await;
                }
                _ = stop.notified() => return,
            }
            let state = session_state.borrow_and_update().clone();
            match &state {
                closedloop_opcua::SessionState::Disconnected(why) => {
                    snap.last_error = Some(format!("no session with {endpoint}: {why}"));
                }
                closedloop_opcua::SessionState::Connected => {
                    if snap.down {
                        snap.last_error = None;
                    }
                }
            }
            snap.down = !state.is_connected();
            self.base.publish(snap);
        }
    }

    /// The current snapshot with every node read now (bounded by `within`), for judging a
    /// command at dispatch. The listener's own snapshot is left to the listener.
    async fn read_now(&self, within: Duration) -> Snapshot {
        let client = &self.client;
        let mut snap = self.base.current();
        let nodes = self.nodes();
        if nodes.is_empty() {
            return snap;
        }
        if let Ok(Ok(updates)) = tokio::time::timeout(within, client.read(&nodes)).await {
            let mut bad = BTreeSet::new();
            for u in &updates {
                self.take_update(&mut snap, &mut bad, u);
            }
        }
        snap
    }

    /// Reads every node (numbered at issue: fresh) into the snapshot. A read that fails as a
    /// whole changes nothing here: the session's state says what happened.
    async fn read_all(
        &self,
        client: &OpcuaClient,
        nodes: &[String],
        snap: &mut Snapshot,
        bad: &mut BTreeSet<String>,
    ) {
        if let Ok(updates) = client.read(nodes).await {
            for u in &updates {
                self.take_update(snap, bad, u);
            }
        }
    }

    /// One update into the snapshot: a Good value is a reading of its signals; any other status
    /// makes them unreadable (the last Good value stays as history, never current).
    fn take_update(&self, snap: &mut Snapshot, bad: &mut BTreeSet<String>, u: &Update) {
        let clock = &self.base.clock;
        let asked_ms = u.asked_at.map(|t| clock.wall_ms(t));
        let at_ms = sampled_at(clock.wall_ms(u.received_at), asked_ms, u);
        let ack = *self.ack.lock().unwrap_or_else(|p| p.into_inner());
        let seq = numbered(u, ack);
        if !u.good {
            bad.insert(u.node.clone());
            snap.last_error = Some(format!("{} reads {}", u.node, u.status));
        } else {
            bad.remove(&u.node);
        }
        for s in &self.base.spec.signals {
            let Source::Node { node, .. } = &s.source else {
                continue;
            };
            if *node != u.node {
                continue;
            }
            let value = match (u.good, u.value) {
                (false, _) => Err((
                    status_code(&u.status),
                    format!("{} reads {}", u.node, u.status),
                )),
                (true, None) if u.holds_nothing() => Err((
                    ErrorCode::NoFeedback,
                    format!("{} holds no value (Good, with an empty variant)", u.node),
                )),
                (true, None) => Err((
                    ErrorCode::RegisterInvalid,
                    format!(
                        "{} holds a {}, not a number or a bool",
                        u.node, u.value_type
                    ),
                )),
                (true, Some(v)) if s.source.is_bool() => Ok(Value::Bool(v.as_bool())),
                (true, Some(v)) => Ok(Value::Number(v.as_f64())),
            };
            // A late answer (a resync read issued before a newer update) never replaces it.
            let last = snap.reading(&s.name);
            let newer = last.and_then(|r| r.current().or(r.last_good()));
            let failed_later = last.and_then(|r| r.failure()).is_some_and(|f| f.seq > seq);
            if newer.is_some_and(|old| old.seq > seq) || failed_later {
                continue;
            }
            match value {
                Ok(value) => snap.record(&s.name, value, at_ms, seq, || s.source.describe()),
                Err((_, why)) if u.good && u.holds_nothing() => {
                    snap.no_value(&s.name, why, at_ms, seq)
                }
                Err((code, why)) => {
                    snap.last_error = Some(why.clone());
                    snap.refuse(&s.name, code, why, at_ms, seq);
                }
            }
        }
        if u.good {
            snap.seq = snap.seq.max(seq);
            snap.last_valid = Some(u.received_at);
        }
    }
}

/// The number an update counts under against the last acknowledgement (`ack`: its fence and
/// server time). A read is numbered when it was issued: one issued after the acknowledgement
/// answers with the node's value since, whatever its timestamps. A subscription sample may have
/// been taken before the acknowledgement and queued: it counts above the fence only when the
/// server stamped it later than the acknowledgement. A sample with no server timestamp — none at
/// all, or only a source timestamp from the device's own clock, which may run ahead — proves
/// nothing about when it was taken, so it is numbered at the fence: only a read can answer for
/// it. So is every sample when the acknowledgement itself carried no server time.
fn numbered(u: &Update, ack: Option<(u64, Option<i64>)>) -> u64 {
    let Some((fence, ack_ms)) = ack else {
        return u.seq;
    };
    let stamped_later = matches!((u.server_ms, ack_ms), (Some(t), Some(a)) if t > a);
    match u.from_read || u.seq <= fence || stamped_later {
        true => u.seq,
        false => fence,
    }
}

/// The contract's code for a node that does not read Good.
fn status_code(status: &str) -> ErrorCode {
    match closedloop_opcua::classify_status(status) {
        closedloop_opcua::Class::RegisterInvalid => ErrorCode::RegisterInvalid,
        closedloop_opcua::Class::Offline => ErrorCode::DeviceOffline,
        _ => ErrorCode::BusNak,
    }
}

impl Link for OpcuaLink {
    fn describe(&self) -> String {
        match &self.base.spec.driver {
            closedloop_plant::DriverConfig::Opcua { endpoint, .. } => format!("opcua {endpoint}"),
            other => other.kind().to_string(),
        }
    }

    fn reporting(&self) -> Reporting {
        Reporting::ChangesOnly
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
        self.client.fence()
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        encode(entry, values)
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move {
            match request.as_any().downcast_ref::<OpcuaRequest>() {
                Some(r) => self.request(r, expiry).await,
                None => Err(crate::misfit(request, self.base.id())),
            }
        })
    }

    fn ask(&self) {
        self.poll_now.notify_one();
    }

    /// A subscription's next update may carry a sample taken before this call: the nodes are
    /// read.
    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        Box::pin(self.read_now(within))
    }

    fn read_back<'a>(&'a self, request: &'a dyn Encoded) -> BoxFuture<'a, Option<ReadBack>> {
        Box::pin(async move {
            match request.as_any().downcast_ref::<OpcuaRequest>()? {
                OpcuaRequest::Write { node, value } => {
                    Some(self.read_back_node(node, *value).await)
                }
                OpcuaRequest::Call { .. } => None,
            }
        })
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Box::pin(self.listen(stop))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// When a value was read, for judging whether it was taken late enough to count (`settled`)
/// and for its age: a subscription's sample was taken when the server stamped it, not when it
/// reached this gateway — a notification that arrives late (a busy server, a long publishing
/// interval) must not pass for a read taken on arrival. Without a server timestamp, its arrival.
/// A source timestamp is the device's own clock, which may run ahead and says when the value
/// last changed: it never makes a sample younger, and is not used. A read counts as taken when
/// it was asked for (`asked_ms`, from `Update::asked_at`), the earliest the server can have
/// read it. Never later than the arrival (clocks that disagree).
fn sampled_at(arrived_ms: i64, asked_ms: Option<i64>, u: &Update) -> i64 {
    match u.server_ms {
        Some(stamped) if !u.from_read => stamped.min(arrived_ms),
        _ if u.from_read => asked_ms.map_or(arrived_ms, |asked| asked.min(arrived_ms)),
        _ => arrived_ms,
    }
}

#[cfg(test)]
mod tests;
