//! 2025-era sessions belong to the token that opened them, and are counted.
//!
//! Found on main: sessions were unbounded and not bound to a token — anyone holding a session id
//! could use it, and one caller could open sessions until memory ran out. Every request is still
//! authorised on its own token (a tool call's caller is never the session's opener), but a
//! session id used with another token is now refused with 403, and a token may hold at most
//! [`HttpOptions::max_sessions_per_caller`] sessions, the server
//! [`HttpOptions::max_sessions`]; one more is closed as it is opened and answered 429. Sessions
//! end with `DELETE` or after rmcp's five idle minutes, and then no longer count. A plant
//! without tokens has one caller, the local user: only the server's cap applies to it.
//!
//! [`HttpOptions::max_sessions_per_caller`]: super::HttpOptions::max_sessions_per_caller
//! [`HttpOptions::max_sessions`]: super::HttpOptions::max_sessions

use crate::Caller;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const SESSION_HEADER: &str = "mcp-session-id";

/// Who opened each live session, and the caps.
pub(super) struct Sessions {
    manager: Arc<LocalSessionManager>,
    opened_by: Mutex<HashMap<String, String>>,
    /// `None` when the plant declares no token (one caller: the server's cap is its cap).
    per_caller: Option<usize>,
    total: usize,
}

impl Sessions {
    pub(super) fn new(
        manager: Arc<LocalSessionManager>,
        per_caller: Option<usize>,
        total: usize,
    ) -> Sessions {
        Sessions {
            manager,
            opened_by: Mutex::new(HashMap::new()),
            per_caller,
            total,
        }
    }

    fn owner(&self, id: &str) -> Option<String> {
        self.book().get(id).cloned()
    }

    fn book(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.opened_by.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a session `caller` just opened; false when that puts it over a cap.
    async fn admit(&self, id: &str, caller: &str) -> bool {
        let live: Vec<String> = {
            let sessions = self.manager.sessions.read().await;
            sessions.keys().map(|k| k.to_string()).collect()
        };
        let mut book = self.book();
        // Sessions rmcp closed (DELETE, idle expiry) no longer count.
        book.retain(|k, _| live.iter().any(|l| l == k));
        let mine = book.values().filter(|c| *c == caller).count();
        if self.per_caller.is_some_and(|cap| mine >= cap) || book.len() >= self.total {
            return false;
        }
        book.insert(id.to_string(), caller.to_string());
        true
    }
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The layer: inside `auth`, so the request's caller is known.
pub(super) async fn layer(State(s): State<Arc<Sessions>>, req: Request, next: Next) -> Response {
    let caller = req
        .extensions()
        .get::<Caller>()
        .map(|c| c.name.clone())
        .unwrap_or_default();
    if let Some(id) = session_id(req.headers()) {
        if s.owner(&id).is_some_and(|owner| owner != caller) {
            return (
                StatusCode::FORBIDDEN,
                "this Mcp-Session-Id was opened with another token: a session belongs to the token that opened it; send initialize to open your own\n",
            )
                .into_response();
        }
        let closing = req.method() == axum::http::Method::DELETE;
        let mut response = next.run(req).await;
        // rmcp answers a closed session 202; the official SDKs expect 200 or 204 and log a
        // failure otherwise. The session is closed either way: say so as they expect.
        if closing && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        return response;
    }
    let response = next.run(req).await;
    let Some(id) = session_id(response.headers()) else {
        return response;
    };
    if s.admit(&id, &caller).await {
        return response;
    }
    let _ = s.manager.close_session(&id.as_str().into()).await;
    if let Some(left_out) = super::throttle::sessions().allow() {
        tracing::warn!(
            caller,
            left_out,
            "MCP session refused: too many sessions open"
        );
    }
    (
        StatusCode::TOO_MANY_REQUESTS,
        [("retry-after", "60")],
        format!(
            "{caller} already holds as many sessions as it may ({} a token, the server at most {}): close one with DELETE and its Mcp-Session-Id, or let one idle out (5 minutes), or use stateless 2026-07-28 requests, which need no session\n",
            s.per_caller.map_or("no cap".to_string(), |c| c.to_string()),
            s.total
        ),
    )
        .into_response()
}
