//! Guessing slowed per peer address (docs/security.md, "Tokens"): a red team sent 200 wrong
//! sign-ins and 200 wrong bearer tokens and every one was answered 401 within 0.2 s. Now a peer
//! address (an IPv6 address by its /64, what one host is usually given) whose authentications
//! fail [`ALLOWED`] times within [`WINDOW`] is held back: every wrong token from it (a bearer
//! header, the page's cookie, the sign-in form) is answered 429 with a `Retry-After` that
//! doubles with each hold (1 s, 2 s, 4 s … at most [`LONGEST`]). A correct token that has
//! authenticated from that address before is served whatever was guessed beside it (the
//! operator behind the guesser's proxy); any other token meets the hold, right or wrong, so a
//! guesser learns nothing faster. A success forgets nothing: a valid token interleaved with
//! guesses once reset the count and disabled the hold.
//!
//! Bounded: at most [`PEERS`] addresses are remembered; past that, those whose hold and window
//! are over are forgotten first, then the longest quiet ones.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed authentications from one address within [`WINDOW`] before it is held back.
pub(super) const ALLOWED: u32 = 5;
/// The window failures are counted in.
pub(super) const WINDOW: Duration = Duration::from_secs(60);
/// The longest hold.
pub(super) const LONGEST: Duration = Duration::from_secs(300);
/// Addresses remembered at most.
const PEERS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Peer {
    failures: u32,
    since: Instant,
    held_until: Option<Instant>,
    /// Holds so far: the next lasts 2^holds seconds.
    holds: u32,
    last: Instant,
    /// The tokens (by name) that authenticated from this address: served during a hold.
    good: [Option<u64>; GOOD],
}

/// Tokens remembered per address as having authenticated from it.
const GOOD: usize = 8;

/// A token's name as remembered (a hash: the table holds no names).
fn tag(principal: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    principal.hash(&mut h);
    h.finish()
}

/// The failed authentications of every peer address.
#[derive(Debug, Default)]
pub(super) struct Guessing {
    peers: Mutex<HashMap<IpAddr, Peer>>,
}

/// The key an address's failures count under: an IPv4 address itself (an IPv4-mapped IPv6
/// one as IPv4), an IPv6 address by its /64 — one host holds a whole /64 and could otherwise
/// guess from a new address each time.
pub(super) fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
            }
        },
    }
}

impl Guessing {
    /// `Err(seconds)` while `ip` is held back: answer 429 with that `Retry-After`.
    pub(super) fn check(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let ip = key(ip);
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        match peers.get(&ip).and_then(|p| p.held_until) {
            Some(until) if until > now => Err((until - now).as_secs_f64().ceil().max(1.0) as u64),
            _ => Ok(()),
        }
    }

    /// Whether `principal` authenticated from `ip` before: such a token is served during a
    /// hold (the operator who works behind the guesser's proxy); any other answer during a hold
    /// is 429 whether the token is right or not, so a guesser learns nothing faster.
    pub(super) fn known(&self, ip: IpAddr, principal: &str) -> bool {
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let t = tag(principal);
        (peers.get(&key(ip))).is_some_and(|p| p.good.contains(&Some(t)))
    }

    /// `principal` authenticated from `ip` (outside a hold, or known): remembered, and no
    /// failure is forgotten for it — a valid token interleaved with guesses once reset them.
    pub(super) fn succeeded(&self, ip: IpAddr, principal: &str, now: Instant) {
        let t = tag(principal);
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let p = entry(&mut peers, key(ip), now);
        if !p.good.contains(&Some(t)) {
            p.good.rotate_right(1);
            p.good[0] = Some(t);
        }
    }

    /// A failed authentication from `ip`; whether it now holds the address back.
    pub(super) fn failed(&self, ip: IpAddr, now: Instant) -> bool {
        let ip = key(ip);
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let p = entry(&mut peers, ip, now);
        if now.duration_since(p.since) > WINDOW {
            (p.failures, p.since) = (0, now);
        }
        p.failures += 1;
        p.last = now;
        if p.failures < ALLOWED {
            return false;
        }
        let hold = Duration::from_secs(1u64 << p.holds.min(16)).min(LONGEST);
        p.held_until = Some(now + hold);
        p.holds += 1;
        (p.failures, p.since) = (0, now);
        true
    }
}

