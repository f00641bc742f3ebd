//! Bearer tokens (docs/plant-file.md `[[server.token]]`, docs/architecture.md): `Authorization:
//! Bearer <secret>` becomes the [`Caller`] the tools see, named after the token and carrying its
//! scopes.
//!
//! The plant holds only the SHA-256 of each secret. The hash of the presented secret is compared
//! with every token's in constant time, so neither the answer's timing nor its content tells
//! how close a guess came.
//!
//! # Invariants
//! - A request without a token is served only when the plant declares no token at all, the
//!   connection arrived on a loopback address, its `Host` is a loopback name and it carries no
//!   `Forwarded` / `X-Forwarded-*` header; it then acts as the local user. A reverse proxy on
//!   the same host connects from loopback too, but it is not the local user.
//! - Every request that reaches rmcp carries exactly one `Caller` in its extensions.
//! - The operator page's cookie (`page.rs`) holds a token's secret and is checked exactly as
//!   `Authorization: Bearer` would be, but only on the page's paths; the page's public paths
//!   (the sign-in form, its assets) are served without a `Caller` rather than refused.

use super::Endpoint;
use crate::Caller;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use closedloop_plant::Token;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The tokens of the plant, with what keeps their use fair: failed guesses per peer address
/// (`guessing.rs`) and each token's share of the requests in flight (`shares.rs`).
#[derive(Debug)]
pub(super) struct Auth {
    tokens: Vec<Token>,
    pub(super) guessing: super::guessing::Guessing,
    /// `None` without tokens (the one caller is the local user).
    shares: Option<Arc<super::shares::Shares>>,
}

/// Why a request is refused with 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Denied {
    /// No `Authorization` header, and this server needs one.
    Missing,
    /// A header that is not a bearer token, or a secret no token has.
    Invalid,
}

impl Auth {
    /// The plant's `tokens`, each holding at most `share` requests in flight.
    pub(super) fn new(tokens: Vec<Token>, share: usize) -> Auth {
        let shares = (!tokens.is_empty()).then(|| super::shares::Shares::new(share));
        Auth {
            tokens,
            guessing: Default::default(),
            shares,
        }
    }

