//! [`OpcuaClient`]: one OPC UA session per endpoint, kept alive in the background.
//!
//! async-opcua's session event loop runs in its own task: it connects, re-creates the session
//! after a loss (backing off from `initial_backoff` to `max_backoff`, forever) and moves the
//! subscriptions over. This handle turns its events into a [`Link`] and numbers every value it
//! hands out, so that an acknowledgement can say which values came after it (see [`Ack`]).

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opcua::client::{ClientBuilder, IdentityToken, Session, SessionPollResult};
use opcua::crypto::SecurityPolicy;
use opcua::types::{
    AttributeId, ByteString, EndpointDescription, MessageSecurityMode, NodeId, NumericRange,
    QualifiedName, ReadValueId, StatusCode, TimestampsToReturn, UserTokenPolicy,
};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::config::{OpcuaConfig, Security, SecurityMode};
use crate::error::status_name;
use crate::write::Caches;
use crate::{Error, Update};

/// The state of the session to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// A session is active (created or re-activated); subscriptions are in place.
    Connected,
    /// No session: not yet connected, or lost. The text says why — the last status
    /// (`Bad_ConnectionClosed`, `Bad_Timeout`) and, when the socket could not be opened, the
    /// socket's error (`connection refused`).
    Disconnected(String),
}

