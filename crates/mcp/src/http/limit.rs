//! A bound on requests in flight, with capacity kept for the calls that move or stop hardware.
//!
//! A request holds a permit from the moment it is accepted until its response body has been
//! sent or dropped — an SSE stream holds one for as long as it is open, since that is when the
//! work behind it happens. A quarter of the permits is reserved: only a `tools/call` of a tool
//! that acts or cancels, the operator page's cancel, and the page's sign-in form, sign-in and
//! assets may take one, so readers holding event streams or slow bodies can never keep an agent
//! (or an operator) from stopping an axis. Each token's own share of the permits is bounded
//! too, inside the auth layer (`shares.rs`). When no permit it may use is free, the request is
//! answered at once with 503 and `Retry-After: 1`: nothing queues, so an overload never turns
//! into unbounded memory or into answers that arrive after the client stopped waiting.
//!
//! Nothing scarce before authentication: this layer runs after the token was checked. A
//! request without a caller — the page's public paths (the sign-in form, its assets, `POST
//! /signin`) — takes a permit only from a small pool of its own ([`PREAUTH`], at most
//! [`PREAUTH_PER_PEER`] per address), never one of the general or reserved ones: slow sign-in
//! heads from two addresses once held the reserve, and the operator's cancel got 503 for 70 s.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Tools that only read: they never take a reserved permit.
const READ_ONLY_TOOLS: &[&str] = &[
    "get_command_status",
    "list_commands",
    "list_devices",
    "get_device_state",
    "describe_device",
    "can_signals",
    "can_decode",
    "opcua_browse",
    "opcua_read",
    "modbus_read",
    "list_alarms",
];

/// The share of the in-flight bound kept for tokens that hold (almost) nothing in flight, once
/// the general permits are spent (an eighth: 8 of 64): three readers with sixteen event streams
/// each once held all 48, and the signed-in operator's own page got 503.
pub(super) const NEWCOMERS_PER: usize = 8;
/// A token holding fewer requests than this may take a newcomer's permit.
const NEWCOMER_HOLDS: usize = 2;

/// How many requests the caller's token holds in flight besides this one (set by the auth
/// layer when the plant declares tokens).
#[derive(Debug, Clone, Copy)]
pub(super) struct Holding(pub usize);

/// Requests without a caller (the page's public paths) in flight at once, in all.
pub(super) const PREAUTH: usize = 8;
/// Of those, from one peer address (an IPv6 one by its /64).
pub(super) const PREAUTH_PER_PEER: usize = 2;

/// The permits of one HTTP endpoint.
pub(super) struct Limits {
    /// For every authenticated request.
    general: Arc<Semaphore>,
    /// Only for calls that act or cancel, once `general` is spent.
    reserved: Arc<Semaphore>,
    /// Only for requests without a caller: what is left to them never touches the others.
    preauth: Arc<Semaphore>,
    /// For tokens holding (almost) nothing, once `general` is spent.
    newcomers: Arc<Semaphore>,
    /// Requests without a caller in flight, per peer address.
    preauth_peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    /// The largest body read to find out which tool a call names.
    max_body: usize,
}

impl Limits {
    /// `total` permits for authenticated requests, a quarter of them reserved (none when
    /// `total` < 4) and an eighth kept for newcomers (none when `total` < 8).
    pub(super) fn new(total: usize, max_body: usize) -> Limits {
        let reserved = total / 4;
        let newcomers = total / NEWCOMERS_PER;
        Limits {
            general: Arc::new(Semaphore::new(total - reserved - newcomers)),
            reserved: Arc::new(Semaphore::new(reserved)),
            preauth: Arc::new(Semaphore::new(PREAUTH)),
            newcomers: Arc::new(Semaphore::new(newcomers)),
            preauth_peers: Arc::default(),
            max_body,
        }
    }
}

/// The axum middleware, inside the auth layer: a request it let through without a caller is
/// public work and gets a pre-authentication permit only.
pub(super) async fn layer(State(limits): State<Arc<Limits>>, req: Request, next: Next) -> Response {
    if req.extensions().get::<crate::Caller>().is_none() {
        let peer = super::client_addr::of(req.extensions());
        let Some(pass) = preauth_permit(&limits, peer) else {
            return busy();
        };
        return next.run(req).await.map(|inner| {
            Body::new(Held {
                inner,
                _permit: pass.permit,
                _peer: pass.peer,
            })
        });
    }
    let newcomer = (req.extensions().get::<Holding>()).is_some_and(|h| h.0 < NEWCOMER_HOLDS);
    let general = Arc::clone(&limits.general).try_acquire_owned();
    let general = match general {
        Err(_) if newcomer => Arc::clone(&limits.newcomers).try_acquire_owned(),
        other => other,
    };
    let (permit, req) = match general {
        Ok(p) => (p, req),
        Err(_) => match reserved_permit(&limits, req).await {
            Ok(granted) => granted,
            Err(refusal) => return refusal,
        },
    };
    next.run(req).await.map(|inner| {
        Body::new(Held {
            inner,
            _permit: permit,
            _peer: None,
        })
    })
}

