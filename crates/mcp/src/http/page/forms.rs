//! The little of HTTP forms and cookies the operator page needs (axum's `form` feature and a
//! cookie crate would pull in more than these few functions): the sign-in form's body, the
//! command list's query, and the cookie that carries the token.

use super::COOKIE;
use axum::http::{HeaderMap, HeaderValue, header};

/// The `Bearer` header the cookie stands for, if the request carries the page's cookie.
pub(in crate::http) fn cookie_bearer(headers: &HeaderMap) -> Option<HeaderValue> {
    let secret = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| decode(value, false))
        })?;
    if secret.is_empty() {
        return None;
    }
    HeaderValue::from_str(&format!("Bearer {secret}")).ok()
}

/// The value of `key` in an `application/x-www-form-urlencoded` text (a body or a query).
pub(super) fn form_value(text: &str, key: &str) -> Option<String> {
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k, true) == key).then(|| decode(v, true))
    })
}

/// Percent-decoding (and `+` as a space in forms); a malformed escape is kept as it is.
pub(super) fn decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encoding of everything but unreserved characters: any secret fits in a cookie.
pub(super) fn encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// Text as it may stand in HTML.
pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
