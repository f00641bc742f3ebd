//! [`Monitor`]: a stream of [`Update`]s for a set of nodes — data changes from a subscription, or
//! polled reads when the server refuses subscriptions.
//!
//! The subscription is created once a session is active and moved to every later session by
//! async-opcua (transferred, or re-created with its monitored items), so the stream survives
//! reconnects. Updates are numbered on the client's one counter (see [`crate::Ack`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opcua::client::{MonitoredItemMap, OnSubscriptionNotificationCore};
use opcua::types::{
    DataChangeNotification, ExtensionObject, MonitoredItemCreateRequest, MonitoringMode,
    MonitoringParameters, NodeId, NotificationMessage, StatusCode, TimestampsToReturn,
};
use tokio::sync::{Notify, broadcast, watch};
use tokio::task::AbortHandle;

use crate::client::{parse_node, value_id};
use crate::error::classify_status;
use crate::{Class, OpcuaClient, Update};

/// Client handles for monitored items, unique in the process (async-opcua keeps them across a
/// re-created subscription, so a data change is always traced back to its node).
static NEXT_HANDLE: AtomicU32 = AtomicU32::new(1);

/// How a [`Monitor`] gets its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonitorMode {
    /// Waiting for a session to create the subscription.
    Starting,
    /// Data changes of a subscription (the server samples at `sampling_ms`).
    Subscription,
    /// The server refused subscriptions (the status says how): the nodes are read every
    /// `sampling_ms`, and every read is delivered, changed or not.
    Polling(String),
}

/// Updates for a set of nodes, in the order received.
///
/// After a reconnect, or when a notification was lost (a gap in the subscription's sequence
/// numbers), every node is read afresh; those reads are numbered when issued, so an update may
/// carry a smaller `seq` than one delivered before it. The latest value of a node is the one
/// with the highest `seq`.
///
/// Bounded: at most [`crate::OpcuaConfig::buffer`] updates wait; when the receiver falls behind
/// the oldest are dropped and counted in [`Monitor::lagged`] — the connection is never slowed.
/// Dropping the monitor deletes its subscription (or stops polling).
pub struct Monitor {
    rx: broadcast::Receiver<Update>,
    lagged: u64,
    mode: watch::Receiver<MonitorMode>,
    task: AbortHandle,
    /// The subscription to delete on drop, with the session it lives on.
    subscription: Arc<Mutex<Option<u32>>>,
    client: OpcuaClient,
}

