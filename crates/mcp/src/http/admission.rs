//! Who keeps a connection when they are all taken (docs/security.md, "Connections").
//!
//! Measured by a red team: 300 connections that never sent a byte held every one of the 256
//! slots (each kept 60 s, reopened as soon as it closed), and the operator's `cancel_command`
//! got a connection reset while the axis kept moving. A slot is no longer first come, first
//! served. Each open connection has a [`ConnState`]: what it has shown of itself (nothing yet, a
//! request head, a token, a token that may act). When every slot is taken, a new connection
//! evicts the oldest one that never authenticated — never the other way round — and, failing
//! that, the oldest read-only one while readers hold more than their share: connections that
//! authenticated with an actuate scope keep a reserved share (a quarter) no reader can take.
//! Connections that never authenticated are capped per peer address, so one host cannot fill
//! the table with them; at that cap a new one from the address evicts the address's oldest
//! unauthenticated one (32 tokenless connections from the operator's own address once kept
//! the operator's new ones out for 20 s). Budgets are per principal too: a token holding more
//! than a quarter of the slots — acting or not — gives its oldest connection up to a
//! newcomer (one token with 256 keep-alive connections once reset everyone else's for 15 s).
//! A connection is told it was evicted through its [`ConnState`]; its reads and writes then
//! fail and it closes.
//!
//! # Invariants
//! - Live connections (not evicted) never exceed `max` once an admission returns.
//! - A connection that authenticated with an actuate scope is never evicted while its token
//!   holds no more than a quarter of the slots.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Waker;
use std::time::Instant;

/// Nothing has come yet.
const SILENT: u8 = 0;
/// A complete request head came.
const HEADED: u8 = 1;
/// A request authenticated with a token that may only read.
const READER: u8 = 2;
/// A request authenticated with a token that may act (or the local user).
const ACTOR: u8 = 3;

/// What one open connection has shown of itself, shared by its stream and the requests on it.
#[derive(Debug)]
pub struct ConnState {
    id: u64,
    peer: IpAddr,
    opened: Instant,
    stage: AtomicU8,
    /// The token its requests authenticated with (the first one, if several).
    principal: std::sync::OnceLock<String>,
    evicted: AtomicBool,
    /// The connection's task, woken when it is evicted while it waits for bytes.
    waker: Mutex<Option<Waker>>,
}

/// A connection's place in the table, given back when the connection closes. Apart from
/// [`ConnState`], which a request may keep (its extensions hold it) after its connection closed.
#[derive(Debug)]
pub struct Slot {
    id: u64,
    table: Weak<Admission>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(table) = self.table.upgrade() {
            table.closed(self.id);
        }
    }
}

impl ConnState {
    /// A complete request head arrived on it: the handshake window no longer applies.
    pub fn headed(&self) {
        self.stage.fetch_max(HEADED, Ordering::SeqCst);
    }

    /// A request on it authenticated as `principal` (a token's name; `None` for the local user
    /// of a server without tokens, the one caller there is); `actor`: with a scope that acts or
    /// cancels.
    pub fn authenticated(&self, actor: bool, principal: Option<&str>) {
        if let Some(p) = principal {
            let _ = self.principal.set(p.to_string());
        }
        let stage = if actor { ACTOR } else { READER };
        self.stage.fetch_max(stage, Ordering::SeqCst);
    }

    fn principal(&self) -> Option<&str> {
        self.principal.get().map(String::as_str)
    }

    /// Whether a request head has arrived.
    pub fn is_headed(&self) -> bool {
        self.stage.load(Ordering::SeqCst) >= HEADED
    }

