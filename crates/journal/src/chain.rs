//! The hash chain over the `events` table: each event carries the hash of the one before it, so
//! an edited, deleted, inserted or reordered row is found by re-hashing the table in `seq` order
//! (`Journal::verify`, `closedloop journal verify`). Since the v2 encoding the chain also covers
//! who asked for what: the last event of every write that sets a command's row carries a digest
//! of that row's covered fields ([`row`]), so a command row edited afterwards no longer matches
//! the digest in its command's last such event.
//!
//! Everything here is pure: the writer thread (`store/group.rs`) keeps a [`Chain`] in memory and
//! links each event as it writes it, so chaining costs a SHA-256 per event, one more per write
//! for the row's digest, and no query.
//!
//! # The canonical encoding (v2)
//! An event's `hash` is the SHA-256 digest, as 64 lowercase hex characters, of these fields
//! concatenated in this order, where `int(n)` is `n` as 8 bytes, signed, big-endian,
//! `text(s)` is `int(byte length of s in UTF-8)` followed by those UTF-8 bytes, and `opt(s)` is
//! `int(-1)` for a NULL and `text(s)` otherwise:
//!
//! 1. `text("closedloop-event-v2")` — the domain and the version of this encoding
//! 2. `text(prev_hash)` — the previous event's `hash`; [`GENESIS`] (64 `0`s) for the first
//!    hashed event of a journal
//! 3. `int(seq)` — the row's `seq`
//! 4. `text(command_id)`
//! 5. `int(at_ms)`
//! 6. `text(event)`
//! 7. `text(data)` — the `data` column's text exactly as stored (never re-serialised)
//! 8. `opt(row_digest)` — the `row_digest` column: the command row's digest as this write left
//!    it (see [`row`]) on the last event of a write that set the row; NULL on the others
//!
//! # The v1 encoding
//! Events written before the v2 encoding existed were hashed with fields 1 to 7 only, the
//! domain being `text("closedloop-event-v1")` ([`event_hash`]). They stay verifiable; the chain
//! covers command rows from the first v2 event on, and no v1 event may follow a v2 one.
//!
//! The same bytes in Python, for a tool that re-checks a journal without closedloop:
//!
//! ```text
//! def text(s): b = s.encode(); return struct.pack(">q", len(b)) + b
//! def opt(s): return struct.pack(">q", -1) if s is None else text(s)
//! msg = (text("closedloop-event-v2") + text(prev_hash) + struct.pack(">q", seq) + text(command_id)
//!        + struct.pack(">q", at_ms) + text(event) + text(data) + opt(row_digest))
//! hash = hashlib.sha256(msg).hexdigest()
//! # v1 events: text("closedloop-event-v1") and no opt(row_digest)
//! ```

pub mod keyed;
pub mod row;

pub use keyed::JournalKey;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// The `prev_hash` of the first hashed event of a journal: there is no event before it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The domain and version tag that opens every v1 hashed message (the events of old journals).
const DOMAIN_V1: &str = "closedloop-event-v1";

/// The domain and version tag that opens every v2 hashed message (see the module's encoding).
const DOMAIN_V2: &str = "closedloop-event-v2";

/// `text(s)` of the module's encoding, fed to `h`.
pub(crate) fn text(h: &mut Sha256, s: &str) {
    h.update((s.len() as i64).to_be_bytes());
    h.update(s.as_bytes());
}

/// The domain and version tag that opens every v3 (keyed) message.
const DOMAIN_V3: &str = "closedloop-event-v3-keyed";

/// Fields 1 to 7 of the module's encoding under `domain`, fed to `h`: the whole of v1, most of
/// v2 and v3.
#[allow(clippy::too_many_arguments)]
fn event_fields(
    mut h: Sha256,
    domain: &str,
    prev_hash: &str,
    seq: i64,
    command_id: &str,
    at_ms: i64,
    event: &str,
    data: &str,
) -> Sha256 {
    text(&mut h, domain);
    text(&mut h, prev_hash);
    h.update(seq.to_be_bytes());
    text(&mut h, command_id);
    h.update(at_ms.to_be_bytes());
    text(&mut h, event);
    text(&mut h, data);
    h
}

