use super::forms::{decode, encode, escape};
use super::signin::attributes;
use super::*;

#[test]
fn only_the_page_paths_take_the_cookie_and_only_the_form_is_public() {
    assert_eq!(access("/"), Some(Access::Public));
    assert_eq!(access("/signin"), Some(Access::Public));
    assert_eq!(access("/page/app.js"), Some(Access::Public));
    assert_eq!(access("/page/words.js"), Some(Access::Public));
    assert_eq!(access("/page/state"), Some(Access::Private));
    assert_eq!(access("/page/commands/x/cancel"), Some(Access::Private));
    assert_eq!(access("/mcp"), None);
    assert_eq!(access("/metrics"), None);
}

#[test]
fn a_secret_survives_the_cookie_whatever_its_characters() {
    for secret in ["s3cret", "a b;c=d%e+f", "ünï/côde\\\"", "x%zz"] {
        let mut headers = HeaderMap::new();
        let cookie = format!("other=1; {COOKIE}={}; last=2", encode(secret));
        headers.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        let bearer = cookie_bearer(&headers).expect(secret);
        assert_eq!(bearer.as_bytes(), format!("Bearer {secret}").as_bytes());
    }
    let mut headers = HeaderMap::new();
    headers.insert(
        header::COOKIE,
        HeaderValue::from_static("closedloop_token="),
    );
    assert_eq!(cookie_bearer(&headers), None, "a signed-out cookie");
}

#[test]
fn form_values_are_decoded() {
    assert_eq!(
        form_value("a=1&token=s3%2Bc+r%zz", "token").as_deref(),
        Some("s3+c r%zz")
    );
    assert_eq!(form_value("token", "token").as_deref(), Some(""));
    assert_eq!(form_value("a=1", "token"), None);
    assert_eq!(decode("%4", true), "%4");
}

#[test]
fn html_is_escaped() {
    assert_eq!(
        escape("<a href=\"x\">&"),
        "&lt;a href=&quot;x&quot;&gt;&amp;"
    );
}

#[test]
fn the_cookie_is_secure_under_tls_and_http_only_always() {
    assert_eq!(attributes(false), "HttpOnly; SameSite=Strict; Path=/");
    assert_eq!(
        attributes(true),
        "HttpOnly; SameSite=Strict; Path=/; Secure"
    );
}

#[test]
fn only_the_page_cancel_may_take_a_reserved_permit() {
    assert!(is_cancel("/page/commands/01a2/cancel"));
    assert!(!is_cancel("/page/commands/01a2"));
    assert!(!is_cancel("/mcp"));
}

#[test]
fn the_sign_in_and_out_forms_take_posts_from_the_page_itself_only() {
    use axum::http::{HeaderMap, HeaderValue, header};
    let headers = |host: &str, origin: Option<&str>| {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    };
    let uri = axum::http::Uri::from_static("/signin");
    let same_origin = |h: &HeaderMap| super::signin::same_origin(h, &uri);
    assert!(same_origin(&headers(
        "127.0.0.1:8080",
        Some("http://127.0.0.1:8080")
    )));
    assert!(same_origin(&headers(
        "gw.lan:8443",
        Some("https://gw.lan:8443")
    )));
    assert!(
        same_origin(&headers("127.0.0.1:8080", None)),
        "curl, no browser"
    );
    assert!(!same_origin(&headers(
        "127.0.0.1:8080",
        Some("http://localhost:3000")
    )));
    assert!(!same_origin(&headers("127.0.0.1:8080", Some("null"))));
    assert!(!same_origin(&headers(
        "127.0.0.1:8080",
        Some("http://127.0.0.1:8081")
    )));
}
