//! Change notifications for subscribed resources: one watcher task per subscription, fed by the
//! engine's device snapshots (`Engine::watch_device`) and command changes (`Engine::changes`).
//!
//! - A device's state counts as changed when a signal *value* or the liveness changes; a read
//!   cycle that only refreshes read times sends nothing.
//! - A command counts as changed on every journaled change (status, timeline).
//! - Throttled per subscription: at most one notification per [`THROTTLE`]. Changes during the
//!   pause are folded into one trailing notification sent when it ends, so the last change is
//!   never lost.
//! - A `subscriptions/listen` stream gets one notification per resource as soon as its watcher
//!   runs: rmcp acknowledges the stream before the server can start watching, and a change in
//!   between would otherwise be lost. (`resources/subscribe` answers only once the watcher
//!   runs, so it needs none.) Configs never change and get none.
//! - A watcher ends when its client's transport closed (checked every [`CLOSED_CHECK`] and on
//!   every failed send), on `resources/unsubscribe`, or when its `subscriptions/listen` request
//!   ends; it then leaves the registry.
//!
//! # Invariants
//! - At most [`MAX_SUBSCRIPTIONS`] entries; one more is refused with an error, nothing is evicted.
//! - A (URI, client) pair of `resources/subscribe` has at most one entry: subscribing twice is
//!   one subscription.
//! - Every entry's task is running or about to remove its own entry; removing an entry aborts
//!   its task.

mod source;
#[cfg(test)]
mod tests;

pub(crate) use source::Source;

