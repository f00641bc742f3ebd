//! Opening an OPC UA session and running it: the async-opcua client built from an
//! [`OpcuaConfig`] (security, pinned server certificate, identity, retry and timeout settings),
//! and the background task that turns the session's events into a [`SessionState`] — for a user
//! name, after asking the server which user-token policy to send it under (`crate::identity`).
//!
//! Kept apart from the [`OpcuaClient`](crate::OpcuaClient) handle because none of it is per
//! request: it runs once per connect, then only in the background task.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opcua::client::transport::TcpConnector;
use opcua::client::{
    Client, ClientBuilder, Session, SessionConnectMode, SessionEventLoop, SessionPollResult,
};
use opcua::crypto::SecurityPolicy;
use opcua::types::{
    ByteString, EndpointDescription, MessageSecurityMode, StatusCode, UserTokenPolicy,
};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::Error;
use crate::client::SessionState;
use crate::config::{Identity, OpcuaConfig, Security, SecurityMode};
use crate::error::status_name;
use crate::identity;
use crate::write::Caches;

/// [`Security`] resolved to what async-opcua takes: the endpoint's policy and mode, the pinned
/// server certificate's bytes, and the files of the client's own certificate.
struct ChannelSecurity {
    policy: SecurityPolicy,
    mode: MessageSecurityMode,
    /// The pinned server certificate (DER): the only one the endpoint accepts.
    server_cert: Option<Vec<u8>>,
    /// Where async-opcua keeps (and, if needed, generates) the client's certificate.
    pki_dir: PathBuf,
    /// The client certificate and key given in the configuration, if any.
    own: Option<(PathBuf, PathBuf)>,
}

impl ChannelSecurity {
    /// Resolves `security`, reading the pinned server certificate (the only file read here).
    fn resolve(security: &Security) -> Result<ChannelSecurity, Error> {
        match security {
            Security::None => Ok(ChannelSecurity {
                policy: SecurityPolicy::None,
                mode: MessageSecurityMode::None,
                server_cert: None,
                pki_dir: std::env::temp_dir().join("closedloop-opcua-pki"),
                own: None,
            }),
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
                Ok(ChannelSecurity {
                    policy: SecurityPolicy::Basic256Sha256,
                    mode,
                    server_cert: Some(der),
                    pki_dir: pki_dir.clone(),
                    own: client_cert.clone().zip(client_key.clone()),
                })
            }
        }
    }

    /// The endpoint to connect to directly, carrying the pinned certificate and the one
    /// user-token policy the session's identity is sent under.
    fn endpoint(&self, url: &str, user: UserTokenPolicy) -> EndpointDescription {
        let mut endpoint: EndpointDescription = (url, self.policy.to_str(), self.mode, user).into();
        if let Some(der) = &self.server_cert {
            endpoint.server_certificate = ByteString::from(der.clone());
        }
        endpoint
    }
}

/// Where the background task reports, and what its reasons name.
pub(crate) struct Driving {
    /// The session's state, for [`crate::OpcuaClient::session_state`].
    pub(crate) session_state: watch::Sender<SessionState>,
    /// Emptied on every new session.
    pub(crate) caches: Arc<Caches>,
    /// The session, once made: at once for an anonymous one, after the server has named its
    /// user-token policy for a user name.
    pub(crate) slot: Arc<OnceLock<Arc<Session>>>,
    /// The settings (endpoint, identity, backoff) the reasons and retries follow.
    pub(crate) config: OpcuaConfig,
}

impl Driving {
    /// Reports a reason for being disconnected, waking watchers only when it changed (and
    /// saying whether it did).
    fn disconnected(&self, why: String) -> bool {
        self.session_state.send_if_modified(|s| {
            let new = SessionState::Disconnected(why);
            let changed = *s != new;
            *s = new;
            changed
        })
    }
}

/// Starts the session's background task; returns at once. Only configuration errors are
/// returned: an anonymous session is created here (not connected: its event loop connects once
/// polled), a user name's in the task, after the server has named its user-token policy.
pub(crate) fn start(run: Driving) -> Result<AbortHandle, Error> {
    let security = ChannelSecurity::resolve(&run.config.security)?;
    let client = client_builder(&run.config, &security)
        .client()
        .map_err(|errs| Error::Config(errs.join("; ")))?;
    let task = match run.config.identity {
        Identity::Anonymous => {
            let url = run.config.endpoint.clone();
            let endpoint = security.endpoint(&url, UserTokenPolicy::anonymous());
            let (session, event_loop) = open(client, endpoint, &run.config.identity)?;
            let _ = run.slot.set(session.clone());
            tokio::spawn(drive(event_loop, session, run))
        }
        Identity::UserName { .. } => tokio::spawn(log_in(client, security, run)),
    };
    Ok(task.abort_handle())
}

/// Creates the session on `endpoint` for `identity` (not connected yet).
fn open(
    mut client: Client,
    endpoint: EndpointDescription,
    identity: &Identity,
) -> Result<(Arc<Session>, SessionEventLoop<TcpConnector>), Error> {
    client
        .connect_to_endpoint_directly(endpoint, identity::token(identity))
        .map_err(|e| Error::Config(e.to_string()))
}