    /// Whether another connection took its slot: it must close.
    pub fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::SeqCst)
    }

    /// Remembers the task to wake on eviction.
    pub fn park(&self, waker: &Waker) {
        let mut w = self.waker.lock().unwrap_or_else(|p| p.into_inner());
        if !w.as_ref().is_some_and(|old| old.will_wake(waker)) {
            *w = Some(waker.clone());
        }
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        let w = self.waker.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = w {
            w.wake();
        }
    }

    fn stage(&self) -> u8 {
        self.stage.load(Ordering::SeqCst)
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every slot is held by connections that may not be evicted.
    Full,
    /// Its peer address already holds its share of connections that never authenticated.
    PerPeer,
}

/// The open connections of one listener.
#[derive(Debug)]
pub struct Admission {
    max: usize,
    per_peer: usize,
    /// Slots readers may hold at most: the rest is kept for connections that act.
    readers_max: usize,
    /// Slots one principal may hold before its oldest gives way to a newcomer.
    per_principal: usize,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Weak<ConnState>>>,
}

impl Admission {
    /// At most `max` connections, at most `per_peer` of them unauthenticated per peer address.
    pub fn new(max: usize, per_peer: usize) -> Arc<Admission> {
        Arc::new(Admission {
            max,
            per_peer: per_peer.max(1),
            readers_max: max - max / 4,
            per_principal: (max / 4).max(1),
            next: AtomicU64::new(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Admits a connection from `peer`, evicting another when every slot is taken (see the
    /// module doc), or says why not.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<(Arc<ConnState>, Slot), Refused> {
        // An IPv6 host by its /64, as the guessing throttle counts it: one host rotating its
        // addresses is still one peer.
        let peer = super::guessing::key(peer);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let live: Vec<Arc<ConnState>> = (open.values())
            .filter_map(Weak::upgrade)
            .filter(|c| !c.is_evicted())
            .collect();
        let unauthenticated = |c: &&Arc<ConnState>| c.stage() < READER;
        let from_peer: Vec<&Arc<ConnState>> = (live.iter().filter(unauthenticated))
            .filter(|c| c.peer == peer)
            .collect();
        if from_peer.len() >= self.per_peer {
            // The address's oldest unauthenticated connection gives way: the newcomer may be
            // the operator behind the same address as a flood.
            let oldest = from_peer.iter().min_by_key(|c| c.opened);
            oldest.ok_or(Refused::PerPeer)?.evict();
        } else if live.len() >= self.max {
            self.victim(&live).ok_or(Refused::Full)?.evict();
        }
        let state = Arc::new(ConnState {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            peer,
            opened: Instant::now(),
            stage: AtomicU8::new(SILENT),
            principal: std::sync::OnceLock::new(),
            evicted: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        open.insert(state.id, Arc::downgrade(&state));
        let slot = Slot {
            id: state.id,
            table: Arc::downgrade(self),
        };
        Ok((state, slot))
    }

    /// The connection to evict for a new one: the oldest that never authenticated, else the
    /// oldest of the principal holding most while it holds more than its budget, else the
    /// oldest reader while readers hold more than their share.
    fn victim<'a>(&self, live: &'a [Arc<ConnState>]) -> Option<&'a Arc<ConnState>> {
        let oldest = |stage: &dyn Fn(u8) -> bool| {
            (live.iter())
                .filter(|c| stage(c.stage()))
                .min_by_key(|c| c.opened)
        };
        if let Some(c) = oldest(&|s| s < READER) {
            return Some(c);
        }
        let mut held: HashMap<&str, usize> = HashMap::new();
        for p in live.iter().filter_map(|c| c.principal()) {
            *held.entry(p).or_default() += 1;
        }
        if let Some((greedy, _)) = (held.into_iter())
            .filter(|(_, n)| *n > self.per_principal)
            .max_by_key(|(_, n)| *n)
        {
            return (live.iter())
                .filter(|c| c.principal() == Some(greedy))
                .min_by_key(|c| c.opened);
        }
        let readers = live.iter().filter(|c| c.stage() == READER).count();
        (readers >= self.readers_max)
            .then(|| oldest(&|s| s == READER))
            .flatten()
    }

    /// Forgets a connection that closed.
    fn closed(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.remove(&id);
    }

    /// How many connections are open and not evicted.
    #[cfg(test)]
    pub fn live(&self) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        (open.values())
            .filter_map(Weak::upgrade)
            .filter(|c| !c.is_evicted())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    type Open = (Arc<ConnState>, Slot);

    fn admit(table: &Arc<Admission>, last: u8) -> Open {
        table.admit(ip(last)).expect("admitted")
    }

    #[test]
    fn a_new_connection_evicts_the_oldest_that_never_authenticated_never_an_actor() {
        let table = Admission::new(4, 4);
        let actor = admit(&table, 1);
        actor.0.authenticated(true, Some("ops"));
        let silent: Vec<Open> = (0..3).map(|_| admit(&table, 2)).collect();
        let newcomer = admit(&table, 3);
        assert!(silent[0].0.is_evicted(), "the oldest silent one made room");
        assert!(!silent[1].0.is_evicted() && !actor.0.is_evicted() && !newcomer.0.is_evicted());
        assert_eq!(table.live(), 4);
        // All slots held by actors: nothing is evicted, the newcomer is refused.
        for (i, c) in silent.iter().skip(1).chain([&newcomer]).enumerate() {
            c.0.authenticated(true, Some(&format!("agent{i}")));
        }
        assert!(matches!(table.admit(ip(4)), Err(Refused::Full)));
    }

    #[test]
    fn readers_keep_to_their_share_and_unauthenticated_ones_to_theirs_per_peer() {
        let table = Admission::new(4, 2);
        let readers: Vec<Open> = (0..4)
            .map(|_| {
                let r = admit(&table, 1);
                r.0.authenticated(false, Some(&format!("reader{}", r.0.id)));
                r
            })
            .collect();
        // Four readers hold more than three slots (the quarter is the actors'): one goes.
        let operator = admit(&table, 9);
        assert!(readers[0].0.is_evicted() && !readers[1].0.is_evicted());
        operator.0.authenticated(true, Some("ops"));
        let flood = Admission::new(100, 2);
        let a = admit(&flood, 5);
        let b = admit(&flood, 5);
        let c = admit(&flood, 5);
        assert!(
            a.0.is_evicted(),
            "the address's oldest unauthenticated one gave way"
        );
        assert!(!b.0.is_evicted() && !c.0.is_evicted());
        assert_eq!(flood.live(), 2);
        assert!(
            flood.admit(ip(6)).is_ok(),
            "another address is not held back"
        );
    }

    #[test]
    fn one_token_holding_more_than_its_quarter_gives_way_acting_or_not() {
        let table = Admission::new(8, 8);
        let hog: Vec<Open> = (0..8)
            .map(|_| {
                let c = admit(&table, 1);
                c.0.authenticated(true, Some("lamp_only"));
                c
            })
            .collect();
        let newcomer = admit(&table, 2);
        assert!(hog[0].0.is_evicted(), "the hog's oldest made room");
        newcomer.0.authenticated(true, Some("ops"));
        // Down to its quarter (2 of 8), the hog keeps what it has; the operator is never taken.
        let _more: Vec<Open> = (0..5)
            .map(|i| {
                let c = admit(&table, 3);
                c.0.authenticated(false, Some(&format!("reader{i}")));
                c
            })
            .collect();
        assert!(!newcomer.0.is_evicted());
        let hogs_left = hog.iter().filter(|c| !c.0.is_evicted()).count();
        assert_eq!(hogs_left, 2, "a quarter of 8");
        assert_eq!(table.live(), 8);
    }

    #[test]
    fn a_closed_connection_leaves_the_table_though_a_request_keeps_its_state() {
        let table = Admission::new(2, 2);
        let (state, slot) = admit(&table, 1);
        drop(slot);
        assert_eq!(table.live(), 0);
        assert!(table.open.lock().unwrap().is_empty());
        assert!(!state.is_evicted());
    }
}
