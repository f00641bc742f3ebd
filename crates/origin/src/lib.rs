//! Which `Host` and `Origin` headers an HTTP gateway answers, apart from any HTTP stack: the
//! allow-lists' rules and the check, plain functions of strings that a fuzzer can drive
//! (`fuzz/fuzz_targets/host_origin.rs`) and `closedloop-mcp`'s guard layer calls.
//!
//! DNS rebinding: a web page on `evil.example` re-points its name at 127.0.0.1, and the browser
//! then sends requests to the local server with `Host: evil.example`; only names this server is
//! known by pass. Cross-site requests from a browser carry the page's `Origin`; only listed
//! origins pass, while requests without `Origin` (every non-browser client) are not affected.

/// Why a request is refused: `BadRequest` (no usable `Host`) or `Forbidden`, with the words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No `Host`, or one that does not parse: HTTP 400.
    BadRequest(String),
    /// A host or an origin not allowed: HTTP 403, naming the flag that would allow it.
    Forbidden(String),
}

/// The parsed allow-lists.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// The hosts answered.
    pub hosts: Vec<HostRule>,
    /// The browser origins answered.
    pub origins: Vec<OriginRule>,
}

/// A request's `Origin` header as the check sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OriginHeader<'a> {
    /// No `Origin` header (every non-browser client).
    Absent,
    /// One that is not visible ASCII text.
    Unreadable,
    /// Its text.
    Text(&'a str),
}

impl Allowed {
    /// Whether a request with this `host` (the `Host` header, or the request line's authority;
    /// `None` when there is neither or it is not text) and this `origin` may pass.
    pub fn check(&self, host: Option<&str>, origin: OriginHeader<'_>) -> Result<(), Refusal> {
        let Some(host) = host.and_then(|s| Authority::parse(s).ok()) else {
            return Err(Refusal::BadRequest(
                "missing or malformed Host header".into(),
            ));
        };
        if !self.hosts.iter().any(|r| r.matches(&host)) {
            let name = shown(&host.host);
            return Err(Refusal::Forbidden(format!(
                "Host {name:?} is not allowed. If that is this gateway's name, restart it with --allow-host {name}"
            )));
        }
        let text = match origin {
            OriginHeader::Absent => return Ok(()),
            OriginHeader::Unreadable => None,
            OriginHeader::Text(t) => Some(t),
        };
        let ok = text
            .and_then(Origin::parse)
            .is_some_and(|o| self.origins.iter().any(|r| r.matches(&o)));
        if ok {
            return Ok(());
        }
        let o = shown(text.unwrap_or("?"));
        Err(Refusal::Forbidden(format!(
            "Origin {o:?} is not allowed. To serve that web page, restart the gateway with --allow-origin {o}"
        )))
    }
}

/// A header value as it may be echoed in an answer: printable ASCII, at most 100 characters.
pub fn shown(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(100)
        .collect()
}

/// A host and an optional port, host lower-case without IPv6 brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// Lower-case, without IPv6 brackets.
    pub host: String,
    /// As given, if given.
    pub port: Option<u16>,
}

impl Authority {
    /// `host[:port]` as a `Host` header or an allow-list entry writes it; a bare IPv6 address
    /// is a host without port.
    pub fn parse(s: &str) -> Result<Authority, String> {
        let s = s.trim();
        // A bare IPv6 address (`::1`) is not an authority; take it as a host without port.
        if let Ok(ip) = s.parse::<std::net::Ipv6Addr>() {
            return Ok(Authority {
                host: ip.to_string(),
                port: None,
            });
        }
        let a: http::uri::Authority = s.parse().map_err(|e| format!("{e}"))?;
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
pub struct HostRule(Authority);

impl HostRule {
    /// An `--allow-host` entry.
    pub fn parse(s: &str) -> Result<HostRule, String> {
        Authority::parse(s).map(HostRule)
    }

    /// Whether a request's host passes this rule.
    pub fn matches(&self, a: &Authority) -> bool {
        self.0.host == a.host && (self.0.port.is_none() || self.0.port == a.port)
    }
}

/// A request's `Origin`: `null`, or scheme, host and the effective port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `Origin: null`.
    Null,
    /// A site, its port the scheme's default when not written.
    Site {
        /// Lower-case.
        scheme: String,
        /// Lower-case.
        host: String,
        /// Written or the scheme's default; `None` for a scheme without one.
        port: Option<u16>,
    },
}

impl Origin {
    /// An `Origin` header's value; `None` when it is none.
    pub fn parse(s: &str) -> Option<Origin> {
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
pub enum OriginRule {
    /// `null` (sandboxed frames, `file:` pages).
    Null,
    /// `scheme://host[:port]`; `port: None` is `:*`, any port.
    Site {
        /// Lower-case.
        scheme: String,
        /// Lower-case.
        host: String,
        /// The port, or `None` for any.
        port: Option<u16>,
    },
}

impl OriginRule {
    /// An `--allow-origin` entry: `null`, `scheme://host[:port]` or `scheme://host:*`.
    pub fn parse(s: &str) -> Result<OriginRule, String> {
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

    /// Whether a request's origin passes this rule.
    pub fn matches(&self, o: &Origin) -> bool {
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

    fn allowed() -> Allowed {
        Allowed {
            hosts: ["localhost", "127.0.0.1", "[::1]", "gw.example:8443"]
                .iter()
                .map(|h| HostRule::parse(h).unwrap())
                .collect(),
            origins: vec![OriginRule::parse("https://app.example").unwrap()],
        }
    }

    #[test]
    fn a_host_passes_by_name_and_by_port_when_the_rule_names_one() {
        let a = allowed();
        for ok in [
            "localhost:8080",
            "LOCALHOST",
            "[::1]:9",
            "::1",
            "gw.example:8443",
        ] {
            assert_eq!(a.check(Some(ok), OriginHeader::Absent), Ok(()), "{ok}");
        }
        for (host, want) in [
            (Some("gw.example:80"), "Forbidden"),
            (Some("evil.example"), "Forbidden"),
            (Some("user@localhost"), "BadRequest"),
            (Some(""), "BadRequest"),
            (None, "BadRequest"),
        ] {
            let got = a.check(host, OriginHeader::Absent).unwrap_err();
            assert!(format!("{got:?}").starts_with(want), "{host:?}: {got:?}");
        }
    }

    #[test]
    fn an_origin_passes_only_when_listed_and_its_refusal_is_printable() {
        let a = allowed();
        let host = Some("localhost");
        assert_eq!(
            a.check(host, OriginHeader::Text("https://app.example")),
            Ok(())
        );
        assert_eq!(
            a.check(host, OriginHeader::Text("https://APP.example:443/")),
            Ok(())
        );
        let Err(Refusal::Forbidden(why)) =
            a.check(host, OriginHeader::Text("https://app.example:444\u{7}"))
        else {
            panic!("a port that differs passed");
        };
        assert!(
            why.contains("--allow-origin https://app.example:444"),
            "{why}"
        );
        assert!(!why.contains('\u{7}'), "{why}");
        assert!(a.check(host, OriginHeader::Unreadable).is_err());
        assert!(a.check(host, OriginHeader::Text("null")).is_err());
    }
}