/// A user name's session: asks the server for its UserName policy (retrying with the
/// configured backoff while it cannot be asked or offers none), then makes and drives the
/// session.
async fn log_in(client: Client, security: ChannelSecurity, run: Driving) {
    let url = run.config.endpoint.clone();
    let channel = (security.policy, security.mode);
    let bound = run.config.request_timeout * 2;
    let mut wait = run.config.initial_backoff;
    let offered = loop {
        match identity::user_name_policy(&client, &url, channel, bound).await {
            Ok(offered) => break offered,
            Err((code, why)) => {
                let why = match code {
                    Some(code) => failure(code, &run.config.endpoint).await,
                    None => why,
                };
                tracing::debug!(endpoint = %url, %why, "OPC UA user-token policy not found");
                let _ = run.disconnected(why);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(run.config.max_backoff);
            }
        }
    };
    let user_policy = offered
        .user_identity_tokens
        .and_then(|t| t.into_iter().next())
        .unwrap_or_else(UserTokenPolicy::anonymous);
    let endpoint = security.endpoint(&url, user_policy);
    match open(client, endpoint, &run.config.identity) {
        Ok((session, event_loop)) => {
            let _ = run.slot.set(session.clone());
            drive(event_loop, session, run).await;
        }
        Err(e) => {
            run.session_state
                .send_replace(SessionState::Disconnected(e.to_string()));
        }
    }
}

/// The async-opcua client settings: identity, certificate handling, retry forever with the
/// configured backoff, keep-alive and timeouts.
fn client_builder(config: &OpcuaConfig, security: &ChannelSecurity) -> ClientBuilder {
    let secure = security.policy != SecurityPolicy::None;
    let builder = ClientBuilder::new()
        .application_name(config.application_name.clone())
        .application_uri(config.application_uri.clone())
        .product_uri("urn:closedloop")
        .pki_dir(security.pki_dir.clone())
        // A certificate is generated only when security needs one and none is given.
        .create_sample_keypair(secure && security.own.is_none())
        // The trust decision is the pin (`ChannelSecurity::endpoint`): the endpoint carries
        // the one certificate accepted, the channel is encrypted to it, and CreateSession
        // must present exactly it. Authority, host name and expiry checks would add nothing
        // to an exact match.
        .trust_server_certs(true)
        .verify_server_certs(false)
        .session_retry_limit(-1)
        .session_retry_initial(config.initial_backoff)
        .session_retry_max(config.max_backoff)
        .keep_alive_interval(config.keep_alive)
        .max_failed_keep_alive_count(config.max_failed_keep_alives)
        .request_timeout(config.request_timeout)
        .publish_timeout(config.request_timeout * 2 + Duration::from_secs(2))
        .min_publish_interval(Duration::from_millis(5))
        .session_name("closedloop");
    match &security.own {
        Some((cert, key)) => builder
            .certificate_path(cert.clone())
            .private_key_path(key.clone()),
        None => builder,
    }
}

/// Runs the session event loop and reports its transitions on `run.session_state`.
async fn drive(event_loop: SessionEventLoop<TcpConnector>, session: Arc<Session>, run: Driving) {
    use futures_util::StreamExt as _;
    let endpoint = run.config.endpoint.as_str();
    let stream = event_loop.enter();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(SessionPollResult::Reconnected(mode)) => {
                if matches!(mode, SessionConnectMode::NewSession(_)) {
                    run.caches.clear();
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
                run.session_state.send_replace(SessionState::Connected);
            }
            Ok(SessionPollResult::ConnectionLost(code)) => {
                tracing::warn!(%endpoint, status = %code, "OPC UA connection lost");
                run.session_state
                    .send_replace(SessionState::Disconnected(status_name(code)));
            }
            Ok(SessionPollResult::ReconnectFailed(code)) => {
                // A refused identity is retried like any failure (the server's user list may
                // change), but said once at warn level: it never fixes itself on this side.
                if let Some(why) = identity::refused(code, &run.config.identity) {
                    if run.disconnected(why.clone()) {
                        tracing::warn!(%endpoint, %why, "OPC UA server refused the identity");
                    }
                    continue;
                }
                let why = failure(code, endpoint).await;
                tracing::debug!(%endpoint, %why, "OPC UA connect attempt failed");
                let _ = run.disconnected(why);
            }
            Ok(_) => {}
            Err(code) => {
                let why = identity::refused(code, &run.config.identity)
                    .unwrap_or_else(|| status_name(code));
                run.session_state
                    .send_replace(SessionState::Disconnected(format!(
                        "{why} (the session gave up)"
                    )));
                break;
            }
        }
    }
}

/// The reason for a failed connect: the status, and for a communication error the socket's
/// own error when the socket does not open.
async fn failure(code: StatusCode, endpoint: &str) -> String {
    let why = status_name(code);
    if code == StatusCode::BadCommunicationError
        && let Some(socket) = probe(endpoint).await
    {
        return format!("{why}: {socket}");
    }
    why
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
    match tokio::time::timeout(Duration::from_secs(1), attempt).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer to the TCP connect within 1 s".into()),
    }
}