use rmcp::model::{InitializeRequestParams, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, SubscriptionSink};
use rmcp::{ErrorData as McpError, RoleServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// Most subscriptions one server holds (all clients, both protocol generations).
pub(crate) const MAX_SUBSCRIPTIONS: usize = 1024;
/// Shortest interval between two notifications about the same resource to the same subscriber.
pub(crate) const THROTTLE: Duration = Duration::from_millis(100);
/// How often an idle watcher checks whether its client went away.
const CLOSED_CHECK: Duration = Duration::from_secs(1);

/// Where notifications go.
pub(crate) enum Sink {
    /// A 2025 client's connection (`resources/subscribe`).
    Peer(Peer<RoleServer>),
    /// A 2026-07-28 `subscriptions/listen` stream.
    Stream(SubscriptionSink),
    /// Unit tests: the URI and instant of each notification, as it is sent.
    #[cfg(test)]
    Test(tokio::sync::mpsc::UnboundedSender<(String, Instant)>),
}

impl Sink {
    /// Sends `notifications/resources/updated`; false when the receiver is gone.
    async fn send(&self, uri: &str) -> bool {
        match self {
            Sink::Peer(p) => p
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .is_ok(),
            Sink::Stream(s) => s.notify_resource_updated(uri).await.is_ok(),
            #[cfg(test)]
            Sink::Test(tx) => tx.send((uri.to_string(), Instant::now())).is_ok(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Sink::Peer(p) => p.is_transport_closed(),
            // A listen stream's watchers are removed when its request ends (see `Guard`).
            Sink::Stream(_) => false,
            #[cfg(test)]
            Sink::Test(tx) => tx.is_closed(),
        }
    }
}

/// Who holds a subscription, to find it again on `resources/unsubscribe`.
#[derive(Clone, Debug)]
pub(crate) enum Owner {
    /// A 2025 client, known by its handshake record: rmcp keeps one per connection and we keep
    /// it alive while subscribed, so its address is never reused for another connection.
    Client(Option<Arc<InitializeRequestParams>>),
    /// One `subscriptions/listen` request.
    Listen(u64),
}

impl Owner {
    /// The owner of a 2025 client's subscriptions.
    pub(crate) fn client(peer: &Peer<RoleServer>) -> Owner {
        Owner::Client(peer.peer_info())
    }

    fn same(&self, other: &Owner) -> bool {
        match (self, other) {
            (Owner::Client(Some(a)), Owner::Client(Some(b))) => Arc::ptr_eq(a, b),
            (Owner::Client(None), Owner::Client(None)) => true,
            (Owner::Listen(a), Owner::Listen(b)) => a == b,
            _ => false,
        }
    }
}

/// One subscription: what it watches, for whom, and the task that watches it.
struct Entry {
    uri: String,
    owner: Owner,
    task: AbortHandle,
}

/// The registry's state, behind its mutex.
#[derive(Default)]
struct Inner {
    /// The last id handed out, for entries and listen owners alike.
    next_id: u64,
    entries: HashMap<u64, Entry>,
}

/// The registry of resource subscriptions of one server (shared by its clones).
pub(crate) struct Subscriptions {
    inner: Mutex<Inner>,
    limit: usize,
    throttle: Duration,
}

impl Default for Subscriptions {
    fn default() -> Self {
        Subscriptions::new()
    }
}

impl Subscriptions {
    /// An empty registry with the default bound and throttle.
    pub(crate) fn new() -> Subscriptions {
        Subscriptions::with_limits(MAX_SUBSCRIPTIONS, THROTTLE)
    }

    /// An empty registry holding at most `limit` subscriptions, each notifying at most once
    /// per `throttle`.
    pub(crate) fn with_limits(limit: usize, throttle: Duration) -> Subscriptions {
        Subscriptions {
            inner: Mutex::new(Inner::default()),
            limit,
            throttle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts watching `uri` for `owner`. A second `resources/subscribe` of the same client to
    /// the same URI is a no-op; beyond [`MAX_SUBSCRIPTIONS`] the subscription is refused.
    pub(crate) fn add(
        self: &Arc<Self>,
        uri: String,
        owner: Owner,
        source: Source,
        sink: Sink,
    ) -> Result<(), McpError> {
        let mut inner = self.lock();
        if matches!(owner, Owner::Client(_))
            && inner
                .entries
                .values()
                .any(|e| e.uri == uri && e.owner.same(&owner))
        {
            return Ok(());
        }
        if inner.entries.len() >= self.limit {
            return Err(McpError::invalid_request(
                format!(
                    "too many resource subscriptions on this server (limit {}); unsubscribe from \
                     resources you no longer watch, then try again",
                    self.limit
                ),
                Some(serde_json::json!({"uri": uri, "limit": self.limit})),
            ));
        }
        inner.next_id += 1;
        let id = inner.next_id;
        let hub = Arc::clone(self);
        let (throttle, watched) = (self.throttle, uri.clone());
        // The lock is held across the spawn: the task's own `remove` (if it ends at once)
        // waits until its entry exists.
        let task = tokio::spawn(async move {
            pump(source, sink, &watched, throttle).await;
            hub.remove(id);
        });
        inner.entries.insert(
            id,
            Entry {
                uri,
                owner,
                task: task.abort_handle(),
            },
        );
        Ok(())
    }

    fn remove(&self, id: u64) {
        if let Some(e) = self.lock().entries.remove(&id) {
            e.task.abort();
        }
    }

    /// Ends `owner`'s subscriptions to `uri`.
    pub(crate) fn remove_matching(&self, uri: &str, owner: &Owner) {
        self.lock().entries.retain(|_, e| {
            let hit = e.uri == uri && e.owner.same(owner);
            if hit {
                e.task.abort();
            }
            !hit
        });
    }

    /// Ends every subscription of `owner`.
    fn remove_owner(&self, owner: &Owner) {
        self.lock().entries.retain(|_, e| {
            let hit = e.owner.same(owner);
            if hit {
                e.task.abort();
            }
            !hit
        });
    }

    /// A fresh owner for one `subscriptions/listen` request.
    pub(crate) fn listen_owner(&self) -> Owner {
        let mut inner = self.lock();
        inner.next_id += 1;
        Owner::Listen(inner.next_id)
    }

    /// Removes `owner`'s subscriptions when dropped.
    pub(crate) fn guard(self: &Arc<Self>, owner: Owner) -> Guard {
        Guard {
            hub: Arc::clone(self),
            owner,
        }
    }

    /// Active subscriptions.
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// Ends a listen stream's subscriptions however its request ends.
pub(crate) struct Guard {
    hub: Arc<Subscriptions>,
    owner: Owner,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.hub.remove_owner(&self.owner);
    }
}

/// Sends one notification per change of `source`, at most one per `throttle`, until the
/// receiver or the feed goes away.
async fn pump(mut source: Source, sink: Sink, uri: &str, throttle: Duration) {
    let mut last_sent: Option<Instant> = None;
    if matches!(sink, Sink::Stream(_)) && !matches!(source, Source::Fixed) {
        // Covers whatever changed between the stream's acknowledgment and this watcher.
        if !sink.send(uri).await {
            return;
        }
        last_sent = Some(Instant::now());
    }
    let mut check = tokio::time::interval(CLOSED_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = source.next() => if changed.is_none() { return },
            _ = check.tick() => {
                if sink.is_closed() { return }
                continue;
            }
        }
        if let Some(at) = last_sent {
            // Changes during the pause are folded into the notification sent after it.
            tokio::time::sleep_until(at + throttle).await;
        }
        source.absorb();
        if !sink.send(uri).await {
            return;
        }
        last_sent = Some(Instant::now());
    }
}
