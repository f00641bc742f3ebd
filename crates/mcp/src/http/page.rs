//! The operator page at `/` (docs/http.md, "Operator page"): what a person on the shop floor sees of
//! the plant and of the commands agents run — devices with their liveness and readings, commands
//! as they happen, one command's timeline as a chart — and a cancel button for a running one.
//!
//! It is served behind the same guard, limit and auth layers as `/mcp`, and reads the engine
//! exactly as the MCP tools do, with the same scopes: any scope to see anything, `actuate` on a
//! device to cancel its commands.
//!
//! # Signing in
//! A browser cannot be made to send `Authorization: Bearer`, so the sign-in form POSTs the
//! token once and the server, after checking it, keeps it in a cookie (`HttpOnly` — the page's
//! scripts never see it — `SameSite=Strict`, `Path=/`, `Secure` under TLS). The auth layer
//! takes that cookie for the bearer token on the page's own paths only ([`access`]), never on
//! `/mcp` or `/metrics`. A token never travels in a URL. With no token declared, a loopback
//! client is the local user, as everywhere else, and needs no sign-in; the page says so rather
//! than naming a user. The form speaks to people on the floor of an "access code" (the token's
//! secret) from their administrator ([`signin`]).
//!
//! # Words for people
//! The page shows one time format everywhere (24-hour with the date, in the browser's zone; the
//! zone and the UTC time on hover), a command's timeline in words (`words.js`), and how each
//! device's values arrive: a poll period for a polled device, the silence allowed for one that
//! pushes its values ([`reporting`]).
//!
//! # Cross-site requests
//! The one request that acts, `POST /page/commands/{id}/cancel`, needs the header
//! [`ACTION_HEADER`]: a form or a link on another site cannot set it, and a script there could
//! only with a CORS preflight this server never grants. The cookie is `SameSite=Strict` besides,
//! and the guard refuses a foreign `Origin`.
//!
//! The HTML, CSS and JavaScript are compiled into the binary; nothing comes from elsewhere.

mod events;
mod forms;
mod reporting;
mod signin;

pub(super) use forms::cookie_bearer;

use super::auth::Auth;
use crate::Caller;
use axum::Extension;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use closedloop_engine::{Engine, EngineError};
use forms::form_value;
use serde_json::json;
use signin::{sign_in, sign_in_form, sign_out};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The cookie that holds the signed-in token.
pub(super) const COOKIE: &str = "closedloop_token";
/// The header a cancel from the page must carry (any value): proof it came from a script of
/// this origin, not from a form or a link elsewhere.
pub const ACTION_HEADER: &str = "x-closedloop-action";
/// How long a cancel waits for the device to read stopped before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(5);
/// The most commands one list shows.
const LIST_LIMIT: u32 = 200;

const INDEX_HTML: &str = include_str!("page/index.html");
const SIGNIN_HTML: &str = include_str!("page/signin.html");
const APP_JS: &str = include_str!("page/app.js");
const WORDS_JS: &str = include_str!("page/words.js");
const CHART_JS: &str = include_str!("page/chart.js");
const APP_CSS: &str = include_str!("page/app.css");

/// Whether a path is the page's, and whether someone not signed in may have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// The sign-in form, its assets, and signing in or out.
    Public,
    /// Data, events and cancel: a caller with a scope only.
    Private,
}

/// The page's paths, for the auth layer: the cookie counts there only.
pub(super) fn access(path: &str) -> Option<Access> {
    match path {
        "/" | "/signin" | "/signout" | "/page/app.js" | "/page/words.js" | "/page/chart.js"
        | "/page/app.css" => Some(Access::Public),
        p if p.starts_with("/page/") => Some(Access::Private),
        _ => None,
    }
}

/// Whether a path is the page's cancel, which may take a permit kept for calls that stop
/// hardware (`limit`).
pub(super) fn is_cancel(path: &str) -> bool {
    path.strip_prefix("/page/commands/")
        .is_some_and(|rest| rest.ends_with("/cancel"))
}

/// What the page's handlers share.
struct Page {
    engine: Arc<Engine>,
    auth: Arc<Auth>,
    /// Served over TLS: the cookie gets `Secure`.
    secure: bool,
    /// Ends the event streams when the server shuts down.
    stop: CancellationToken,
}

/// The page's routes, for `router_with` to put behind its layers.
pub(super) fn routes(
    engine: Arc<Engine>,
    auth: Arc<Auth>,
    secure: bool,
    stop: CancellationToken,
) -> axum::Router {
    let page = Arc::new(Page {
        engine,
        auth,
        secure,
        stop,
    });
    axum::Router::new()
        .route("/", get(index))
        .route("/signin", post(sign_in))
        .route("/signout", post(sign_out))
        .route("/page/app.js", get(|| asset(APP_JS, "text/javascript")))
        .route("/page/words.js", get(|| asset(WORDS_JS, "text/javascript")))
        .route("/page/chart.js", get(|| asset(CHART_JS, "text/javascript")))
        .route("/page/app.css", get(|| asset(APP_CSS, "text/css")))
        .route("/page/state", get(state))
        .route("/page/commands", get(commands))
        .route("/page/commands/{id}", get(command))
        .route("/page/commands/{id}/cancel", post(cancel))
        .route("/page/events", get(events))
        .with_state(page)
}

/// Headers every page answer carries: nothing cached, nothing from elsewhere, never framed.
fn hardened(mut r: Response) -> Response {
    let h = r.headers_mut();
    let csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
               connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        // Not `no-referrer`: under it a browser sends `Origin: null` with the page's own
        // form posts, which the guard (rightly) refuses.
        HeaderValue::from_static("same-origin"),
    );
    r
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    let ctype = format!("{kind}; charset=utf-8");
    hardened(([(header::CONTENT_TYPE, ctype)], body).into_response())
}

