//! A command row's digest: what the chain records of who asked for what and what it became.
//!
//! The writer computes it once per write that sets a command's row and stores it in the
//! `row_digest` column of that write's last event, whose v2 hash covers it (see the parent
//! module). `verify` recomputes it from the row as stored and compares it with the digest in
//! the command's last event that carries one: an edit of any covered field shows there.
//!
//! # The row encoding
//! SHA-256 over these fields in this order, with `int`, `text` and `opt` as in the event
//! encoding:
//!
//! 1. `text("closedloop-row-v2")` — the domain and version of this encoding
//! 2. `text(command_id)`
//! 3. `opt(caller)`
//! 4. `text(device)`
//! 5. `text(action)`
//! 6. `text(params)` — the `params` column's text exactly as stored
//! 7. `opt(idempotency_key)`
//! 8. `text(status)`
//! 9. `opt(error_code)`
//! 10. `int(verified)` — 1 or 0
//!
//! The digest as stored is that SHA-256 as 64 lowercase hex characters, a `:`, then one tag of
//! 4 hex characters for each of fields 3 to 10 in order: the low 16 bits of the 32-bit FNV-1a
//! of that field's encoded bytes. The SHA-256 decides whether the row changed; the tags only
//! let `verify` say *which* field changed (a changed field keeps its tag once in 65,536 times,
//! and then the row is reported changed without naming it). A re-check without closedloop
//! compares the first 64 characters.

use super::text;
use crate::CommandRow;
use sha2::{Digest, Sha256};

/// The domain and version tag that opens every row message.
const DOMAIN: &str = "closedloop-row-v2";

/// The covered fields, in the encoding's order (fields 3 to 10), as `verify` names them.
pub const FIELDS: [&str; 8] = [
    "caller",
    "device",
    "action",
    "params",
    "idempotency_key",
    "status",
    "error_code",
    "verified",
];

/// The covered fields of one command row, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CoveredRow<'a> {
    /// The command's id (hashed, not tagged: the event that carries the digest names it too).
    pub command_id: &'a str,
    /// Who asked.
    pub caller: Option<&'a str>,
    /// The device.
    pub device: &'a str,
    /// The action.
    pub action: &'a str,
    /// The `params` column's text as stored.
    pub params: &'a str,
    /// The caller's idempotency key.
    pub idempotency_key: Option<&'a str>,
    /// The lifecycle status.
    pub status: &'a str,
    /// The contract error code.
    pub error_code: Option<&'a str>,
    /// The `verified` column: 1 or 0 as the writer stores it (any other value is an edit).
    pub verified: i64,
}

impl<'a> CoveredRow<'a> {
    /// The covered fields of `cmd`, whose `params` are stored as the text `params`.
    pub fn of(cmd: &'a CommandRow, params: &'a str) -> CoveredRow<'a> {
        CoveredRow {
            command_id: &cmd.command_id,
            caller: cmd.caller.as_deref(),
            device: &cmd.device,
            action: &cmd.action,
            params,
            idempotency_key: cmd.idempotency_key.as_deref(),
            status: &cmd.status,
            error_code: cmd.error_code.as_deref(),
            verified: i64::from(cmd.verified),
        }
    }

    /// The digest as stored (see the module's encoding): 64 hex, `:`, 8 tags of 4 hex.
    pub fn digest(&self) -> String {
        let mut d = Fed {
            sha: Sha256::new(),
            tags: String::with_capacity(4 * FIELDS.len()),
        };
        text(&mut d.sha, DOMAIN);
        text(&mut d.sha, self.command_id);
        d.opt(self.caller);
        d.text(self.device);
        d.text(self.action);
        d.text(self.params);
        d.opt(self.idempotency_key);
        d.text(self.status);
        d.opt(self.error_code);
        d.field(&[&self.verified.to_be_bytes()]);
        let mut out = super::hex(&d.sha.finalize());
        out.push(':');
        out.push_str(&d.tags);
        out
    }

    /// Whether this row still is the one `recorded` (a digest as stored) was made of: `Ok`, or
    /// the fields whose tags differ — empty when the row changed but the tags cannot tell where.
    pub fn compare(&self, recorded: &str) -> Result<(), Vec<&'static str>> {
        let now = self.digest();
        if now == recorded {
            return Ok(());
        }
        let tags = |d: &str| d.split_once(':').map(|(_, t)| t.to_string());
        let changed = match (tags(&now), tags(recorded)) {
            (Some(a), Some(b)) if a.len() == b.len() => FIELDS
                .iter()
                .enumerate()
                .filter(|(i, _)| a.get(4 * i..4 * i + 4) != b.get(4 * i..4 * i + 4))
                .map(|(_, f)| *f)
                .collect(),
            _ => Vec::new(),
        };
        Err(changed)
    }
}

