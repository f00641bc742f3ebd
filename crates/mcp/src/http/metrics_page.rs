//! `GET /metrics` beside the MCP endpoint, behind the same guard, limit and token checks: a
//! scraper needs a token with `read` (or, with no token declared, a loopback connection), as
//! every read does. Also served alone by [`super::serve_metrics`] for a stdio server.

use crate::Caller;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use closedloop_engine::Engine;
use std::sync::Arc;

/// The path the metrics are served at.
pub const METRICS_PATH: &str = "/metrics";

/// The Prometheus text exposition format, version 0.0.4.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A router with only `/metrics`, for the engine given.
pub(super) fn routes(engine: Arc<Engine>) -> axum::Router {
    crate::metrics::install();
    axum::Router::new()
        .route(METRICS_PATH, axum::routing::get(page))
        .with_state(engine)
}

/// The outermost layer: requests in flight, and every answer counted by its status (so the
/// 401, 403, 413, 429 and 503 refusals of the layers inside show).
pub(super) async fn counted(req: Request, next: axum::middleware::Next) -> Response {
    let in_flight = InFlight::new();
    let answer = next.run(req).await;
    drop(in_flight);
    let status = answer.status().as_u16().to_string();
    metrics::counter!("closedloop_http_responses_total", "status" => status).increment(1);
    answer
}

/// One request in `closedloop_http_requests_in_flight`, until dropped: a request whose client
/// went away (its future dropped) leaves the gauge too.
struct InFlight(metrics::Gauge);

impl InFlight {
    fn new() -> InFlight {
        let gauge = metrics::gauge!("closedloop_http_requests_in_flight");
        gauge.increment(1.0);
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

async fn page(State(engine): State<Arc<Engine>>, req: Request) -> Response {
    let may_read = req
        .extensions()
        .get::<Caller>()
        .is_some_and(Caller::may_read);
    if !may_read {
        let why = "reading /metrics needs a token with the read scope";
        return (StatusCode::FORBIDDEN, why).into_response();
    }
    match crate::metrics::render(&engine) {
        Some(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        None => {
            let why = "another metrics recorder is installed in this process";
            (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
        }
    }
}

/// Serves `/metrics` alone on `listener` — `closedloop serve PLANT --metrics ADDR`, for a stdio
/// server that has no HTTP endpoint of its own — behind the same guard, limits and token checks
/// as the MCP endpoint, until `shutdown` completes. Refuses a listener beyond loopback when the
/// plant declares no token, as [`super::serve`] does.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    engine: Arc<Engine>,
    opts: super::HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), super::HttpError> {
    super::check_listen(listener.local_addr()?, engine.plant())?;
    opts.validate()?;
    let tokens = engine.plant().server.tokens.clone();
    let auth = Arc::new(super::auth::Auth::new(
        tokens,
        opts.max_in_flight_per_caller,
    ));
    let app = super::with_layers(routes(engine), auth, &opts);
    let stop = tokio_util::sync::CancellationToken::new();
    super::run(listener, app, &opts, stop, shutdown).await
}
