//! MCP over Streamable HTTP (docs/architecture.md): rmcp's `StreamableHttpService` at `/mcp`,
//! behind three layers of our own.
//!
//! A request passes, outermost first:
//! 1. `guard` — `Host` and `Origin` checks against DNS rebinding and cross-site requests
//!    (403);
//! 2. `auth` — the bearer token, turned into the [`Caller`] the tools see (401 without one,
//!    429 for a wrong one from an address held back after guessing); nothing scarce is taken
//!    before it;
//! 3. `limit` — at most [`HttpOptions::max_in_flight`] authenticated requests at once (503
//!    beyond), a quarter of them kept for tool calls that act or cancel; the page's public
//!    paths only from a small pool of their own;
//! 4. rmcp — the body bounded by [`HttpOptions::max_body_bytes`] (413 beyond), then MCP.
//!
//! Beside `/mcp`, behind the same layers: `/metrics` (`metrics_page`) and the operator page at
//! `/` (`page`), which a browser signs in to with a token kept in an HttpOnly cookie.
//!
//! One endpoint serves both generations of clients: 2025-era clients `initialize` and get a
//! session (`Mcp-Session-Id`); 2026-07-28 requests carry their protocol version in `_meta` and
//! are served statelessly, one request at a time (rmcp routes them; that is its
//! `legacy_session_mode`, which only ever applies to the older versions).
//!
//! Every request is authenticated on its own, session or not: the caller of a tool call is the
//! token of that HTTP request, never the one that opened the session.
//!
//! A client that goes away never cancels a physical command: the engine runs each command in
//! its own task, so dropping the request only stops the wait for its answer.
//!
//! The settings ([`HttpOptions`]) and the start-up refusals ([`HttpError`]) are in
//! `http/options.rs`; this file builds the router and serves it.

mod admission;
mod auth;
mod client_addr;
mod conn;
mod guard;
mod guessing;
mod limit;
mod metrics_page;
mod options;
mod page;
mod sessions;
mod shares;
mod throttle;
mod tls;

pub use client_addr::Net;
pub use metrics_page::{METRICS_PATH, serve_metrics};
pub use options::{HttpError, HttpOptions, check_allowed_hosts, check_listen};
pub use page::ACTION_HEADER;
pub use tls::Tls;

use crate::{Caller, Server};
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use closedloop_plant::Token;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";

/// How long [`serve`] lets open connections finish after the shutdown signal before it returns
/// anyway (an SSE stream of a client that does not hang up would otherwise hold it forever).
const DRAIN: Duration = Duration::from_secs(3);

/// The MCP endpoint at [`PATH`] with its guard, limit and auth layers.
///
/// Serve it with connect info ([`Endpoint`]): a request without a token is served as the local
/// user only when the plant declares no token *and* the connection arrived on a loopback
/// address; without connect info every request needs a token.
pub fn router(server: Server, opts: HttpOptions) -> axum::Router {
    router_with(server, opts, CancellationToken::new())
}

fn router_with(server: Server, opts: HttpOptions, shutdown: CancellationToken) -> axum::Router {
    let tokens = server.engine().plant().server.tokens.clone();
    // One for the page's sign-in and the bearer tokens alike: a guesser is one guesser.
    let auth = Arc::new(auth::Auth::new(
        tokens.clone(),
        opts.max_in_flight_per_caller,
    ));
    let metrics = metrics_page::routes(Arc::clone(server.engine()));
    let page = page::routes(
        Arc::clone(server.engine()),
        Arc::clone(&auth),
        opts.tls.is_some(),
        shutdown.clone(),
    );
    // One `Server` per session (2025) or per request (2026): a copy sharing the engine, with
    // the dead-man commands of its session, lapsed when rmcp drops it as the session ends.
    let on_stop = shutdown.clone();
    let factory = move || Ok(server.for_session(on_stop.clone()));
    let per_caller = (!tokens.is_empty()).then_some(opts.max_sessions_per_caller);
    let routes = mcp_routes(factory, per_caller, &opts, shutdown)
        .merge(metrics)
        .merge(page);
    with_layers(routes, auth, &opts)
}

/// closedloop's HTTP stack — Host/Origin guard, in-flight limit, bearer-token auth, sessions
/// bound to their token — around any
/// MCP service. `router` uses it with closedloop's [`Server`]; the conformance fixture mounts the
/// suite's fixture tools behind exactly the same layers.
pub fn router_for<S, F>(
    factory: F,
    tokens: Vec<Token>,
    opts: HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router
where
    S: rmcp::ServerHandler,
    F: Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
{
    // Without tokens the only caller is the local user: the server's session cap is its cap.
    let per_caller = (!tokens.is_empty()).then_some(opts.max_sessions_per_caller);
    let auth = Arc::new(auth::Auth::new(tokens, opts.max_in_flight_per_caller));
    with_layers(
        mcp_routes(factory, per_caller, &opts, shutdown),
        auth,
        &opts,
    )
}

/// `/mcp` alone: rmcp's service with the sessions layer (sessions bound to their token).
fn mcp_routes<S, F>(
    factory: F,
    per_caller: Option<usize>,
    opts: &HttpOptions,
    shutdown: CancellationToken,
) -> axum::Router
where
    S: rmcp::ServerHandler,
    F: Fn() -> Result<S, std::io::Error> + Send + Sync + 'static,
{
    // Host and Origin are checked by `guard`, in front of auth, so that rmcp's own copy of the
    // check is switched off here rather than kept with possibly different rules.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(opts.max_body_bytes)
        .with_json_response(true)
        .with_cancellation_token(shutdown);
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = Arc::new(sessions::Sessions::new(
        Arc::clone(&manager),
        per_caller,
        opts.max_sessions,
    ));
    let service: StreamableHttpService<S, LocalSessionManager> =
        StreamableHttpService::new(factory, manager, config);
    axum::Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            sessions::layer,
        ))
}

