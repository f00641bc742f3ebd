//! The keyed chain (v3): an event's hash is an HMAC-SHA256 under a key kept outside the
//! database (`[server] journal_key`, from the environment), so someone who can rewrite the
//! journal but not read the key cannot recompute a chain `journal verify` accepts.
//!
//! HMAC (RFC 2104) is a few lines over SHA-256, written here rather than taken as a dependency;
//! RFC 4231's test vectors pin it.

use std::fmt;

use sha2::{Digest, Sha256};

/// SHA-256's block size in bytes: HMAC pads (or hashes) the key to it.
const BLOCK: usize = 64;

/// The shortest key accepted, in bytes: 128 bits.
pub const MIN_KEY_BYTES: usize = 16;

/// A journal's chain key. Its bytes are never shown: `Debug` prints its length only.
#[derive(Clone, PartialEq, Eq)]
pub struct JournalKey {
    /// The key as HMAC uses it: hashed when longer than a block, zero-padded to a block.
    block: [u8; BLOCK],
    len: usize,
}

impl JournalKey {
    /// A key from its text (UTF-8 bytes as given); refused, saying why, when shorter than
    /// [`MIN_KEY_BYTES`].
    pub fn new(text: &str) -> Result<JournalKey, String> {
        let bytes = text.as_bytes();
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the journal key is {} bytes; use at least {MIN_KEY_BYTES} random bytes, e.g. `openssl rand -hex 32`",
                bytes.len()
            ));
        }
        let mut block = [0u8; BLOCK];
        if bytes.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(bytes));
        } else {
            block[..bytes.len()].copy_from_slice(bytes);
        }
        Ok(JournalKey {
            block,
            len: bytes.len(),
        })
    }

    /// A hasher primed with the key's inner pad: feed the message, then [`JournalKey::finish`].
    pub(crate) fn inner(&self) -> Sha256 {
        let mut h = Sha256::new();
        h.update(self.block.map(|b| b ^ 0x36));
        h
    }

    /// The HMAC of what `inner` was fed.
    pub(crate) fn finish(&self, inner: Sha256) -> [u8; 32] {
        let mut outer = Sha256::new();
        outer.update(self.block.map(|b| b ^ 0x5c));
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

impl fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JournalKey({} bytes, not shown)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::hex;

    fn hmac(key: &[u8], data: &[u8]) -> String {
        // The vectors' keys are bytes, not text: build the block as `new` does.
        let mut block = [0u8; BLOCK];
        if key.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let k = JournalKey {
            block,
            len: key.len(),
        };
        let mut h = k.inner();
        h.update(data);
        hex(&k.finish(h))
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        // Test cases 1, 2, 4 and 6 of RFC 4231 (a short key, a text key, a 25-byte key, and a
        // key longer than a block).
        assert_eq!(
            hmac(&[0x0b; 20], b"Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hmac(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let key: Vec<u8> = (1..=25).collect();
        assert_eq!(
            hmac(&key, &[0xcd; 50]),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        );
        assert_eq!(
            hmac(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn short_keys_are_refused_and_keys_never_shown() {
        let e = JournalKey::new("short").unwrap_err();
        assert!(e.contains("5 bytes") && e.contains("at least 16"), "{e}");
        let k = JournalKey::new("0123456789abcdef-secret").unwrap();
        assert_eq!(format!("{k:?}"), "JournalKey(23 bytes, not shown)");
    }
}