/// An event's hash under the v1 encoding (events written before the v2 encoding existed), as
/// 64 lowercase hex characters.
///
/// Public so that a test or a tool can re-check a row with exactly the function the writer used.
pub fn event_hash(
    prev_hash: &str,
    seq: i64,
    command_id: &str,
    at_ms: i64,
    event: &str,
    data: &str,
) -> String {
    let h = event_fields(
        Sha256::new(),
        DOMAIN_V1,
        prev_hash,
        seq,
        command_id,
        at_ms,
        event,
        data,
    );
    hex(&h.finalize())
}

/// An event's hash under the v2 encoding (the module's), as 64 lowercase hex characters:
/// `row_digest` is the event's `row_digest` column, `None` for NULL.
///
/// Public so that a test or a tool can re-check a row with exactly the function the writer used.
pub fn event_hash_v2(
    prev_hash: &str,
    seq: i64,
    command_id: &str,
    at_ms: i64,
    event: &str,
    data: &str,
    row_digest: Option<&str>,
) -> String {
    let fields = (prev_hash, seq, command_id, at_ms, event, data, row_digest);
    hex(&v2_message(Sha256::new(), DOMAIN_V2, fields).finalize())
}

/// The fields of an event as the v2 and v3 encodings cover them.
type Fields<'a> = (
    &'a str,
    i64,
    &'a str,
    i64,
    &'a str,
    &'a str,
    Option<&'a str>,
);

/// The v2 message (fields 1 to 8) under `domain`, fed to `h`.
fn v2_message(h: Sha256, domain: &str, fields: Fields<'_>) -> Sha256 {
    let (prev_hash, seq, command_id, at_ms, event, data, row_digest) = fields;
    let mut h = event_fields(h, domain, prev_hash, seq, command_id, at_ms, event, data);
    match row_digest {
        Some(d) => text(&mut h, d),
        None => h.update((-1i64).to_be_bytes()),
    }
    h
}

/// An event's hash under the v3 (keyed) encoding: HMAC-SHA256 under `key` of the v2 message
/// with the domain `closedloop-event-v3-keyed`, as 64 lowercase hex characters. Without the
/// key it cannot be recomputed, so a chain rewritten by someone who lacks it does not verify.
#[allow(clippy::too_many_arguments)]
pub fn event_hash_v3(
    key: &JournalKey,
    prev_hash: &str,
    seq: i64,
    command_id: &str,
    at_ms: i64,
    event: &str,
    data: &str,
    row_digest: Option<&str>,
) -> String {
    let fields = (prev_hash, seq, command_id, at_ms, event, data, row_digest);
    hex(&key.finish(v2_message(key.inner(), DOMAIN_V3, fields)))
}

/// Lowercase hex of `bytes`, by table: `write!` per byte cost more than the hash itself (a
/// hash per journaled event, several per command).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// The head of the chain as the writer knows it: the last `seq` written and its hash.
///
/// # Invariants
/// Matches the committed table: the writer advances a copy while it builds a transaction and
/// keeps the copy only once the transaction committed (`store/group.rs`), so a batch that fails
/// and is re-run row by row is re-linked from the state before it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chain {
    /// The `seq` of the last event written (or pruned, or reserved by SQLite's AUTOINCREMENT):
    /// the next event is `last_seq + 1`, given explicitly so its hash can cover it.
    pub(crate) last_seq: i64,
    /// The hash the next event links to.
    pub(crate) last_hash: String,
    /// The journal's key: events are linked under v3 when there is one, v2 otherwise.
    pub(crate) key: Option<Arc<JournalKey>>,
}

impl Default for Chain {
    /// An empty journal: the first event is seq 1 and links to [`GENESIS`].
    fn default() -> Self {
        Chain {
            last_seq: 0,
            last_hash: GENESIS.to_string(),
            key: None,
        }
    }
}

/// What the writer stores beside an event: its `seq`, `prev_hash` and `hash`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Link {
    pub(crate) seq: i64,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

