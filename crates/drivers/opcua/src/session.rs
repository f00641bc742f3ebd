//! Opening an OPC UA session and running it: the async-opcua client built from an
//! [`OpcuaConfig`] (security, pinned server certificate, retry and timeout settings), and the
//! background task that turns the session's events into a [`Link`].
//!
//! Kept apart from the [`OpcuaClient`](crate::OpcuaClient) handle because none of it is per
//! request: it runs once per connect, then only in the background task.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use opcua::client::transport::TcpConnector;
use opcua::client::{
    ClientBuilder, IdentityToken, Session, SessionConnectMode, SessionEventLoop, SessionPollResult,
};
use opcua::crypto::SecurityPolicy;
use opcua::types::{
    ByteString, EndpointDescription, MessageSecurityMode, StatusCode, UserTokenPolicy,
};
use tokio::sync::watch;

use crate::Error;
use crate::client::Link;
use crate::config::{OpcuaConfig, Security, SecurityMode};
use crate::error::status_name;
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

    /// The endpoint to connect to directly (no discovery), carrying the pinned certificate.
    fn endpoint(self, url: &str) -> EndpointDescription {
        let mut endpoint: EndpointDescription = (
            url,
            self.policy.to_str(),
            self.mode,
            UserTokenPolicy::anonymous(),
        )
            .into();
        if let Some(der) = self.server_cert {
            endpoint.server_certificate = ByteString::from(der);
        }
        endpoint
    }
}

/// Creates the session (not connected yet: the returned event loop connects once polled).
/// Only configuration errors are returned.
pub(crate) fn open(
    config: &OpcuaConfig,
) -> Result<(Arc<Session>, SessionEventLoop<TcpConnector>), Error> {
    let security = ChannelSecurity::resolve(&config.security)?;
    let mut client = client_builder(config, &security)
        .client()
        .map_err(|errs| Error::Config(errs.join("; ")))?;
    let endpoint = security.endpoint(config.endpoint.as_str());
    client
        .connect_to_endpoint_directly(endpoint, IdentityToken::Anonymous)
        .map_err(|e| Error::Config(e.to_string()))
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

/// Runs the session event loop and reports its transitions on `link`.
pub(crate) async fn drive(
    event_loop: SessionEventLoop<TcpConnector>,
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
                if matches!(mode, SessionConnectMode::NewSession(_)) {
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
    match tokio::time::timeout(Duration::from_secs(1), attempt).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(_) => Some("no answer to the TCP connect within 1 s".into()),
    }
}
