//! What the HTTP endpoint accepts and why it refuses to start: [`HttpOptions`] (hosts,
//! origins, bounds, TLS) with its checks, [`HttpError`], and the two start-up refusals about
//! tokens ([`check_listen`], [`check_allowed_hosts`]).
//!
//! Kept apart from `http.rs`, which builds the router and serves it: these are the settings
//! and their validation, read before anything listens, and `http.rs` re-exports every item
//! here so the public paths (`closedloop_mcp::http::HttpOptions`, ...) stay as they were.

use super::Tls;
use super::auth;
use closedloop_plant::Plant;
use std::net::SocketAddr;
use std::time::Duration;

/// What the HTTP endpoint accepts. `Default` is the safe local setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// `Host` header values served: `name` (any port) or `name:port`; IPv6 in brackets.
    /// Anything else is 403: a page on a rebinding domain reaches the server with its own name
    /// in `Host`. Default: `localhost`, `127.0.0.1`, `[::1]`, any port.
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s served: `scheme://host` (the scheme's default port),
    /// `scheme://host:port`, `scheme://host:*` (any port) or `null`. A request without `Origin`
    /// (any non-browser client) passes; one with another Origin is 403. Default: `http` and
    /// `https` on `localhost`, `127.0.0.1` and `[::1]`, any port.
    pub allowed_origins: Vec<String>,
    /// Largest request body in bytes; a larger one is refused with 413 while it is read,
    /// whatever `Content-Length` says. Default 1 MiB.
    pub max_body_bytes: usize,
    /// Requests in flight at once, SSE streams included (a 2025 session keeps one open). One
    /// more is refused at once with 503 and `Retry-After: 1`, not queued. Default 64.
    pub max_in_flight: usize,
    /// Requests in flight one token may hold at once, streams included (only when the plant
    /// declares tokens); one more from it is refused with 503, nobody else's. Default 16, a
    /// quarter of `max_in_flight`.
    pub max_in_flight_per_caller: usize,
    /// Connections open at once. When all are taken, a new one evicts the oldest that never
    /// authenticated (then the oldest read-only one while readers hold more than three
    /// quarters); connections that authenticated with an actuate scope are never evicted. A new
    /// one that can evict nothing is closed as soon as it is accepted. Default 256.
    pub max_connections: usize,
    /// Connections from one peer address that have not authenticated, at once; one more from
    /// that address is closed as it is accepted. Default 32.
    pub max_unauthenticated_per_peer: usize,
    /// A connection whose first request head has not arrived this long after it opened is
    /// closed. Default 5 s.
    pub handshake_timeout: Duration,
    /// A connection on which no byte moved either way for this long is closed (a peer that
    /// never sends, stalls in its headers or body, or idles between requests). SSE streams
    /// carry a keep-alive every 15 s. Default 60 s.
    pub idle_timeout: Duration,
    /// A request (headers and body) still arriving this long after its first byte, with no
    /// answer begun, closes its connection: a peer trickling a byte at a time is never idle.
    /// Default 30 s.
    pub request_timeout: Duration,
    /// 2025-era sessions one token may hold at once; the server holds at most `max_sessions`.
    /// One more is closed as it is opened and answered 429. Defaults 16 and 256.
    pub max_sessions_per_caller: usize,
    /// See `max_sessions_per_caller`.
    pub max_sessions: usize,
    /// Serve HTTPS with this certificate and key instead of plain HTTP. Default: none.
    pub tls: Option<Tls>,
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`): behind one, every
    /// per-address rule (the guessing hold, the pre-authentication pool) counts the client it
    /// forwarded for, not the proxy. Default: none, the peer is the client.
    pub trusted_proxies: Vec<super::Net>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        let loopback = ["localhost", "127.0.0.1", "[::1]"];
        HttpOptions {
            allowed_hosts: loopback.iter().map(|h| h.to_string()).collect(),
            allowed_origins: ["http", "https"]
                .iter()
                .flat_map(|s| loopback.iter().map(move |h| format!("{s}://{h}:*")))
                .collect(),
            max_body_bytes: 1024 * 1024,
            max_in_flight: 64,
            max_in_flight_per_caller: 16,
            max_connections: 256,
            max_unauthenticated_per_peer: 32,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_sessions_per_caller: 16,
            max_sessions: 256,
            tls: None,
            trusted_proxies: Vec::new(),
        }
    }
}

impl HttpOptions {
    /// Checks every allowed host and origin, naming the first that cannot be understood.
    pub fn validate(&self) -> Result<(), HttpError> {
        for h in &self.allowed_hosts {
            closedloop_origin::HostRule::parse(h)
                .map_err(|why| HttpError::BadHost(h.clone(), why))?;
        }
        for o in &self.allowed_origins {
            closedloop_origin::OriginRule::parse(o)
                .map_err(|why| HttpError::BadOrigin(o.clone(), why))?;
        }
        if self.max_in_flight == 0
            || self.max_body_bytes == 0
            || self.max_connections == 0
            || self.idle_timeout.is_zero()
            || self.request_timeout.is_zero()
            || self.max_sessions_per_caller == 0
            || self.max_sessions == 0
        {
            return Err(HttpError::ZeroLimit);
        }
        Ok(())
    }
}

/// Why the HTTP endpoint cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// A listen address others can reach, and no token to tell them apart.
    #[error(
        "{0} is reachable from other machines and the plant declares no [[server.token]], so anyone who can reach it could move the hardware; add a [[server.token]] (name, sha256 of the secret, scopes) to the plant file, or listen on 127.0.0.1"
    )]
    NoTokens(SocketAddr),
    /// `--allow-host` of a name that is not loopback, with no token: the set-up of a reverse
    /// proxy, which connects from 127.0.0.1 on behalf of everyone behind it.
    #[error(
        "--allow-host {0} admits requests under a name other than loopback (a reverse proxy's), and the plant declares no [[server.token]]: everyone behind that proxy would act as the local user; add a [[server.token]] to the plant file, or drop --allow-host {0}"
    )]
    ProxyWithoutTokens(String),
    /// An `allowed_hosts` entry that is not a host.
    #[error("allowed host {0:?}: {1}")]
    BadHost(String, String),
    /// An `allowed_origins` entry that is not an origin.
    #[error("allowed origin {0:?}: {1}")]
    BadOrigin(String, String),
    /// A limit of zero would refuse every request.
    #[error(
        "max_in_flight, max_body_bytes, max_connections, idle_timeout, request_timeout, max_sessions_per_caller and max_sessions must be above zero"
    )]
    ZeroLimit,
    /// The TLS certificate or key could not be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The listener failed.
    #[error("HTTP listener: {0}")]
    Io(#[from] std::io::Error),
}

/// Refuses a listen address beyond loopback when the plant declares no token
/// (docs/architecture.md).
pub fn check_listen(addr: SocketAddr, plant: &Plant) -> Result<(), HttpError> {
    if !addr.ip().is_loopback() && plant.server.tokens.is_empty() {
        return Err(HttpError::NoTokens(addr));
    }
    Ok(())
}

/// Refuses `--allow-host` names other than loopback when the plant declares no token: such a
/// name is a reverse proxy's, and without tokens everyone behind it would be the local user.
pub fn check_allowed_hosts(allow_hosts: &[String], plant: &Plant) -> Result<(), HttpError> {
    if !plant.server.tokens.is_empty() {
        return Ok(());
    }
    match allow_hosts.iter().find(|h| !auth::is_loopback_name(h)) {
        Some(h) => Err(HttpError::ProxyWithoutTokens(h.clone())),
        None => Ok(()),
    }
}
