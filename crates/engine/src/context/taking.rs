//! Which commands are being taken over from the journal here (`ownership/adopt.rs`): one taker at a time
//! per command, so the change feed and a keeper round finding the same command do not both
//! take it.

use super::Context;
use std::collections::HashSet;
use std::sync::Mutex;

/// A command being taken over here, for as long as this lives: a second taker of the same
/// command (the feed and a keeper round at once) gets none and leaves it.
pub(crate) struct Taking<'a> {
    set: &'a Mutex<HashSet<String>>,
    id: String,
}

impl<'a> Taking<'a> {
    /// Marks `id` as being taken over by this gateway, unless it already is.
    pub(crate) fn new(ctx: &'a Context, id: &str) -> Option<Taking<'a>> {
        Taking::of(&ctx.taking, id)
    }

    fn of(set: &'a Mutex<HashSet<String>>, id: &str) -> Option<Taking<'a>> {
        let mut taking = set.lock().unwrap_or_else(|p| p.into_inner());
        taking.insert(id.to_string()).then(|| Taking {
            set,
            id: id.to_string(),
        })
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        let mut taking = self.set.lock().unwrap_or_else(|p| p.into_inner());
        taking.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_taken_by_one_taker_at_a_time_and_free_again_after() {
        let taking: Mutex<HashSet<String>> = Mutex::default();
        let first = Taking::of(&taking, "c1").expect("free");
        assert!(Taking::of(&taking, "c1").is_none(), "a second taker");
        assert!(Taking::of(&taking, "c2").is_some(), "another command");
        drop(first);
        assert!(
            Taking::of(&taking, "c1").is_some(),
            "free once the first is done"
        );
    }
}
