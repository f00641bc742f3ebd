//! Fair shares of the requests in flight per token (docs/security.md, "Tokens"): a red team's
//! token with only `read` opened 70 `GET /page/events` streams and every other request — the
//! operator's sign-in, the page, `/metrics`, another token's `get_command_status` — was answered
//! 503. Each token may now hold at most its share of the requests in flight (streams included;
//! default a quarter of the pool); one more from it is answered 503 at once, naming the share,
//! and nobody else is held back. Applied only when the plant declares tokens: without them the
//! one caller is the local user.

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// How many requests each token has in flight.
#[derive(Debug)]
pub(super) struct Shares {
    cap: usize,
    held: Mutex<HashMap<String, usize>>,
}

/// One request's place in its token's share, given back when its answer ends.
pub(super) struct Share {
    shares: Arc<Shares>,
    caller: String,
    /// How many requests its token had in flight before this one.
    before: usize,
}

impl Share {
    /// How many requests its token had in flight before this one: a token holding (almost)
    /// nothing may take from the limit layer's reserve for newcomers.
    pub(super) fn before(&self) -> usize {
        self.before
    }
}

impl Shares {
    /// At most `cap` requests in flight per token.
    pub(super) fn new(cap: usize) -> Arc<Shares> {
        Arc::new(Shares {
            cap: cap.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// The share of `cap` each token may hold.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// A place for one more request of `caller`, or `None` when its share is spent.
    pub(super) fn take(self: &Arc<Self>, caller: &str) -> Option<Share> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(caller.to_string()).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        let before = *n;
        *n += 1;
        Some(Share {
            shares: Arc::clone(self),
            caller: caller.to_string(),
            before,
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.caller);
            }
        }
    }
}

/// A response body that gives its request's [`Share`] back when it is finished or dropped.
pub(super) struct Holding {
    pub(super) inner: Body,
    pub(super) _share: Share,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_holds_its_share_and_no_more_and_others_are_not_held_back() {
        let shares = Shares::new(2);
        let a = shares.take("viewer").unwrap();
        let _b = shares.take("viewer").unwrap();
        assert!(shares.take("viewer").is_none(), "its share is spent");
        assert!(shares.take("operator").is_some(), "another token");
        drop(a);
        assert!(
            shares.take("viewer").is_some(),
            "given back when an answer ends"
        );
    }
}
