//! Signing in and out of the operator page: the form, the cookie that keeps the access code (a
//! `[[server.token]]` secret of the plant), and the words the form says to someone on the floor,
//! who knows an access code from an administrator, not the plant file.

use super::forms::{encode, escape, form_value};
use super::{COOKIE, Page, SIGNIN_HTML, hardened, html};
use crate::http::{auth, throttle};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The form's answer to a code that lets its holder do nothing (a token without scopes).
pub(super) const NO_SCOPE: &str = "This access code allows nothing on this page. Ask your administrator for one that lets you watch.";
/// The form's answer to a code no token has.
const UNKNOWN: &str = "That access code is not known here. Check it with your administrator.";

/// The sign-in form, saying why it is shown again when there is a reason.
pub(super) fn sign_in_form(status: StatusCode, message: &str) -> Response {
    let shown = if message.is_empty() {
        String::new()
    } else {
        format!(r#"<p class="error" role="alert">{}</p>"#, escape(message))
    };
    html(status, SIGNIN_HTML.replace("{{message}}", &shown))
}

/// Whether a form post comes from the page itself: its `Origin`, when the browser sends one
/// (every current browser does on a POST), names the very host the request is addressed to.
/// A page on another origin — `http://localhost:3000` included, which the guard lets through
/// as a loopback name — once signed the operator out and in with a code of its own.
pub(super) fn same_origin(headers: &axum::http::HeaderMap, uri: &axum::http::Uri) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    // HTTP/2 names the host in the request's authority, not in a Host header.
    let host = (headers.get(header::HOST).and_then(|h| h.to_str().ok()))
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let origin_host = (origin.to_str().ok())
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

/// 403 for a form posted from another origin.
fn cross_origin() -> Response {
    hardened(
        (
            StatusCode::FORBIDDEN,
            "this form may only be sent from the operator page itself\n",
        )
            .into_response(),
    )
}

/// `POST /signin` with the form's `token`: a cookie and back to `/`, or the form again.
pub(super) async fn sign_in(State(page): State<Arc<Page>>, req: Request) -> Response {
    if !same_origin(req.headers(), req.uri()) {
        return cross_origin();
    }
    let peer = crate::http::client_addr::of(req.extensions());
    let body = match axum::body::to_bytes(req.into_body(), 8 * 1024).await {
        Ok(b) => b,
        Err(_) => return sign_in_form(StatusCode::PAYLOAD_TOO_LARGE, "The form was too large."),
    };
    let token = form_value(&String::from_utf8_lossy(&body), "token").unwrap_or_default();
    let token = token.trim();
    let bearer = HeaderValue::from_str(&format!("Bearer {token}")).ok();
    let caller = bearer.and_then(|b| page.auth.authenticate(Some(&b), false).ok());
    if let (Some(c), Some(ip)) = (&caller, peer) {
        let now = std::time::Instant::now();
        if let Err(wait_s) = page.auth.guessing.check(ip, now)
            && !page.auth.guessing.known(ip, &c.name)
        {
            return auth::held_back(ip, wait_s);
        }
        page.auth.guessing.succeeded(ip, &c.name, now);
    }
    match caller {
        Some(c) if c.may_read() => {
            let cookie = format!("{COOKIE}={}; {}", encode(token), attributes(page.secure));
            let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            hardened(r)
        }
        Some(_) => sign_in_form(StatusCode::FORBIDDEN, NO_SCOPE),
        None => {
            // Counted with the other 401s: a guesser at the form is as visible as one at /mcp,
            // and held back as one. A right token was served above whatever was guessed.
            if let Some(ip) = peer {
                if let Err(wait_s) = page.auth.guessing.check(ip, std::time::Instant::now()) {
                    return auth::held_back(ip, wait_s);
                }
                auth::guessed(&page.auth.guessing, ip);
            }
            if let Some(left_out) = throttle::unauthorized().allow() {
                tracing::warn!(left_out, "operator page sign-in refused: no such token");
            }
            sign_in_form(StatusCode::UNAUTHORIZED, UNKNOWN)
        }
    }
}

/// `POST /signout`: the cookie expired, back to the form.
pub(super) async fn sign_out(State(page): State<Arc<Page>>, req: Request) -> Response {
    if !same_origin(req.headers(), req.uri()) {
        return cross_origin();
    }
    let cookie = format!("{COOKIE}=; Max-Age=0; {}", attributes(page.secure));
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    hardened(r)
}

pub(super) fn attributes(secure: bool) -> &'static str {
    if secure {
        "HttpOnly; SameSite=Strict; Path=/; Secure"
    } else {
        "HttpOnly; SameSite=Strict; Path=/"
    }
}
