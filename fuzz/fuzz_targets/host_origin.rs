//! The `Host` and `Origin` check in front of every HTTP request (`closedloop_origin`), and the
//! parsers of `--allow-host` and `--allow-origin`: arbitrary header text must pass or be
//! refused, never panic, and a pass must mean an allowed name.
//!
//! Input: the `Host` value, a newline, the `Origin` value, a newline, then an allow-list entry
//! (each may be empty or missing).
//!
//! Properties: no panic; a request passes only when its host parses and equals an allowed name
//! (case aside); one with an `Origin` header passes only when that parses to the allowed origin;
//! a refusal's words are printable ASCII and bounded; a host rule matches the host it was
//! written as; a parsed origin rule's host is lower-case.

#![no_main]

use closedloop_origin::{Allowed, Authority, HostRule, OriginHeader, OriginRule, Refusal};
use libfuzzer_sys::fuzz_target;

const HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]", "gw.example:8443"];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\n');
    let (host, origin, rule) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
    let allowed = Allowed {
        hosts: HOSTS.iter().map(|h| HostRule::parse(h).unwrap()).collect(),
        origins: vec![OriginRule::parse("https://app.example").unwrap()],
    };
    let origin = match origin {
        None => OriginHeader::Absent,
        Some(o) => OriginHeader::Text(o),
    };
    match allowed.check(host, origin) {
        Ok(()) => {
            let a = Authority::parse(host.unwrap()).expect("a passing host parses");
            assert!(
                HOSTS.iter().any(|h| HostRule::parse(h).unwrap().matches(&a)),
                "{a:?} passed"
            );
            assert!(a.host.chars().all(|c| !c.is_ascii_uppercase()));
            if let OriginHeader::Text(o) = origin {
                let o = closedloop_origin::Origin::parse(o).expect("a passing origin parses");
                assert!(allowed.origins[0].matches(&o));
            }
        }
        Err(Refusal::BadRequest(why) | Refusal::Forbidden(why)) => {
            assert!(why.len() < 600, "{why}");
            assert!(why.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{why:?}");
        }
    }
    if let Ok(r) = HostRule::parse(rule) {
        let own = Authority::parse(rule).expect("a rule's text parses as a host");
        assert!(r.matches(&own), "{rule:?} does not match itself");
    }
    if let Ok(OriginRule::Site { host, .. }) = OriginRule::parse(rule) {
        assert!(!host.chars().any(|c| c.is_ascii_uppercase()), "{host}");
    }
});