impl Link {
    /// Whether a session is active.
    pub fn is_connected(&self) -> bool {
        matches!(self, Link::Connected)
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
    pub(crate) session: Arc<Session>,
    link: watch::Receiver<Link>,
    /// The last sequence number handed out (values start at 1; 0 means none yet).
    seq: Arc<AtomicU64>,
    pub(crate) caches: Arc<Caches>,
    pub(crate) config: OpcuaConfig,
    task: AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OpcuaClient {
    /// Creates the client and starts connecting in the background; returns at once. Must be
    /// called inside a tokio runtime. Only configuration errors are returned here; an unreachable
    /// server shows in [`OpcuaClient::link`].
    pub fn connect(config: OpcuaConfig) -> Result<OpcuaClient, Error> {
        config.validate()?;
        let (policy, mode, server_cert, pki_dir, own) = match &config.security {
            Security::None => (
                SecurityPolicy::None,
                MessageSecurityMode::None,
                None,
                std::env::temp_dir().join("closedloop-opcua-pki"),
                None,
            ),
            Security::Basic256Sha256 {
                mode,
                server_cert,
                client_cert,
                client_key,
                pki_dir,
            } => {
                let der = std::fs::read(server_cert).map_err(|e| {
                    Error::Config(format!(
                        "server_cert \"{}\" cannot be read: {e}",
                        server_cert.display()
                    ))
                })?;
                let mode = match mode {
                    SecurityMode::Sign => MessageSecurityMode::Sign,
                    SecurityMode::SignAndEncrypt => MessageSecurityMode::SignAndEncrypt,
                };
                let own = client_cert.clone().zip(client_key.clone());
                (
                    SecurityPolicy::Basic256Sha256,
                    mode,
                    Some(der),
                    pki_dir.clone(),
                    own,
                )
            }
        };
        let secure = policy != SecurityPolicy::None;
        let mut builder = ClientBuilder::new()
            .application_name(config.application_name.clone())
            .application_uri(config.application_uri.clone())
            .product_uri("urn:closedloop")
            .pki_dir(pki_dir)
            // A certificate is generated only when security needs one and none is given.
            .create_sample_keypair(secure && own.is_none())
            // The trust decision is the pin below: the endpoint carries the one certificate
            // accepted, the channel is encrypted to it, and CreateSession must present exactly
            // it. Authority, host name and expiry checks would add nothing to an exact match.
            .trust_server_certs(true)
            .verify_server_certs(false)
            .session_retry_limit(-1)
            .session_retry_initial(config.initial_backoff)
            .session_retry_max(config.max_backoff)
            .keep_alive_interval(config.keep_alive)
            .max_failed_keep_alive_count(config.max_failed_keep_alives)
            .request_timeout(config.request_timeout)
            .publish_timeout(config.request_timeout * 2 + std::time::Duration::from_secs(2))
            .min_publish_interval(std::time::Duration::from_millis(5))
            .session_name("closedloop");
        if let Some((cert, key)) = own {
            builder = builder.certificate_path(cert).private_key_path(key);
        }
        let mut client = builder
            .client()
            .map_err(|errs| Error::Config(errs.join("; ")))?;
        let mut endpoint: EndpointDescription = (
            config.endpoint.as_str(),
            policy.to_str(),
            mode,
            UserTokenPolicy::anonymous(),
        )
            .into();
        if let Some(der) = server_cert {
            endpoint.server_certificate = ByteString::from(der);
        }
        let (session, event_loop) = client
            .connect_to_endpoint_directly(endpoint, IdentityToken::Anonymous)
            .map_err(|e| Error::Config(e.to_string()))?;

        let (link_tx, link_rx) = watch::channel(Link::Disconnected("not connected yet".into()));
        let caches = Arc::new(Caches::default());
        let task = tokio::spawn(drive(
            event_loop,
            session.clone(),
            link_tx,
            caches.clone(),
            config.endpoint.clone(),
        ))
        .abort_handle();
        Ok(OpcuaClient {
            inner: Arc::new(Inner {
                session,
                link: link_rx,
                seq: Arc::new(AtomicU64::new(0)),
                caches,
                config,
                task,
            }),
        })
    }

    /// The state of the session; `changed()` on the receiver wakes on every transition.
    pub fn link(&self) -> watch::Receiver<Link> {
        self.inner.link.clone()
    }

    /// Closes the session politely (CloseSession), then stops reconnecting. Dropping every handle
    /// also stops the client, without the goodbye.
    pub async fn close(&self) {
        let _ = self.inner.session.disconnect().await;
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
        match &*self.inner.link.borrow() {
            Link::Connected => Ok(()),
            Link::Disconnected(why) => Err(Error::NotConnected(why.clone())),
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
        let values = self
            .inner
            .session
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
            .map(|(i, (node, dv))| {
                Update::from_data_value(node.clone(), dv, first + i as u64, true)
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

/// Runs the session event loop and reports its transitions on `link`.
async fn drive(
    event_loop: opcua::client::SessionEventLoop<opcua::client::transport::TcpConnector>,
    session: Arc<Session>,
    link: watch::Sender<Link>,
    caches: Arc<Caches>,
    endpoint: String,
) {
    use futures_util::StreamExt as _;
    let stream = event_loop.enter();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(SessionPollResult::Reconnected(mode)) => {
                if matches!(mode, opcua::client::SessionConnectMode::NewSession(_)) {
                    caches.clear();
                }
                tracing::info!(%endpoint, "OPC UA session active");
                // async-opcua 0.19 moves the subscriptions to the new session during the
                // connect, but its fresh publishing loop only starts publishing on a trigger
                // that comes after it was created: without this nudge a re-connected
                // subscription stays silent. Nudged on every activation, subscriptions or not:
                // on a first session a server answers the Publish with BadNoSubscription (logged
                // by async-opcua, harmless), while skipping the nudge there left a monitor
                // created right after the activation silent under load (seen in CI).
                session.trigger_publish_now();
                link.send_replace(Link::Connected);
            }
            Ok(SessionPollResult::ConnectionLost(code)) => {
                tracing::warn!(%endpoint, status = %code, "OPC UA connection lost");
                link.send_replace(Link::Disconnected(status_name(code)));
            }
            Ok(SessionPollResult::ReconnectFailed(code)) => {
                let mut why = status_name(code);
                if code == StatusCode::BadCommunicationError
                    && let Some(socket) = probe(&endpoint).await
                {
                    why = format!("{why}: {socket}");
                }
                tracing::debug!(%endpoint, %why, "OPC UA connect attempt failed");
                link.send_if_modified(|l| {
                    let new = Link::Disconnected(why);
                    let changed = *l != new;
                    *l = new;
                    changed
                });
            }
            Ok(_) => {}
            Err(code) => {
                link.send_replace(Link::Disconnected(format!(
                    "{} (the session gave up)",
                    status_name(code)
                )));
                break;
            }
        }
    }
}

/// The socket error of a TCP connect to the endpoint's host and port, for a reason a person can
/// act on ("Connection refused"); `None` if the socket opens.
async fn probe(endpoint: &str) -> Option<String> {
    let rest = endpoint.strip_prefix("opc.tcp://")?;
    let authority = rest.split('/').next()?;
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:4840")
    };
    let attempt = tokio::net::TcpStream::connect(addr);
    match tokio::time::timeout(std::time::Duration::from_secs(1), attempt).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer to the TCP connect within 1 s".into()),
    }
}