impl Monitor {
    /// The next update, or `None` once nothing more can come (every node was invalid).
    pub async fn recv(&mut self) -> Option<Update> {
        loop {
            match self.rx.recv().await {
                Ok(u) => return Some(u),
                Err(broadcast::error::RecvError::Lagged(n)) => self.lagged += n,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Updates dropped because this receiver fell behind.
    pub fn lagged(&self) -> u64 {
        self.lagged
    }

    /// How values are obtained now.
    pub fn mode(&self) -> MonitorMode {
        self.mode.borrow().clone()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.task.abort();
        let id = self
            .subscription
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (Some(id), Ok(rt)) = (id, tokio::runtime::Handle::try_current())
            && let Ok(session) = self.client.inner.session()
        {
            let session = session.clone();
            rt.spawn(async move {
                let _ = session.delete_subscription(id).await;
            });
        }
    }
}

impl OpcuaClient {
    /// Starts monitoring `nodes` (their Value attribute), sampled every `sampling_ms` (at least
    /// 1). Returns at once; the subscription is made when a session is active. A node id that
    /// does not parse, or that the server refuses, shows as one [`Update`] with the Bad status
    /// (`Bad_NodeIdInvalid`, `Bad_NodeIdUnknown`).
    pub fn monitor(&self, nodes: &[String], sampling_ms: u64) -> Monitor {
        let sampling = Duration::from_millis(sampling_ms.max(1));
        let (tx, rx) = broadcast::channel(self.inner.config.buffer);
        let (mode_tx, mode_rx) = watch::channel(MonitorMode::Starting);
        let subscription = Arc::new(Mutex::new(None));
        let task = tokio::spawn(run(
            self.clone(),
            nodes.to_vec(),
            sampling,
            tx,
            mode_tx,
            subscription.clone(),
        ))
        .abort_handle();
        Monitor {
            rx,
            lagged: 0,
            mode: mode_rx,
            task,
            subscription,
            client: self.clone(),
        }
    }
}

/// What became of one attempt to subscribe.
enum Subscribed {
    /// In place; async-opcua keeps it from now on.
    Yes,
    /// The server will not do it: poll instead.
    Refused(String),
    /// The session went away meanwhile: try again on the next one.
    Lost,
}

async fn run(
    client: OpcuaClient,
    nodes: Vec<String>,
    sampling: Duration,
    tx: broadcast::Sender<Update>,
    mode: watch::Sender<MonitorMode>,
    subscription: Arc<Mutex<Option<u32>>>,
) {
    let mut valid = Vec::new();
    for node in nodes {
        match parse_node(&node) {
            Ok(id) => valid.push((node, id)),
            Err(_) => {
                let seq = client.next_seq();
                let _ = tx.send(Update::status_only(node, StatusCode::BadNodeIdInvalid, seq));
            }
        }
    }
    if valid.is_empty() {
        return;
    }
    let resync = Arc::new(Notify::new());
    let mut state = client.session_state();
    loop {
        if state.wait_for(|s| s.is_connected()).await.is_err() {
            return;
        }
        match subscribe(&client, &valid, sampling, &tx, &subscription, &resync).await {
            Subscribed::Yes => {
                mode.send_replace(MonitorMode::Subscription);
                // async-opcua moves the subscription to every new session. What it cannot move
                // are notifications lost on the way: those the server sent while the session
                // was down, or to publish requests of the dead connection. After a reconnect, or
                // when the sequence numbers show a gap, every node is read afresh.
                resync_forever(&client, &valid, &tx, &resync).await;
                return;
            }
            Subscribed::Refused(why) => {
                tracing::info!(%why, "OPC UA server refused a subscription; polling instead");
                mode.send_replace(MonitorMode::Polling(why));
                poll(&client, &valid, sampling, &tx).await;
                return;
            }
            Subscribed::Lost => {
                // The session ended (or a request timed out on a slow server): try again on the
                // next session, or after a backoff on this one.
                let retry = client.inner.config.max_backoff;
                tokio::select! {
                    lost = state.wait_for(|s| !s.is_connected()) => {
                        if lost.is_err() {
                            return;
                        }
                    }
                    _ = tokio::time::sleep(retry) => {}
                }
            }
        }
    }
}

/// Creates the subscription and its monitored items.
async fn subscribe(
    client: &OpcuaClient,
    nodes: &[(String, NodeId)],
    sampling: Duration,
    tx: &broadcast::Sender<Update>,
    subscription: &Mutex<Option<u32>>,
    resync: &Arc<Notify>,
) -> Subscribed {
    let Ok(session) = client.inner.session() else {
        return Subscribed::Lost;
    };
    let mut by_handle = HashMap::new();
    let mut items = Vec::with_capacity(nodes.len());
    for (node, id) in nodes {
        let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        by_handle.insert(handle, node.clone());
        items.push(MonitoredItemCreateRequest {
            item_to_monitor: value_id(id.clone()),
            monitoring_mode: MonitoringMode::Reporting,
            requested_parameters: MonitoringParameters {
                client_handle: handle,
                sampling_interval: sampling.as_secs_f64() * 1000.0,
                filter: ExtensionObject::null(),
                // Changes between two publishes are kept (the oldest dropped beyond this), so
                // a short pulse is not lost to the publishing interval.
                queue_size: 16,
                discard_oldest: true,
            },
        });
    }
    let callback = Notifications {
        by_handle,
        seq: client.seq_counter(),
        sink: tx.clone(),
        next: None,
        resync: resync.clone(),
    };
    let ms = sampling.as_millis().max(1) as u32;
    // A keep-alive publish about every second; the server drops the subscription after ~10 s
    // without publish requests (a session that is really gone).
    let keep_alive = (1000 / ms).max(3);
    let lifetime = (10_000 / ms).max(keep_alive * 3);
    let id = match session
        .create_subscription(sampling, lifetime, keep_alive, 0, 0, true, callback)
        .await
    {
        Ok(id) => id,
        Err(e) => return verdict(e.status()),
    };
    *subscription.lock().unwrap_or_else(PoisonError::into_inner) = Some(id);
    match session
        .create_monitored_items(id, TimestampsToReturn::Both, items)
        .await
    {
        Ok(results) => {
            for (created, (node, _)) in results.iter().zip(nodes) {
                let status = created.result.status_code;
                if status.is_bad() {
                    let _ = tx.send(Update::status_only(node.clone(), status, client.next_seq()));
                }
            }
            // A subscription created while the session's publishing loop had wound down (the
            // previous monitor's subscription just deleted) may never be published for without
            // a trigger: async-opcua 0.19 starts publishing on a trigger that comes after the
            // loop was created (seen: a second monitor on one session stayed silent).
            session.trigger_publish_now();
            Subscribed::Yes
        }
        Err(e) => {
            let _ = session.delete_subscription(id).await;
            *subscription.lock().unwrap_or_else(PoisonError::into_inner) = None;
            verdict(e.status())
        }
    }
}

/// Receives a subscription's notification messages: numbers and forwards the data changes, and
/// watches the sequence numbers for messages that never arrived.
struct Notifications {
    by_handle: HashMap<u32, String>,
    seq: Arc<std::sync::atomic::AtomicU64>,
    sink: broadcast::Sender<Update>,
    /// The sequence number the next data message must carry (a keep-alive carries it too).
    next: Option<u32>,
    /// Woken when a gap shows that a message was lost.
    resync: Arc<Notify>,
}

impl OnSubscriptionNotificationCore for Notifications {
    fn on_subscription_notification(
        &mut self,
        message: NotificationMessage,
        _items: MonitoredItemMap<'_>,
    ) {
        let data = message.notification_data.unwrap_or_default();
        let n = message.sequence_number;
        // A number beyond the expected one means messages in between were lost; a smaller one,
        // a re-created subscription counting from 1 again.
        if self.next.is_some_and(|expected| n > expected) {
            tracing::debug!(expected = ?self.next, got = n, "OPC UA notifications lost; resync");
            self.resync.notify_one();
        }
        self.next = Some(if data.is_empty() {
            n
        } else {
            n.wrapping_add(1)
        });
        for object in data {
            let Some(changes) = object.inner_as::<DataChangeNotification>() else {
                continue;
            };
            for item in changes.monitored_items.iter().flatten() {
                let Some(node) = self.by_handle.get(&item.client_handle) else {
                    continue;
                };
                let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = self.sink.send(Update::from_data_value(
                    node.clone(),
                    &item.value,
                    seq,
                    false,
                ));
            }
        }
    }
}

/// Reads every node afresh after each reconnect and each detected gap, for as long as the
/// monitor lives.
async fn resync_forever(
    client: &OpcuaClient,
    nodes: &[(String, NodeId)],
    tx: &broadcast::Sender<Update>,
    resync: &Notify,
) {
    let names: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
    let mut state = client.session_state();
    loop {
        tokio::select! {
            _ = resync.notified() => {}
            back = async {
                state.wait_for(|s| !s.is_connected()).await?;
                state.wait_for(|s| s.is_connected()).await.map(|_| ())
            } => {
                if back.is_err() {
                    return;
                }
            }
        }
        match client.read(&names).await {
            Ok(updates) => {
                for u in updates {
                    let _ = tx.send(u);
                }
            }
            Err(e) => tracing::debug!(error = %e, "OPC UA resync read failed"),
        }
    }
}

/// A failed subscription request: the session went away, or the server will not subscribe.
fn verdict(status: StatusCode) -> Subscribed {
    let name = crate::error::status_name(status);
    if classify_status(&name) == Class::Offline {
        Subscribed::Lost
    } else {
        Subscribed::Refused(name)
    }
}

/// Reads every node each `sampling`, while a session is active, for as long as the monitor lives.
async fn poll(
    client: &OpcuaClient,
    nodes: &[(String, NodeId)],
    sampling: Duration,
    tx: &broadcast::Sender<Update>,
) {
    let names: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
    let mut tick = tokio::time::interval(sampling);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut state = client.session_state();
    loop {
        tick.tick().await;
        if !state.borrow().is_connected() && state.wait_for(|s| s.is_connected()).await.is_err() {
            return;
        }
        match client.read(&names).await {
            Ok(updates) => {
                for u in updates {
                    let _ = tx.send(u);
                }
            }
            Err(e) => tracing::debug!(error = %e, "OPC UA poll failed"),
        }
    }
}
