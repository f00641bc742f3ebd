//! `Host` and `Origin` validation, in front of everything else.
//!
//! DNS rebinding: a web page on `evil.example` re-points its name at 127.0.0.1, and the browser
//! then sends requests to the local server with `Host: evil.example`; only names this server is
//! known by pass. Cross-site requests from a browser carry the page's `Origin`; only listed
//! origins pass, while requests without `Origin` (every non-browser client) are not affected.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The parsed allow-lists. Entries that do not parse match nothing (and are reported by
/// `HttpOptions::validate`, which `serve` runs first).
#[derive(Debug)]
pub(super) struct Guard {
    hosts: Vec<HostRule>,
    origins: Vec<OriginRule>,
}

impl Guard {
    pub(super) fn new(hosts: &[String], origins: &[String]) -> Guard {
        fn keep<T>(what: &str, s: &str, r: Result<T, String>) -> Option<T> {
            r.map_err(|why| tracing::warn!("ignoring allowed {what} {s:?}: {why}"))
                .ok()
        }
        Guard {
            hosts: hosts
                .iter()
                .filter_map(|h| keep("host", h, HostRule::parse(h)))
                .collect(),
            origins: origins
                .iter()
                .filter_map(|o| keep("origin", o, OriginRule::parse(o)))
                .collect(),
        }
    }

    /// `Err` is the reason for a 403 (or 400 for a request without any host).
    fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        let host = match headers.get(header::HOST) {
            Some(v) => v.to_str().ok().and_then(|s| Authority::parse(s).ok()),
            None => uri
                .authority()
                .and_then(|a| Authority::parse(a.as_str()).ok()),
        };
        let Some(host) = host else {
            return Err((
                StatusCode::BAD_REQUEST,
                "missing or malformed Host header".into(),
            ));
        };
        if !self.hosts.iter().any(|r| r.matches(&host)) {
            let name = shown(&host.host);
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "Host {name:?} is not allowed. If that is this gateway's name, restart it with --allow-host {name}"
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let ok = origin
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|o| self.origins.iter().any(|r| r.matches(&o)));
            if !ok {
                let o = shown(origin.to_str().unwrap_or("?"));
                return Err((
                    StatusCode::FORBIDDEN,
                    format!(
                        "Origin {o:?} is not allowed. To serve that web page, restart the gateway with --allow-origin {o}"
                    ),
                ));
            }
        }
        Ok(())
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

/// A header value as it may be echoed in an answer: printable ASCII, at most 100 characters.
fn shown(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(100)
        .collect()
}

/// A host and an optional port, host lower-case without IPv6 brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn parse(s: &str) -> Result<Authority, String> {
        let s = s.trim();
        // A bare IPv6 address (`::1`) is not an authority; take it as a host without port.
        if let Ok(ip) = s.parse::<std::net::Ipv6Addr>() {
            return Ok(Authority {
                host: ip.to_string(),
                port: None,
            });
        }
        let a: axum::http::uri::Authority = s.parse().map_err(|e| format!("{e}"))?;
        if a.as_str().contains('@') {
            return Err("a host must not carry user information".into());
        }
        let host = a.host().trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("empty host".into());
        }
        Ok(Authority {
            host: host.to_ascii_lowercase(),
            port: a.port_u16(),
        })
    }
}

/// One `allowed_hosts` entry: a host, and a port when one is given (else any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostRule(Authority);

impl HostRule {
    pub(super) fn parse(s: &str) -> Result<HostRule, String> {
        Authority::parse(s).map(HostRule)
    }

    fn matches(&self, a: &Authority) -> bool {
        self.0.host == a.host && (self.0.port.is_none() || self.0.port == a.port)
    }
}

/// A request's `Origin`: `null`, or scheme, host and the effective port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Null,
    Site {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Origin {
    fn parse(s: &str) -> Option<Origin> {
        let s = s.trim();
        if s == "null" {
            return Some(Origin::Null);
        }
        let (scheme, rest) = s.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') {
            return None;
        }
        let a = Authority::parse(rest).ok()?;
        let port = a.port.or_else(|| default_port(&scheme));
        Some(Origin::Site {
            scheme,
            host: a.host,
            port,
        })
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// One `allowed_origins` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum OriginRule {
    /// `null` (sandboxed frames, `file:` pages).
    Null,
    /// `scheme://host[:port]`; `port: None` is `:*`, any port.
    Site {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl OriginRule {
    pub(super) fn parse(s: &str) -> Result<OriginRule, String> {
        let s = s.trim();
        if s == "null" {
            return Ok(OriginRule::Null);
        }
        let Some((_, rest)) = s.split_once("://") else {
            return Err("write scheme://host[:port], e.g. https://app.example.com".into());
        };
        if let Some(host) = rest.strip_suffix(":*") {
            let Some(Origin::Site { scheme, host, .. }) = Origin::parse(&s[..s.len() - 2]) else {
                return Err(format!("{host:?} is not a host"));
            };
            return Ok(OriginRule::Site {
                scheme,
                host,
                port: None,
            });
        }
        match Origin::parse(s) {
            Some(Origin::Site { scheme, host, port }) if port.is_some() => {
                Ok(OriginRule::Site { scheme, host, port })
            }
            Some(_) => Err(format!(
                "no default port for this scheme; write {s}:PORT or {s}:*"
            )),
            None => Err("write scheme://host[:port], e.g. https://app.example.com".into()),
        }
    }

    fn matches(&self, o: &Origin) -> bool {
        match (self, o) {
            (OriginRule::Null, Origin::Null) => true,
            (
                OriginRule::Site { scheme, host, port },
                Origin::Site {
                    scheme: s,
                    host: h,
                    port: p,
                },
            ) => scheme == s && host == h && (port.is_none() || port == p),
            _ => false,
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
