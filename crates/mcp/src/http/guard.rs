//! `Host` and `Origin` validation, in front of everything else: the axum layer over
//! `closedloop_origin`'s rules and check (DNS rebinding, cross-site browser requests; that
//! crate's documentation says why each rule is there).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use closedloop_origin::{Allowed, HostRule, OriginHeader, OriginRule, Refusal};
use std::sync::Arc;

/// The parsed allow-lists (`closedloop_origin`, where the rules and the check live). Entries
/// that do not parse match nothing (and are reported by `HttpOptions::validate`, which `serve`
/// runs first).
#[derive(Debug)]
pub(super) struct Guard(Allowed);

impl Guard {
    pub(super) fn new(hosts: &[String], origins: &[String]) -> Guard {
        fn keep<T>(what: &str, s: &str, r: Result<T, String>) -> Option<T> {
            r.map_err(|why| tracing::warn!("ignoring allowed {what} {s:?}: {why}"))
                .ok()
        }
        Guard(Allowed {
            hosts: hosts
                .iter()
                .filter_map(|h| keep("host", h, HostRule::parse(h)))
                .collect(),
            origins: origins
                .iter()
                .filter_map(|o| keep("origin", o, OriginRule::parse(o)))
                .collect(),
        })
    }

    /// `Err` is the reason for a 403 (or 400 for a request without any host).
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        let host = match headers.get(header::HOST) {
            Some(v) => v.to_str().ok(),
            None => uri.authority().map(|a| a.as_str()),
        };
        let origin = match headers.get(header::ORIGIN) {
            None => OriginHeader::Absent,
            Some(v) => v
                .to_str()
                .map_or(OriginHeader::Unreadable, OriginHeader::Text),
        };
        self.0.check(host, origin).map_err(|r| match r {
            Refusal::BadRequest(why) => (StatusCode::BAD_REQUEST, why),
            Refusal::Forbidden(why) => (StatusCode::FORBIDDEN, why),
        })
    }
}

/// The axum middleware.
pub(super) async fn layer(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match guard.check(req.uri(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err((status, why)) => {
            if let Some(left_out) = super::throttle::forbidden().allow() {
                tracing::warn!(
                    left_out,
                    host = ?req.headers().get(header::HOST),
                    origin = ?req.headers().get(header::ORIGIN),
                    "HTTP request refused: {why}"
                );
            }
            (status, format!("{why}\n")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpOptions;

    fn guard() -> Guard {
        let o = HttpOptions::default();
        Guard::new(&o.allowed_hosts, &o.allowed_origins)
    }

    fn check(g: &Guard, host: Option<&str>, origin: Option<&str>) -> Option<StatusCode> {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, v.parse().unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, v.parse().unwrap());
        }
        g.check(&Uri::from_static("/mcp"), &h).err().map(|e| e.0)
    }

    #[test]
    fn loopback_hosts_pass_on_any_port() {
        let g = guard();
        for h in [
            "127.0.0.1:41234",
            "localhost",
            "LOCALHOST:80",
            "[::1]:8080",
            "[::1]",
        ] {
            assert_eq!(check(&g, Some(h), None), None, "{h}");
        }
    }

    #[test]
    fn a_refusal_names_what_it_got_and_the_flag_that_allows_it() {
        let g = guard();
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "gw.lan:8080".parse().unwrap());
        let (status, why) = g.check(&Uri::from_static("/mcp"), &h).unwrap_err();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(
            why,
            "Host \"gw.lan\" is not allowed. If that is this gateway's name, restart it with --allow-host gw.lan"
        );
        h.insert(header::HOST, "127.0.0.1:8080".parse().unwrap());
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        let (_, why) = g.check(&Uri::from_static("/mcp"), &h).unwrap_err();
        assert_eq!(
            why,
            "Origin \"https://evil.example\" is not allowed. To serve that web page, restart the gateway with --allow-origin https://evil.example"
        );
    }

    #[test]
    fn other_hosts_are_forbidden() {
        let g = guard();
        for h in [
            "evil.example",
            "evil.example:41234",
            "127.0.0.2:80",
            "localhost.evil",
        ] {
            assert_eq!(check(&g, Some(h), None), Some(StatusCode::FORBIDDEN), "{h}");
        }
        assert_eq!(check(&g, None, None), Some(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn a_host_rule_with_a_port_needs_that_port() {
        let g = Guard::new(&["gw.lan:8080".into(), "::1".into()], &[]);
        assert_eq!(check(&g, Some("gw.lan:8080"), None), None);
        assert_eq!(check(&g, Some("[::1]:9"), None), None);
        assert_eq!(
            check(&g, Some("gw.lan:8081"), None),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(check(&g, Some("gw.lan"), None), Some(StatusCode::FORBIDDEN));
    }

    #[test]
    fn loopback_origins_pass_others_are_forbidden() {
        let g = guard();
        let host = Some("127.0.0.1:5000");
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:1",
        ] {
            assert_eq!(check(&g, host, Some(o)), None, "{o}");
        }
        for o in [
            "https://evil.example",
            "null",
            "http://localhost.evil:3000",
            "garbage",
        ] {
            assert_eq!(check(&g, host, Some(o)), Some(StatusCode::FORBIDDEN), "{o}");
        }
    }

    #[test]
    fn an_origin_rule_without_port_means_the_default_port() {
        let g = Guard::new(
            &["localhost".into()],
            &["https://app.example.com".into(), "null".into()],
        );
        let host = Some("localhost");
        assert_eq!(check(&g, host, Some("https://app.example.com")), None);
        assert_eq!(check(&g, host, Some("https://app.example.com:443")), None);
        assert_eq!(check(&g, host, Some("null")), None);
        assert_eq!(
            check(&g, host, Some("https://app.example.com:8443")),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            check(&g, host, Some("http://app.example.com")),
            Some(StatusCode::FORBIDDEN)
        );
    }

    #[test]
    fn bad_rules_are_reported() {
        assert!(OriginRule::parse("app.example.com").is_err());
        assert!(OriginRule::parse("ftp2://x").is_err());
        assert!(OriginRule::parse("https://x/path").is_err());
        assert!(HostRule::parse("").is_err());
        assert!(HostRule::parse("user@host").is_err());
        assert_eq!(
            OriginRule::parse("HTTP://LocalHost:*"),
            Ok(OriginRule::Site {
                scheme: "http".into(),
                host: "localhost".into(),
                port: None
            })
        );
    }
}