fn html(status: StatusCode, body: String) -> Response {
    let ctype = "text/html; charset=utf-8";
    hardened((status, [(header::CONTENT_TYPE, ctype)], body).into_response())
}

fn json_answer(status: StatusCode, v: &serde_json::Value) -> Response {
    let ctype = "application/json";
    hardened((status, [(header::CONTENT_TYPE, ctype)], v.to_string()).into_response())
}

/// A refusal the page's script shows as it is.
fn refused(status: StatusCode, why: &str) -> Response {
    json_answer(status, &json!({"error": why}))
}

async fn index(caller: Option<Extension<Caller>>) -> Response {
    match caller {
        Some(Extension(c)) if c.may_read() => html(StatusCode::OK, INDEX_HTML.to_string()),
        Some(_) => sign_in_form(StatusCode::FORBIDDEN, signin::NO_SCOPE),
        None => sign_in_form(StatusCode::OK, ""),
    }
}

/// The caller, if it may read.
fn reader(caller: Option<Extension<Caller>>) -> Option<Caller> {
    caller.map(|Extension(c)| c).filter(Caller::may_read)
}

/// The answer to a caller that may not read.
fn cannot_read() -> Response {
    refused(
        StatusCode::FORBIDDEN,
        "reading the operator page needs a token with the read scope",
    )
}

/// `GET /page/state`: who is signed in (or that the caller is the local user), and every device
/// with its state and how its values arrive ([`reporting`]).
async fn state(State(page): State<Arc<Page>>, caller: Option<Extension<Caller>>) -> Response {
    let Some(caller) = reader(caller) else {
        return cannot_read();
    };
    let devices: Vec<serde_json::Value> = page
        .engine
        .devices(0, events::MAX_DEVICES)
        .into_iter()
        .map(|d| {
            let state = page.engine.device_state(&d.device);
            let may_cancel = caller.may_actuate(&d.device);
            let reporting = page
                .engine
                .plant()
                .device(&d.device)
                .map(reporting::reporting);
            json!({"info": d, "state": state, "may_cancel": may_cancel, "reporting": reporting})
        })
        .collect();
    let plant = &page.engine.plant().server.name;
    // Without tokens every reader is the local user (a loopback client): nobody signed in.
    let local = !page.auth.has_tokens();
    let body = json!({
        "plant": plant,
        "caller": caller.name,
        "local_user": local,
        "needs_sign_in": !local,
        "devices": devices,
    });
    json_answer(StatusCode::OK, &body)
}

/// `GET /page/commands?device=&status=`: the newest commands, without their timelines.
async fn commands(State(page): State<Arc<Page>>, req: Request) -> Response {
    if reader(req.extensions().get::<Caller>().cloned().map(Extension)).is_none() {
        return cannot_read();
    }
    let query = req.uri().query().unwrap_or("");
    let device = form_value(query, "device").filter(|s| !s.is_empty());
    let status = form_value(query, "status").filter(|s| !s.is_empty());
    let listed = page
        .engine
        .list(device.as_deref(), status.as_deref(), LIST_LIMIT)
        .await;
    match listed {
        Ok(list) => json_answer(StatusCode::OK, &json!({"commands": list})),
        Err(e) => engine_failure(&e),
    }
}

/// `GET /page/commands/{id}`: one command with its whole timeline, read without renewing it.
async fn command(
    State(page): State<Arc<Page>>,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
) -> Response {
    if reader(caller).is_none() {
        return cannot_read();
    }
    match page.engine.peek(&id).await {
        Ok(result) => json_answer(StatusCode::OK, &json!(result)),
        Err(e) => engine_failure(&e),
    }
}

/// `POST /page/commands/{id}/cancel`: what `cancel_command` does, for a caller that may actuate
/// the command's device, from a script of this origin.
async fn cancel(
    State(page): State<Arc<Page>>,
    Path(id): Path<String>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
) -> Response {
    if !headers.contains_key(ACTION_HEADER) {
        let why = format!(
            "a cancel from the operator page must carry the {ACTION_HEADER} header (the page's own script sends it); cancel from an agent with the cancel_command tool"
        );
        return refused(StatusCode::FORBIDDEN, &why);
    }
    let Some(caller) = reader(caller) else {
        return cannot_read();
    };
    let device = match page.engine.peek(&id).await {
        Ok(r) => r.device,
        Err(e) => return engine_failure(&e),
    };
    if !caller.may_actuate(&device) {
        let why = format!(
            "the token {:?} may not cancel commands of {device}: that needs actuate:{device} (or actuate:*)",
            caller.name
        );
        return refused(StatusCode::FORBIDDEN, &why);
    }
    tracing::info!(command_id = %id, caller = %caller.name, "cancel from the operator page");
    match page.engine.cancel(&id, CANCEL_WAIT).await {
        Ok(result) => json_answer(StatusCode::OK, &json!(result)),
        Err(e) => engine_failure(&e),
    }
}

/// `GET /page/events`: the live feed.
async fn events(State(page): State<Arc<Page>>, caller: Option<Extension<Caller>>) -> Response {
    if reader(caller).is_none() {
        return cannot_read();
    }
    hardened(events::response(
        Arc::clone(&page.engine),
        page.stop.clone(),
    ))
}

fn engine_failure(e: &EngineError) -> Response {
    match e {
        EngineError::UnknownCommand(id) => refused(
            StatusCode::NOT_FOUND,
            &format!("no command has the id {id:?}"),
        ),
        other => refused(StatusCode::INTERNAL_SERVER_ERROR, &other.to_string()),
    }
}

#[cfg(test)]
mod tests;