    /// Whether the plant declares tokens (without, a loopback client is the local user).
    pub(super) fn has_tokens(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The caller of a request with this `Authorization` header, on a loopback connection or
    /// not.
    pub(super) fn authenticate(
        &self,
        authorization: Option<&HeaderValue>,
        loopback: bool,
    ) -> Result<Caller, Denied> {
        let Some(value) = authorization else {
            return if self.tokens.is_empty() && loopback {
                Ok(Caller::local("http"))
            } else {
                Err(Denied::Missing)
            };
        };
        let secret = value
            .to_str()
            .ok()
            .and_then(|v| {
                let (scheme, rest) = v.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .filter(|s| !s.is_empty())
            .ok_or(Denied::Invalid)?;
        let presented = hex(&Sha256::digest(secret.as_bytes()));
        // Look at every token, whether or not an earlier one matched.
        let mut found: Option<&Token> = None;
        for t in &self.tokens {
            if eq_constant_time(presented.as_bytes(), t.sha256.as_bytes()) && found.is_none() {
                found = Some(t);
            }
        }
        found
            .map(|t| Caller {
                name: t.name.clone(),
                scopes: t.scopes.clone(),
            })
            .ok_or(Denied::Invalid)
    }
}

/// Whether a request names this host by a loopback name and was not forwarded by a proxy.
fn locally_addressed(headers: &axum::http::HeaderMap) -> bool {
    let forwarded = headers.contains_key(header::FORWARDED)
        || headers
            .keys()
            .any(|k| k.as_str().starts_with("x-forwarded-") || k.as_str() == "x-real-ip");
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(is_loopback_name);
    host && !forwarded
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
pub(super) fn is_loopback_name(host: &str) -> bool {
    let host = host.trim();
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None if host.matches(':').count() > 1 => host,
        None => host.split(':').next().unwrap_or(""),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The axum middleware: attaches the `Caller` or answers 401 with `WWW-Authenticate: Bearer`.
pub(super) async fn layer(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    let endpoint = req
        .extensions()
        .get::<ConnectInfo<Endpoint>>()
        .map(|ConnectInfo(e)| e.clone());
    let local =
        endpoint.as_ref().is_some_and(|e| e.is_loopback()) && locally_addressed(req.headers());
    // The operator page's sign-in cookie stands for the bearer token on the page's own paths
    // only: never on /mcp or /metrics, whose clients send the header.
    let page = super::page::access(req.uri().path());
    let presented = match req.headers().get(header::AUTHORIZATION) {
        Some(v) => Some(v.clone()),
        None if page.is_some() && !auth.tokens.is_empty() => {
            super::page::cookie_bearer(req.headers())
        }
        None => None,
    };
    let peer = super::client_addr::of(req.extensions());
    // A valid token is served whatever others guessed from the same address (an operator
    // behind the attacker's proxy once got 429 for five guesses not their own); only a wrong
    // one meets the hold, and a right one does not lift it for the guesses beside it.
    match auth.authenticate(presented.as_ref(), local) {
        Ok(caller) => {
            if let (Some(_), Some(ip)) = (&presented, peer) {
                let now = std::time::Instant::now();
                if let Err(wait_s) = auth.guessing.check(ip, now)
                    && !auth.guessing.known(ip, &caller.name)
                {
                    return held_back(ip, wait_s);
                }
                auth.guessing.succeeded(ip, &caller.name, now);
            }
            // Its connection keeps its slot now; one that may act keeps a reserved one.
            if let Some(conn) = endpoint.as_ref().and_then(|e| e.conn()) {
                // Budgets are per token; the local user is the one caller of a server without.
                let principal = auth.has_tokens().then_some(caller.name.as_str());
                conn.authenticated(caller.may_act(), principal);
            }
            run_as(&auth, caller, req, next).await
        }
        // The sign-in form and its assets are served to whoever is not signed in yet.
        Err(_) if page == Some(super::page::Access::Public) => next.run(req).await,
        Err(denied) => refuse(&auth, denied, peer, endpoint),
    }
}

/// Runs an authenticated request as `caller`, holding one of its token's share of the requests
/// in flight until the answer's body is dropped (503 when the share is spent).
async fn run_as(auth: &Auth, caller: Caller, mut req: Request, next: Next) -> Response {
    let share = match &auth.shares {
        Some(shares) => match shares.take(&caller.name) {
            Some(share) => Some(share),
            None => return share_spent(&caller.name, shares.cap()),
        },
        None => None,
    };
    if let Some(s) = &share {
        req.extensions_mut()
            .insert(super::limit::Holding(s.before()));
    }
    req.extensions_mut().insert(caller);
    let answer = next.run(req).await;
    match share {
        Some(_share) => {
            answer.map(|inner| axum::body::Body::new(super::shares::Holding { inner, _share }))
        }
        None => answer,
    }
}

/// 401 for a request without a valid token, a wrong one counted as a guess from its address
/// (429 once that address is held back).
fn refuse(
    auth: &Auth,
    denied: Denied,
    peer: Option<std::net::IpAddr>,
    endpoint: Option<Endpoint>,
) -> Response {
    if let (Denied::Invalid, Some(ip)) = (denied, peer) {
        if let Err(wait_s) = auth.guessing.check(ip, std::time::Instant::now()) {
            return held_back(ip, wait_s);
        }
        guessed(&auth.guessing, ip);
    }
    let (challenge, why) = match denied {
        Denied::Missing => (
            r#"Bearer realm="closedloop""#,
            "this server needs a bearer token: send Authorization: Bearer <secret> for a [[server.token]] of the plant",
        ),
        Denied::Invalid => (
            r#"Bearer realm="closedloop", error="invalid_token""#,
            "the bearer token matches no [[server.token]] of the plant",
        ),
    };
    if let Some(left_out) = super::throttle::unauthorized().allow() {
        tracing::warn!(remote = ?endpoint.map(|e| e.remote), client = ?peer, left_out, "HTTP request refused: {why}");
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        format!("{why}\n"),
    )
        .into_response()
}

/// A failed guess from `ip`, counted; logged (at most once a second) when it holds the address
/// back.
pub(super) fn guessed(guessing: &super::guessing::Guessing, ip: std::net::IpAddr) {
    metrics::counter!("closedloop_http_auth_failures_total", "outcome" => "invalid").increment(1);
    if guessing.failed(ip, std::time::Instant::now())
        && let Some(left_out) = super::throttle::held_back().allow()
    {
        tracing::warn!(%ip, left_out, "HTTP peer held back: {} failed authentications within {:?}", super::guessing::ALLOWED, super::guessing::WINDOW);
    }
}

/// 429 for a request from a peer address held back after failed guesses; its token is not
/// looked at.
pub(super) fn held_back(ip: std::net::IpAddr, wait_s: u64) -> Response {
    metrics::counter!("closedloop_http_auth_failures_total", "outcome" => "held_back").increment(1);
    if let Some(left_out) = super::throttle::held_back().allow() {
        tracing::warn!(%ip, left_out, wait_s, "HTTP request refused: its address is held back after failed authentications");
    }
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, wait_s.to_string())],
        format!("too many failed authentications from this address; retry in {wait_s} s\n"),
    )
        .into_response()
}

/// 503 for a request of a token that holds its whole share of the requests in flight.
fn share_spent(caller: &str, cap: usize) -> Response {
    metrics::counter!("closedloop_http_share_spent_total").increment(1);
    if let Some(left_out) = super::throttle::busy().allow() {
        tracing::warn!(
            caller,
            left_out,
            "HTTP request refused: the token holds its share of the requests in flight"
        );
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "1")],
        format!(
            "this token ({caller}) already has {cap} requests or streams in flight, its share; \
             close some (an event stream, a session) or retry in a second\n"
        ),
    )
        .into_response()
}