/// The entry of `ip`, made (room made first when the table is full) when there is none.
fn entry(peers: &mut HashMap<IpAddr, Peer>, ip: IpAddr, now: Instant) -> &mut Peer {
    if peers.len() >= PEERS && !peers.contains_key(&ip) {
        forget_some(peers, now);
    }
    peers.entry(ip).or_insert(Peer {
        failures: 0,
        since: now,
        held_until: None,
        holds: 0,
        last: now,
        good: [None; GOOD],
    })
}

/// Makes room: drops addresses whose hold and window are over, else the quietest tenth.
fn forget_some(peers: &mut HashMap<IpAddr, Peer>, now: Instant) {
    peers.retain(|_, p| {
        p.held_until.is_some_and(|u| u > now) || now.duration_since(p.since) <= WINDOW
    });
    if peers.len() >= PEERS {
        let mut quiet: Vec<(Instant, IpAddr)> = peers.iter().map(|(ip, p)| (p.last, *ip)).collect();
        quiet.sort();
        for (_, ip) in quiet.into_iter().take(PEERS / 10) {
            peers.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guesser_is_held_back_longer_each_time_and_another_address_is_not() {
        let g = Guessing::default();
        let (guesser, other) = (IpAddr::from([127, 0, 0, 2]), IpAddr::from([127, 0, 0, 3]));
        let t0 = Instant::now();
        for i in 1..ALLOWED {
            assert!(!g.failed(guesser, t0), "failure {i} holds nothing back");
            assert_eq!(g.check(guesser, t0), Ok(()));
        }
        assert!(g.failed(guesser, t0));
        assert_eq!(g.check(guesser, t0), Err(1));
        assert_eq!(g.check(other, t0), Ok(()), "another address");
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(g.check(guesser, t1), Ok(()), "the first hold is over");
        for _ in 0..ALLOWED {
            g.failed(guesser, t1);
        }
        assert_eq!(
            g.check(guesser, t1),
            Err(2),
            "the second hold is twice as long"
        );
    }

    #[test]
    fn during_a_hold_only_a_token_seen_from_the_address_before_is_known() {
        let g = Guessing::default();
        let (ip, t0) = (IpAddr::from([127, 0, 0, 9]), Instant::now());
        g.succeeded(ip, "operator", t0);
        for _ in 0..ALLOWED {
            g.failed(ip, t0);
        }
        assert!(g.check(ip, t0).is_err(), "held");
        assert!(g.known(ip, "operator"), "worked here before the guessing");
        assert!(!g.known(ip, "viewer"), "never seen here: meets the hold");
        g.succeeded(ip, "operator", t0);
        assert!(g.check(ip, t0).is_err(), "a success lifts nothing");
    }

    #[test]
    fn an_ipv6_host_is_one_guesser_across_its_64() {
        let g = Guessing::default();
        let t0 = Instant::now();
        let host = |i: u16| IpAddr::from([0x2001, 0xdb8, 1, 2, i, i, i, i]);
        for i in 0..ALLOWED as u16 {
            g.failed(host(i), t0);
        }
        assert_eq!(
            g.check(host(999), t0),
            Err(1),
            "another address of the same /64"
        );
        assert_eq!(
            g.check(IpAddr::from([0x2001, 0xdb8, 1, 3, 0, 0, 0, 1]), t0),
            Ok(())
        );
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        for _ in 0..ALLOWED {
            g.failed(mapped, t0);
        }
        assert_eq!(
            g.check(IpAddr::from([192, 0, 2, 7]), t0),
            Err(1),
            "one IPv4 host"
        );
    }

    #[test]
    fn failures_spread_over_more_than_the_window_hold_nothing_back() {
        let g = Guessing::default();
        let ip = IpAddr::from([10, 0, 0, 1]);
        let t0 = Instant::now();
        for i in 0..(ALLOWED * 3) {
            let t = t0 + (WINDOW / 2) * i;
            assert!(!g.failed(ip, t), "failure {i}");
        }
    }

    #[test]
    fn the_table_stays_bounded() {
        let g = Guessing::default();
        let now = Instant::now();
        for i in 0..(PEERS as u32 + 500) {
            g.failed(IpAddr::from(i.to_be_bytes()), now);
        }
        assert!(g.peers.lock().unwrap().len() <= PEERS);
    }
}