/// `routes` behind the guard (Host/Origin), the in-flight limit and bearer-token auth,
/// outermost first.
fn with_layers(routes: axum::Router, auth: Arc<auth::Auth>, opts: &HttpOptions) -> axum::Router {
    use axum::middleware::from_fn_with_state;
    let guard = Arc::new(guard::Guard::new(
        &opts.allowed_hosts,
        &opts.allowed_origins,
    ));
    let limit = Arc::new(limit::Limits::new(opts.max_in_flight, opts.max_body_bytes));
    let trusted = Arc::new(opts.trusted_proxies.clone());
    // Auth before the limit: nothing scarce is taken before the token is checked.
    routes
        .layer(from_fn_with_state(limit, limit::layer))
        .layer(from_fn_with_state(auth, auth::layer))
        .layer(from_fn_with_state(guard, guard::layer))
        .layer(axum::middleware::from_fn(metrics_page::counted))
        .layer(from_fn_with_state(trusted, client_addr::layer))
        .layer(axum::middleware::from_fn(headed))
}

/// Serves MCP on `listener` until `shutdown` completes, then lets open requests finish (at most
/// three seconds) and returns. Refuses a non-loopback listener when the plant has no token.
pub async fn serve(
    listener: TcpListener,
    server: Server,
    opts: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    check_listen(listener.local_addr()?, server.engine().plant())?;
    opts.validate()?;
    let stop = CancellationToken::new();
    let app = router_with(server, opts.clone(), stop.clone());
    run(listener, app, &opts, stop, shutdown).await
}

/// Serves `app` on `listener` through the guarded listener until `shutdown` completes; `stop`
/// is cancelled then, to end rmcp's sessions and SSE streams.
async fn run(
    listener: TcpListener,
    app: axum::Router,
    opts: &HttpOptions,
    stop: CancellationToken,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    let limits = conn::Limits {
        idle: opts.idle_timeout,
        request: opts.request_timeout,
        handshake: opts.handshake_timeout,
    };
    let slots = (opts.max_connections, opts.max_unauthenticated_per_peer);
    let listener = conn::Guarded::new(listener, slots, limits, opts.tls.clone());
    let signal = {
        let stop = stop.clone();
        async move {
            shutdown.await;
            // Ends rmcp's sessions and SSE streams, so the drain below does not wait on them.
            stop.cancel();
        }
    };
    let serving = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<Endpoint>(),
    )
    .with_graceful_shutdown(signal);
    tokio::select! {
        r = std::future::IntoFuture::into_future(serving) => r?,
        () = async { stop.cancelled().await; tokio::time::sleep(DRAIN).await } => {
            tracing::warn!("HTTP connections still open {DRAIN:?} after shutdown; leaving them");
        }
    }
    Ok(())
}

/// Where a connection arrived and where it came from, attached to every request by [`serve`].
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The server's own address for this connection (`None` if the OS would not say).
    pub local: Option<SocketAddr>,
    /// The client's address.
    pub remote: SocketAddr,
    /// What the connection has shown of itself (`admission.rs`): a request head, a token.
    /// `None` when served without [`serve`]'s guarded listener.
    conn: Option<Arc<admission::ConnState>>,
}

impl Endpoint {
    /// Whether the connection arrived on a loopback address (so came from this machine).
    pub fn is_loopback(&self) -> bool {
        self.local.is_some_and(|a| a.ip().is_loopback())
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for Endpoint {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Endpoint {
            local: stream.io().local_addr().ok(),
            remote: *stream.remote_addr(),
            conn: None,
        }
    }
}

impl Connected<IncomingStream<'_, conn::Guarded>> for Endpoint {
    // `io()` is the served connection, plain or TLS.
    fn connect_info(stream: IncomingStream<'_, conn::Guarded>) -> Self {
        Endpoint {
            local: stream.io().local_addr().ok(),
            remote: *stream.remote_addr(),
            conn: Some(Arc::clone(stream.io().watched().state())),
        }
    }
}

impl Endpoint {
    /// The connection's state, when served by [`serve`].
    fn conn(&self) -> Option<&admission::ConnState> {
        self.conn.as_deref()
    }
}

/// The outermost layer: a request reached the router, so its connection sent a whole request
/// head and the handshake window no longer applies to it.
async fn headed(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let endpoint = req
        .extensions()
        .get::<axum::extract::ConnectInfo<Endpoint>>();
    if let Some(conn) = endpoint.and_then(|e| e.0.conn()) {
        conn.headed();
    }
    next.run(req).await
}

/// The `Mcp-Session-Id` of this request: `Some` only for a call in a 2025-era HTTP session.
pub(crate) fn session_of(cx: &RequestContext<RoleServer>) -> Option<String> {
    let parts = cx.extensions.get::<http::request::Parts>()?;
    let id = parts.headers.get("mcp-session-id")?.to_str().ok()?;
    Some(id.to_string())
}

/// The caller the HTTP layer attached to this request; `None` off HTTP (stdio).
///
/// An HTTP request that somehow lacks one gets a caller with no scope at all: fail closed, never
/// fall back to the local user's every scope.
pub(crate) fn caller_from(cx: &RequestContext<RoleServer>) -> Option<Caller> {
    let parts = cx.extensions.get::<http::request::Parts>()?;
    Some(
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_else(|| Caller {
                name: "unauthenticated".into(),
                scopes: Vec::new(),
            }),
    )
}