/// A pre-authentication permit, with its place in its address's count.
struct Preauth {
    permit: OwnedSemaphorePermit,
    peer: Option<PeerPlace>,
}

/// One request's place in its peer address's pre-authentication count, given back on drop.
struct PeerPlace {
    peers: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Drop for PeerPlace {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = peers.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                peers.remove(&self.ip);
            }
        }
    }
}

/// A permit of the pre-authentication pool for a request from `peer`, or `None` when the pool
/// or the address's part of it is spent: the newest unauthenticated work is the one refused.
fn preauth_permit(limits: &Limits, peer: Option<IpAddr>) -> Option<Preauth> {
    let place = match peer.map(super::guessing::key) {
        Some(ip) => {
            let mut peers = (limits.preauth_peers.lock()).unwrap_or_else(|p| p.into_inner());
            let n = peers.entry(ip).or_insert(0);
            if *n >= PREAUTH_PER_PEER {
                return None;
            }
            *n += 1;
            Some(PeerPlace {
                peers: Arc::clone(&limits.preauth_peers),
                ip,
            })
        }
        None => None,
    };
    // Dropping `place` on refusal gives the address's count back.
    let permit = Arc::clone(&limits.preauth).try_acquire_owned().ok()?;
    Some(Preauth {
        permit,
        peer: place,
    })
}

/// 503 at once, nothing queued.
fn busy() -> Response {
    if let Some(left_out) = super::throttle::busy().allow() {
        tracing::warn!(
            left_out,
            "HTTP request refused: too many requests in flight"
        );
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        "too many requests in flight; retry in a second\n",
    )
        .into_response()
}

/// A reserved permit for a call that acts or cancels; 503 for anything else (or when the
/// reserve is spent too). The body is read to see the tool, then handed on unchanged.
async fn reserved_permit(
    limits: &Limits,
    req: Request,
) -> Result<(OwnedSemaphorePermit, Request), Response> {
    if limits.reserved.available_permits() == 0 {
        return Err(busy());
    }
    // The operator page's cancel button stops hardware too. (Its sign-in form and assets are
    // served without a caller, from the pre-authentication pool.)
    let path = req.uri().path();
    if super::page::is_cancel(path) {
        let permit = Arc::clone(&limits.reserved).try_acquire_owned();
        return Ok((permit.map_err(|_| busy())?, req));
    }
    if req.method() != Method::POST {
        return Err(busy());
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, limits.max_body).await else {
        return Err((StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n").into_response());
    };
    if !acts(&bytes) {
        return Err(busy());
    }
    let permit = Arc::clone(&limits.reserved)
        .try_acquire_owned()
        .map_err(|_| busy())?;
    Ok((permit, Request::from_parts(parts, Body::from(bytes))))
}

/// Whether a JSON-RPC body is a `tools/call` of a tool that is not read-only.
fn acts(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    v["method"] == "tools/call"
        && v["params"]["name"]
            .as_str()
            .is_some_and(|n| !READ_ONLY_TOOLS.contains(&n))
}

/// A response body that returns its permit (and its address's place) when it is finished or
/// dropped.
struct Held {
    inner: Body,
    _permit: OwnedSemaphorePermit,
    _peer: Option<PeerPlace>,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_that_act_or_cancel_may_use_the_reserve() {
        let call = |name: &str| {
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": name, "arguments": {}}})
            .to_string()
        };
        for name in [
            "slide_move_to",
            "cancel_command",
            "run_action",
            "confirm_command",
            "modbus_write",
        ] {
            assert!(acts(call(name).as_bytes()), "{name}");
        }
        for name in ["get_command_status", "list_devices", "modbus_read"] {
            assert!(!acts(call(name).as_bytes()), "{name}");
        }
        assert!(!acts(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
        assert!(!acts(b"not json"));
        let l = Limits::new(64, 1 << 20);
        assert_eq!(
            (
                l.general.available_permits(),
                l.reserved.available_permits(),
                l.newcomers.available_permits()
            ),
            (40, 16, 8)
        );
        let l = Limits::new(1, 1 << 20);
        assert_eq!(
            (
                l.general.available_permits(),
                l.reserved.available_permits()
            ),
            (1, 0)
        );
    }
}
