//! Which encoding a chained row was hashed with (`crate::chain`: v1, v2, or v3 under the
//! journal's key), and the rules on their order that `journal verify` holds a journal to.
//!
//! The order is v1 → v2 → v3: no v1 row after a v2 one, and — when verify has the key — no
//! unkeyed row after a keyed one, and an unkeyed newest row is a break too: whoever rewrote a
//! keyed chain without the key could only hash it unkeyed.

use super::verify::{Break, BrokenLink, Stored, Walk};
use crate::chain::{event_hash, event_hash_v2, event_hash_v3};

/// The encoding a row was found hashed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    V1,
    V2,
    V3,
}

impl Walk {
    /// The encoding the row hashes to its stored hash under, or why none does. Each row costs
    /// one hash in the usual case: v3 first when verify has the key, v1 only before the first
    /// v2 row and for a row without a row digest.
    pub(crate) fn encoding(
        &self,
        row: &Stored,
        hash: &str,
        prev: &str,
    ) -> Result<Encoding, (Break, String)> {
        let (id, at, event, data) = (&row.command_id, row.at_ms, &row.event, &row.data);
        let digest = row.row_digest.as_deref();
        let v2 = || event_hash_v2(prev, row.seq, id, at, event, data, digest);
        let v1 = || event_hash(prev, row.seq, id, at, event, data);
        let keyed = (self.key.as_ref())
            .map(|key| event_hash_v3(key, prev, row.seq, id, at, event, data, digest));
        if let Some(keyed) = &keyed {
            if keyed == hash {
                return Ok(Encoding::V3);
            }
            if let Some(from) = self.report.keyed_from {
                return Err(if v2() == hash || v1() == hash {
                    (
                        Break::Unkeyed,
                        format!(
                            "the row is hashed without the journal key, after rows hashed with it (from seq {from}): someone without the key wrote or rewrote it"
                        ),
                    )
                } else {
                    let d = format!(
                        "the row hashes to {keyed} with the journal key, not to its stored {hash}"
                    );
                    (Break::ContentChanged, d)
                });
            }
        }
        let changed = |again: String| {
            // Before the first keyed row, a row that fails may have been the first keyed one.
            let mut detail = match &keyed {
                Some(k) => format!(
                    "the row hashes to {again} (to {k} with the journal key), not to its stored {hash}"
                ),
                None => format!("the row hashes to {again}, not to its stored {hash}"),
            };
            // A row failing without the key is how a keyed row looks to a verify without it —
            // the first row of a keyed journal, or the first keyed row of one keyed part-way
            // (only rows of the v2 era can be keyed).
            let v2_era = self.report.covered_from.is_some() || digest.is_some();
            if self.key.is_none() && (self.report.checked == 0 || v2_era) {
                detail.push_str(" (if the plant sets [server] journal_key, verify with it: keyed rows need the key)");
            }
            (Break::ContentChanged, detail)
        };
        if self.report.covered_from.is_some() || row.row_digest.is_some() {
            let again = v2();
            return if again == hash {
                Ok(Encoding::V2)
            } else {
                Err(changed(again))
            };
        }
        let again = v1();
        match (again == hash, v2() == hash) {
            (true, _) => Ok(Encoding::V1),
            (false, true) => Ok(Encoding::V2),
            (false, false) => Err(changed(again)),
        }
    }

    /// After the walk, with the key: the newest row must be keyed. A gateway with the key
    /// links every event it writes under it, so an unkeyed head means the rows were written
    /// before any gateway had the key — or rewritten by someone without it.
    pub(crate) fn check_keyed_head(&mut self) {
        if self.key.is_none() || self.report.broken.is_some() {
            return;
        }
        // Rows with no hash at all count too: nulling every hash must not pass for "legacy".
        let seq = self.newest_seen;
        if seq > 0 && self.report.keyed_from.is_none() {
            self.report.broken = Some(BrokenLink {
                seq,
                command_id: None,
                kind: Break::Unkeyed,
                detail: format!(
                    "no row up to seq {seq}, the newest, is hashed with the plant's journal_key: either no gateway has journaled a command since the key was set (the next one will be keyed), or the chain was rewritten by someone without the key (or its hashes removed)"
                ),
            });
        }
    }
}