/// Lower-case hex, as the plant file writes hashes.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Equality whose running time depends only on the lengths.
fn eq_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_plant::TokenScope;

    fn token(name: &str, secret: &str) -> Token {
        Token {
            name: name.into(),
            sha256: hex(&Sha256::digest(secret.as_bytes())),
            scopes: vec![TokenScope::Read],
        }
    }

    fn bearer(s: &str) -> HeaderValue {
        HeaderValue::from_str(s).unwrap()
    }

    #[test]
    fn a_forwarded_request_or_another_host_name_is_not_the_local_user() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut h = axum::http::HeaderMap::new();
            for (k, v) in pairs {
                h.insert(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            h
        };
        for host in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:80",
            "127.1.2.3",
        ] {
            assert!(locally_addressed(&headers(&[("host", host)])), "{host}");
        }
        for host in [
            "gw.example",
            "gw.example:443",
            "10.0.0.5:80",
            "[fe80::1]:80",
        ] {
            assert!(!locally_addressed(&headers(&[("host", host)])), "{host}");
        }
        for proxy in [
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-host", "gw.example"),
            ("forwarded", "for=203.0.113.9"),
            ("x-real-ip", "203.0.113.9"),
        ] {
            let h = headers(&[("host", "127.0.0.1:8080"), proxy]);
            assert!(!locally_addressed(&h), "{proxy:?}");
        }
        assert!(!locally_addressed(&headers(&[])), "no Host");
    }

    #[test]
    fn hex_matches_sha256sum() {
        // printf %s abc | sha256sum
        assert_eq!(
            hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn without_tokens_loopback_is_the_local_user_and_elsewhere_is_refused() {
        let a = Auth::new(vec![], 16);
        assert_eq!(a.authenticate(None, true), Ok(Caller::local("http")));
        assert_eq!(a.authenticate(None, false), Err(Denied::Missing));
        assert_eq!(
            a.authenticate(Some(&bearer("Bearer x")), true),
            Err(Denied::Invalid)
        );
    }

    #[test]
    fn with_tokens_a_token_is_needed_on_loopback_too() {
        let a = Auth::new(vec![token("ops", "s3cret"), token("viewer", "v")], 16);
        assert_eq!(a.authenticate(None, true), Err(Denied::Missing));
        let c = a
            .authenticate(Some(&bearer("Bearer s3cret")), true)
            .unwrap();
        assert_eq!(c.name, "ops");
        assert_eq!(c.scopes, vec![TokenScope::Read]);
        let c = a.authenticate(Some(&bearer("bearer  v ")), false).unwrap();
        assert_eq!(c.name, "viewer");
        for bad in [
            "Bearer S3CRET",
            "Bearer",
            "Basic czNjcmV0",
            "s3cret",
            "Bearer ",
        ] {
            assert_eq!(
                a.authenticate(Some(&bearer(bad)), true),
                Err(Denied::Invalid),
                "{bad}"
            );
        }
    }

    #[test]
    fn constant_time_equality() {
        assert!(eq_constant_time(b"abc", b"abc"));
        assert!(!eq_constant_time(b"abc", b"abd"));
        assert!(!eq_constant_time(b"abc", b"ab"));
    }
}