/// A row digest being computed: the SHA-256 so far and the tags of the fields fed.
struct Fed {
    sha: Sha256,
    tags: String,
}

impl Fed {
    /// Feeds one covered field's encoded bytes to the SHA-256 and appends its tag.
    fn field(&mut self, parts: &[&[u8]]) {
        let mut fnv: u32 = 0x811c_9dc5;
        for part in parts {
            self.sha.update(part);
            for b in *part {
                fnv = (fnv ^ u32::from(*b)).wrapping_mul(0x0100_0193);
            }
        }
        self.tags.push_str(&super::hex(&(fnv as u16).to_be_bytes()));
    }

    fn text(&mut self, s: &str) {
        self.field(&[&(s.len() as i64).to_be_bytes(), s.as_bytes()]);
    }

    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.text(s),
            None => self.field(&[&(-1i64).to_be_bytes()]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> CoveredRow<'static> {
        CoveredRow {
            command_id: "c1",
            caller: Some("ops"),
            device: "press",
            action: "stroke",
            params: r#"{"mm":5}"#,
            idempotency_key: Some("k1"),
            status: "completed",
            error_code: None,
            verified: 1,
        }
    }

    #[test]
    fn the_row_encoding_is_pinned_by_a_known_answer() {
        // The same value from the module's encoding in Python (docs/journal.md).
        assert_eq!(
            base().digest(),
            "4b9a89c797ca63921c634f6148ab0accc6618d505e8ca4b412f0c7137d6e2943:ef087b65037b5e10fe77ce1f0a5d6fd2"
        );
    }

    #[test]
    fn an_edit_of_each_covered_field_is_named_by_its_tag() {
        let recorded = base().digest();
        assert_eq!(base().compare(&recorded), Ok(()));
        type Edit = (&'static str, fn(&mut CoveredRow<'static>));
        let edits: [Edit; 8] = [
            ("caller", |r| r.caller = Some("viewer")),
            ("device", |r| r.device = "saw"),
            ("action", |r| r.action = "home"),
            ("params", |r| r.params = r#"{"mm":50}"#),
            ("idempotency_key", |r| r.idempotency_key = None),
            ("status", |r| r.status = "failed"),
            ("error_code", |r| r.error_code = Some("TIMEOUT")),
            ("verified", |r| r.verified = 0),
        ];
        for (field, edit) in edits {
            let mut row = base();
            edit(&mut row);
            assert_eq!(row.compare(&recorded), Err(vec![field]), "{field}");
        }
        let mut other = base();
        other.command_id = "c2";
        assert_eq!(other.compare(&recorded), Err(vec![]), "hashed, not tagged");
        assert_eq!(base().compare("not a digest"), Err(vec![]));
    }

    #[test]
    fn a_null_is_not_an_empty_text() {
        let mut empty = base();
        empty.caller = Some("");
        let mut none = base();
        none.caller = None;
        assert_ne!(empty.digest(), none.digest());
    }
}
