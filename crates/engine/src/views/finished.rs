//! The results of recently finished commands, kept in memory so that `get_command_status` of a
//! command that just ended costs no journal read. A terminal result never changes, so a copy
//! cannot go stale; the journal stays the record, and anything not kept here is read from it.

use crate::views::result::CommandResult;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// How many finished results are kept (the oldest goes first).
const KEPT: usize = 4096;

/// A bounded set of terminal results by command id.
#[derive(Default)]
pub(crate) struct Finished {
    inner: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_id: HashMap<String, CommandResult>,
    order: VecDeque<String>,
}

impl Finished {
    /// Keeps `result` if it is terminal (a command forgotten at shutdown while still running is
    /// the journal's to answer for).
    pub fn keep(&self, result: CommandResult) {
        if !result.status.is_terminal() {
            return;
        }
        let mut k = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = result.command_id.clone();
        if k.by_id.insert(id.clone(), result).is_none() {
            k.order.push_back(id);
        }
        while k.order.len() > KEPT {
            if let Some(old) = k.order.pop_front() {
                k.by_id.remove(&old);
            }
        }
    }

    /// Whether command `id` ended here recently (its result is kept): a change the journal's
    /// feed announces for it is this gateway's own, already announced.
    pub fn contains(&self, id: &str) -> bool {
        let k = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        k.by_id.contains_key(id)
    }

    /// The kept result of command `id`.
    pub fn get(&self, id: &str) -> Option<CommandResult> {
        let k = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        k.by_id.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Status;

    fn result(id: &str, status: Status) -> CommandResult {
        let row = crate::fixtures::row(id, status.as_str());
        CommandResult::from_rows(&row, &[], None)
    }

    #[test]
    fn only_terminal_results_are_kept_and_the_oldest_goes_first() {
        let f = Finished::default();
        f.keep(result("running", Status::Running));
        assert!(
            f.get("running").is_none(),
            "a running command is the journal's"
        );
        for i in 0..=KEPT {
            f.keep(result(&format!("c{i}"), Status::Completed));
        }
        assert!(f.get("c0").is_none(), "the oldest went");
        assert_eq!(
            f.get(&format!("c{KEPT}")).unwrap().status,
            Status::Completed
        );
        assert!(f.get("c1").is_some());
    }
}
