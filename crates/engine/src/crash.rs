//! A command whose supervisor panics — a bug in closedloop or in a driver — ends on the record
//! at once: `failed INTERRUPTED`, with an `internal_error` entry on its timeline. Without this
//! it went on showing `running` (or `accepted`) with nothing supervising it until the gateway
//! restarted: a status no hardware showed. Its device is free again (the exclusive group's
//! permit is dropped as the supervisor unwinds), and the MCP layer shows such a command's task
//! as `failed` with a JSON-RPC error, the Tasks extension's shape for a server-side failure.

use crate::context::Context;
use crate::contract::ErrorCode;
use crate::live::LiveCommand;
use crate::machine::{Outcome, Reason};
use crate::terminal::Ending;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;

/// The timeline event that marks a command ended by closedloop's own failure.
pub const INTERNAL_ERROR: &str = "internal_error";

/// Runs `supervisor` (the whole life of `cmd` from here) in a task of its own and, if it
/// panics, ends `cmd` unless it had already ended. A cancelled task (the runtime shutting
/// down) is left to start-up recovery, like any command a stopped gateway leaves.
pub(crate) async fn ended_if_it_panics(
    ctx: Arc<Context>,
    cmd: Arc<LiveCommand>,
    supervisor: impl Future<Output = ()> + Send + 'static,
) {
    let Err(e) = tokio::spawn(supervisor).await else {
        return;
    };
    if !e.is_panic() {
        return;
    }
    let why = panic_text(e.into_panic());
    let id = cmd.row().command_id;
    tracing::error!(command_id = %id, panic = %why, "a command's supervisor panicked; the command ends failed INTERRUPTED");
    if !cmd.status().is_terminal() {
        let detail = crate::detail::crashed_text(&why);
        let outcome = Outcome::failed(ErrorCode::Interrupted, Reason::Crashed(why.clone()));
        let end = Ending::new(outcome, Some(detail), None);
        let mut events = vec![(INTERNAL_ERROR, json!({ "message": why }))];
        events.extend(end.events());
        ctx.record(&cmd, |r| end.apply(r), events).await;
    }
    ctx.forget(&cmd);
}

/// A panic's message (`panic!` with a literal or a formatted text), else a placeholder.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_string(),
            Err(_) => "a panic without a message".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::panic_text;

    #[test]
    fn a_panic_message_is_kept_whether_literal_or_formatted() {
        let literal = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_text(literal), "plain");
        let n = 7;
        let formatted = std::panic::catch_unwind(|| panic!("index {n}")).unwrap_err();
        assert_eq!(panic_text(formatted), "index 7");
        let other = std::panic::catch_unwind(|| std::panic::panic_any(3_u8)).unwrap_err();
        assert_eq!(panic_text(other), "a panic without a message");
    }
}
