//! The client's address, once per request: the connection's peer, or — when the peer is a
//! configured trusted proxy (`--trusted-proxy`) — the address that proxy says it forwarded for
//! (`X-Forwarded-For`). Every per-address rule (the guessing hold, the pre-authentication
//! pool's share per address, sign-in) reads [`ClientAddr`], never the peer itself, so one
//! operator behind the TLS proxy is not held for what another client of the same proxy guessed.
//!
//! Fail closed: the header is read only from a trusted peer (anyone else could rotate it at
//! will to escape every per-address rule), walked from the right (the entries a trusted proxy
//! appended last), trusted hops skipped; an entry that does not parse stops the walk at the
//! hop that wrote it, so a garbled header counts as that proxy, never as a fresh address.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use std::net::IpAddr;
use std::sync::Arc;

use super::Endpoint;

/// An address block, `addr` or `addr/len` (IPv4 or IPv6): a proxy whose forwarded-for header
/// is believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    len: u8,
}

impl Net {
    /// Parses `10.0.0.5`, `10.0.0.0/8`, `::1` or `fd00::/8`; the error says what to write.
    pub fn parse(text: &str) -> Result<Net, String> {
        let bad = || {
            format!(
                "{text:?} is not an address or block: write e.g. 127.0.0.1, 10.0.0.0/8 or fd00::/8"
            )
        };
        let (addr, len) = match text.trim().split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text.trim(), None),
        };
        let written: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if written.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(bad)?,
            None => max,
        };
        // An IPv4-mapped block (`::ffff:10.0.0.0/104`) is its IPv4 block, as peers are.
        let addr = canonical(written);
        let len = match (written.is_ipv6(), addr.is_ipv4()) {
            (true, true) => len.saturating_sub(96),
            _ => len,
        };
        Ok(Net { addr, len })
    }

    /// Whether `ip` lies in the block (an IPv4-mapped IPv6 address counts as its IPv4 one).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix(
                u128::from(net.to_bits()),
                u128::from(ip.to_bits()),
                self.len,
                32,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix(net.to_bits(), ip.to_bits(), self.len, 128),
            _ => false,
        }
    }
}

/// Whether the first `len` of `width` bits of `a` and `b` agree.
fn prefix(a: u128, b: u128, len: u8, width: u32) -> bool {
    let drop = width - u32::from(len);
    drop >= width || (a >> drop) == (b >> drop)
}

/// IPv4-mapped IPv6 (`::ffff:10.0.0.1`, what a dual-stack listener reports) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The address every per-address rule of a request uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientAddr(pub(crate) IpAddr);

/// The client address of a request from `peer` with `headers`, given the trusted proxies.
pub(crate) fn client_addr(peer: IpAddr, headers: &HeaderMap, trusted: &[Net]) -> IpAddr {
    let peer = canonical(peer);
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = (headers.get_all("x-forwarded-for").iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Some(ip) = hop_addr(hop) else {
            return client;
        };
        client = ip;
        if !is_trusted(ip) {
            return ip;
        }
    }
    client
}

/// One `X-Forwarded-For` entry: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1` or `[2001:db8::1]:443`.
fn hop_addr(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    hop.parse::<std::net::SocketAddr>()
        .ok()
        .map(|s| canonical(s.ip()))
}

/// The middleware, outermost but one: attaches the request's [`ClientAddr`].
pub(super) async fn layer(
    State(trusted): State<Arc<Vec<Net>>>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = (req.extensions().get::<ConnectInfo<Endpoint>>()).map(|c| c.0.remote.ip());
    if let Some(peer) = peer {
        let client = client_addr(peer, req.headers(), &trusted);
        req.extensions_mut().insert(ClientAddr(client));
    }
    next.run(req).await
}

/// The request's client address, when it came through [`layer`].
pub(crate) fn of(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions.get::<ClientAddr>().map(|c| c.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_parse_and_contain_what_they_should() {
        let n = Net::parse("10.0.0.0/8").unwrap();
        assert!(n.contains(ip("10.200.1.2")) && !n.contains(ip("11.0.0.1")));
        assert!(n.contains(ip("::ffff:10.0.0.1")), "IPv4-mapped");
        assert!(Net::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        let v6 = Net::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!(Net::parse("::1").unwrap().contains(ip("::1")));
        let mapped = Net::parse("::ffff:10.0.0.0/104").unwrap();
        assert!(mapped.contains(ip("10.9.9.9")) && !mapped.contains(ip("11.0.0.1")));
        assert!(
            Net::parse("::ffff:127.0.0.1")
                .unwrap()
                .contains(ip("127.0.0.1"))
        );
        for bad in ["10.0.0.0/33", "proxy.lan", "10.0.0/8", "::/129", ""] {
            let e = Net::parse(bad).unwrap_err();
            assert!(e.contains("10.0.0.0/8"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let trusted = [Net::parse("127.0.0.1").unwrap()];
        let h = headers(&["203.0.113.7"]);
        assert_eq!(
            client_addr(ip("127.0.0.1"), &h, &trusted),
            ip("203.0.113.7")
        );
        // An untrusted peer rotating the header gains nothing.
        assert_eq!(
            client_addr(ip("198.51.100.9"), &h, &trusted),
            ip("198.51.100.9")
        );
        assert_eq!(client_addr(ip("198.51.100.9"), &h, &[]), ip("198.51.100.9"));
    }

    #[test]
    fn the_walk_goes_right_to_left_past_trusted_hops_and_stops_at_garbage() {
        let trusted = [
            Net::parse("127.0.0.1").unwrap(),
            Net::parse("10.0.0.0/8").unwrap(),
        ];
        let proxy = ip("127.0.0.1");
        // The client forged the leftmost entry; the proxies appended the rest.
        let h = headers(&["6.6.6.6, 203.0.113.7", "10.1.1.1"]);
        assert_eq!(client_addr(proxy, &h, &trusted), ip("203.0.113.7"));
        let h = headers(&["[2001:db8::7]:4711, 10.1.1.1:80"]);
        assert_eq!(client_addr(proxy, &h, &trusted), ip("2001:db8::7"));
        // Garbage where the client should be: the hop that wrote it, never a fresh address.
        let h = headers(&["203.0.113.7, unknown, 10.1.1.1"]);
        assert_eq!(client_addr(proxy, &h, &trusted), ip("10.1.1.1"));
        let h = headers(&["not-an-address"]);
        assert_eq!(client_addr(proxy, &h, &trusted), proxy);
        // No header, or only trusted hops: the last address seen.
        assert_eq!(client_addr(proxy, &headers(&[]), &trusted), proxy);
        let h = headers(&["10.9.9.9, 10.1.1.1"]);
        assert_eq!(client_addr(proxy, &h, &trusted), ip("10.9.9.9"));
    }
}