impl Chain {
    /// Links the next event (whose `data` is the text to be stored, and `row_digest` the
    /// command row's digest it carries, if any) under the v3 encoding with a key, the v2
    /// without, and advances the head.
    pub(crate) fn link(
        &mut self,
        command_id: &str,
        at_ms: i64,
        event: &str,
        data: &str,
        row_digest: Option<&str>,
    ) -> Link {
        let seq = self.last_seq + 1;
        let prev = &self.last_hash;
        let hash = match &self.key {
            Some(k) => event_hash_v3(k, prev, seq, command_id, at_ms, event, data, row_digest),
            None => event_hash_v2(prev, seq, command_id, at_ms, event, data, row_digest),
        };
        let prev_hash = std::mem::replace(&mut self.last_hash, hash.clone());
        self.last_seq = seq;
        Link {
            seq,
            prev_hash,
            hash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encodings_are_pinned_by_known_answers() {
        // The same values from the module's Python snippet:
        // v1: event_hash("0"*64, 1, "c1", 1000, "accepted", "null").
        assert_eq!(
            event_hash(GENESIS, 1, "c1", 1000, "accepted", "null"),
            "0c6885513067478c04ee71a59d305404f05ac1e521eee51eb5081124eae1bb87"
        );
        // v2, with and without a row digest.
        assert_eq!(
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "null", None),
            "5329bec3ffdbd5272396caf41c52d0818955672b126e27cffcac84123b7a8ffa"
        );
        assert_eq!(
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "null", Some("ab")),
            "0e23c9ff68065d61f822b4b51d8810b809c6109c593996ed6bfeb86b6dc4f660"
        );
    }

    #[test]
    fn every_field_and_its_boundaries_change_the_hash() {
        let base = event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", Some("d"));
        assert_eq!(base.len(), 64);
        for other in [
            event_hash_v2("x", 1, "c1", 1000, "accepted", "{}", Some("d")),
            event_hash_v2(GENESIS, 2, "c1", 1000, "accepted", "{}", Some("d")),
            event_hash_v2(GENESIS, 1, "c2", 1000, "accepted", "{}", Some("d")),
            event_hash_v2(GENESIS, 1, "c1", 1001, "accepted", "{}", Some("d")),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepte", "d{}", Some("d")),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{ }", Some("d")),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", Some("e")),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", Some("")),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", None),
            event_hash(GENESIS, 1, "c1", 1000, "accepted", "{}"),
        ] {
            assert_ne!(base, other);
        }
        // A NULL digest is not an empty one, and v2 without one is not v1.
        assert_ne!(
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", None),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", Some(""))
        );
        assert_ne!(
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", None),
            event_hash(GENESIS, 1, "c1", 1000, "accepted", "{}")
        );
    }

    #[test]
    fn the_keyed_encoding_needs_the_key_and_differs_from_v2() {
        let key = JournalKey::new("0123456789abcdef0123456789abcdef").unwrap();
        let other = JournalKey::new("0123456789abcdef0123456789abcdeg").unwrap();
        let v3 = |k: &JournalKey, d| event_hash_v3(k, GENESIS, 1, "c1", 1000, "accepted", "{}", d);
        // Pinned: the same bytes from Python's hmac module (see docs/journal.md).
        assert_eq!(
            v3(&key, None),
            "966dd6684c60f3aeb37c9518bd7ae43503ae02b121aba7916cf8d6215591099a"
        );
        assert_ne!(v3(&key, None), v3(&other, None));
        assert_ne!(v3(&key, None), v3(&key, Some("")));
        assert_ne!(
            v3(&key, None),
            event_hash_v2(GENESIS, 1, "c1", 1000, "accepted", "{}", None)
        );
        let mut c = Chain {
            key: Some(Arc::new(key.clone())),
            ..Chain::default()
        };
        let a = c.link("c1", 1000, "accepted", "{}", None);
        assert_eq!(a.hash, v3(&key, None));
    }

    #[test]
    fn a_chain_links_each_event_to_the_one_before_under_v2() {
        let mut c = Chain::default();
        let a = c.link("c1", 1, "received", "null", None);
        let b = c.link("c1", 2, "accepted", "null", Some("d"));
        assert_eq!((a.seq, a.prev_hash.as_str()), (1, GENESIS));
        assert_eq!((b.seq, &b.prev_hash), (2, &a.hash));
        assert_eq!(
            a.hash,
            event_hash_v2(GENESIS, 1, "c1", 1, "received", "null", None)
        );
        assert_eq!(
            b.hash,
            event_hash_v2(&a.hash, 2, "c1", 2, "accepted", "null", Some("d"))
        );
        assert_eq!((c.last_seq, &c.last_hash), (2, &b.hash));
    }
}
