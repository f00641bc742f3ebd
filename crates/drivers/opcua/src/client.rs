//! [`OpcuaClient`]: one OPC UA session per endpoint, kept alive in the background.
//!
//! async-opcua's session event loop runs in its own task: it connects, re-creates the session
//! after a loss (backing off from `initial_backoff` to `max_backoff`, forever) and moves the
//! subscriptions over. This handle turns its events into a [`SessionState`] and numbers every
//! value it hands out, so that an acknowledgement can say which values came after it (see
//! [`Ack`]).

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use opcua::client::Session;
use opcua::types::{
    AttributeId, NodeId, NumericRange, QualifiedName, ReadValueId, TimestampsToReturn,
};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::config::OpcuaConfig;
use crate::session;
use crate::write::Caches;
use crate::{Error, Update};

/// The state of the session to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// A session is active (created or re-activated); subscriptions are in place.
    Connected,
    /// No session: not yet connected, or lost. The text says why — the last status
    /// (`Bad_ConnectionClosed`, `Bad_Timeout`) and, when the socket could not be opened, the
    /// socket's error (`connection refused`).
    Disconnected(String),
}

impl SessionState {
    /// Whether a session is active.
    pub fn is_connected(&self) -> bool {
        matches!(self, SessionState::Connected)
    }
}

/// A cloneable handle on one OPC UA session.
///
/// Dropping the last handle stops the background task and closes the connection.
#[derive(Clone)]
pub struct OpcuaClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The session: set at once for an anonymous identity, once the server has named its
    /// user-token policy for a user name; set before the state first turns `Connected`.
    session: Arc<OnceLock<Arc<Session>>>,
    session_state: watch::Receiver<SessionState>,
    /// The last sequence number handed out (values start at 1; 0 means none yet).
    seq: Arc<AtomicU64>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) config: OpcuaConfig,
    task: AbortHandle,
}

impl Inner {
    /// The session, or why there is none yet (then there is none connected either).
    pub(crate) fn session(&self) -> Result<&Arc<Session>, Error> {
        self.session
            .get()
            .ok_or_else(|| match &*self.session_state.borrow() {
                SessionState::Disconnected(why) => Error::NotConnected(why.clone()),
                SessionState::Connected => Error::NotConnected("no session yet".into()),
            })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OpcuaClient {
    /// Creates the client and starts connecting in the background; returns at once. Must be
    /// called inside a tokio runtime. Only configuration errors are returned here; an unreachable
    /// server shows in [`OpcuaClient::session_state`].
    pub fn connect(config: OpcuaConfig) -> Result<OpcuaClient, Error> {
        config.validate()?;
        let (state_tx, state_rx) =
            watch::channel(SessionState::Disconnected("not connected yet".into()));
        let caches = Arc::new(Caches::default());
        let session = Arc::new(OnceLock::new());
        let task = session::start(session::Driving {
            session_state: state_tx,
            caches: caches.clone(),
            slot: session.clone(),
            config: config.clone(),
        })?;
        Ok(OpcuaClient {
            inner: Arc::new(Inner {
                session,
                session_state: state_rx,
                seq: Arc::new(AtomicU64::new(0)),
                caches,
                config,
                task,
            }),
        })
    }

    /// The state of the session; `changed()` on the receiver wakes on every transition.
    pub fn session_state(&self) -> watch::Receiver<SessionState> {
        self.inner.session_state.clone()
    }

    /// Closes the session politely (CloseSession), then stops reconnecting. Dropping every handle
    /// also stops the client, without the goodbye.
    pub async fn close(&self) {
        if let Ok(session) = self.inner.session() {
            let _ = session.disconnect().await;
        }
        self.inner.task.abort();
    }

    /// Numbers one value received now.
    pub(crate) fn next_seq(&self) -> u64 {
        self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The counter, for callbacks that outlive a borrow of the client.
    pub(crate) fn seq_counter(&self) -> Arc<AtomicU64> {
        self.inner.seq.clone()
    }

    /// Reserves `n` numbers for a read about to be issued; returns the first.
    fn reserve(&self, n: usize) -> u64 {
        self.inner.seq.fetch_add(n as u64, Ordering::SeqCst) + 1
    }

    /// The fence for an acknowledgement received now.
    /// The number of the last value handed out on this session: values numbered above it come
    /// later. A conservative fence when no [`crate::Ack`] is at hand.
    pub fn fence(&self) -> u64 {
        self.inner.seq.load(Ordering::SeqCst)
    }

    /// `Ok` while a session is active, else why not.
    pub(crate) fn ensure_connected(&self) -> Result<(), Error> {
        match &*self.inner.session_state.borrow() {
            SessionState::Connected => Ok(()),
            SessionState::Disconnected(why) => Err(Error::NotConnected(why.clone())),
        }
    }

    /// Reads the Value attribute of `nodes` in one request. A node the server cannot read is not
    /// an error: its [`Update`] carries the Bad status (`good == false`). Errors are for the
    /// request as a whole (not connected, timed out, refused).
    pub async fn read(&self, nodes: &[String]) -> Result<Vec<Update>, Error> {
        let ids = nodes
            .iter()
            .map(|n| parse_node(n))
            .collect::<Result<Vec<_>, _>>()?;
        self.ensure_connected()?;
        let to_read: Vec<ReadValueId> = ids.iter().map(|id| value_id(id.clone())).collect();
        let first = self.reserve(nodes.len());
        let asked = tokio::time::Instant::now();
        let values = self
            .inner
            .session()?
            .read(&to_read, TimestampsToReturn::Both, 0.0)
            .await
            .map_err(|e| Error::from_stack("read", &e))?;
        if values.len() != nodes.len() {
            return Err(Error::Status {
                op: format!(
                    "read of {} nodes answered {} values",
                    nodes.len(),
                    values.len()
                ),
                status: "Bad_UnexpectedError".into(),
            });
        }
        Ok(nodes
            .iter()
            .zip(values.iter())
            .enumerate()
            .map(|(i, (node, dv))| Update {
                asked_at: Some(asked),
                ..Update::from_data_value(node.clone(), dv, first + i as u64, true)
            })
            .collect())
    }
}

/// Parses `ns=2;s=Pump1.Speed`, `i=85`, `ns=1;g=…`, `ns=1;b=…`.
pub(crate) fn parse_node(s: &str) -> Result<NodeId, Error> {
    NodeId::from_str(s.trim()).map_err(|_| Error::InvalidNodeId(s.to_string()))
}

/// A request for the Value attribute of `id`.
pub(crate) fn value_id(id: NodeId) -> ReadValueId {
    ReadValueId {
        node_id: id,
        attribute_id: AttributeId::Value as u32,
        index_range: NumericRange::None,
        data_encoding: QualifiedName::null(),
    }
}
