//! A command whose supervisor panics — a bug in closedloop or in a driver — ends on the record
//! at once: `failed INTERRUPTED`, with an `internal_error` entry on its timeline. Without this
//! it went on showing `running` (or `accepted`) with nothing supervising it until the gateway
//! restarted: a status no hardware showed.
//!
//! When the write may have gone out and the action has a cancel plan, a fresh supervisor writes
//! the stop first (`Supervisor::stop_after_crash`), as start-up recovery does for a write that
//! was on its way; if that panics too, the command ends saying the stop failed. The exclusive
//! group's permit outlives the panic in a shared slot and is let go only once the end is on
//! record, so no other command reaches the device before. The MCP layer shows such a command's
//! task as `failed` with a JSON-RPC error, the Tasks extension's shape for a server-side failure.

use crate::context::Context;
use crate::context::live::LiveCommand;
use crate::contract::ErrorCode;
use crate::device::DeviceRuntime;
use crate::machine::{CrashStop, Machine, Outcome, Reason};
use crate::supervision::terminal::Ending;
use crate::supervision::{PermitSlot, Supervisor, release};
use closedloop_plant::{Action, Params};
use std::future::Future;
use std::sync::Arc;

pub use crate::supervision::terminal::INTERNAL_ERROR;
use crate::supervision::terminal::internal_error_event;

/// What the panic handler keeps of a supervisor: enough to write the stop and end the command.
#[derive(Clone)]
pub(crate) struct Remains {
    ctx: Arc<Context>,
    cmd: Arc<LiveCommand>,
    dev: Arc<DeviceRuntime>,
    action: Arc<Action>,
    params: Params,
    permit: PermitSlot,
}

impl Remains {
    pub(crate) fn of(sup: &Supervisor) -> Remains {
        Remains {
            ctx: Arc::clone(&sup.ctx),
            cmd: Arc::clone(&sup.cmd),
            dev: Arc::clone(&sup.dev),
            action: Arc::clone(&sup.action),
            params: sup.params.clone(),
            permit: Arc::clone(&sup.permit),
        }
    }
}

/// Runs `supervisor` (the whole life of the command from here) in a task of its own and, if it
/// panics, ends the command unless it had already ended. A cancelled task (the runtime shutting
/// down) is left to start-up recovery, like any command a stopped gateway leaves.
pub(crate) async fn ended_if_it_panics(
    remains: Remains,
    supervisor: impl Future<Output = ()> + Send + 'static,
) {
    let Some(why) = panicked(tokio::spawn(supervisor).await) else {
        return;
    };
    let id = remains.cmd.row().command_id;
    tracing::error!(command_id = %id, panic = %why, "a command's supervisor panicked; the command ends failed INTERRUPTED");
    if remains.cmd.status().is_terminal() {
        end(&remains, None).await;
        return;
    }
    let sent = remains.cmd.row().dispatched;
    if !sent || remains.action.cancel.is_empty() {
        let stop = if sent {
            CrashStop::NoPlan
        } else {
            CrashStop::NotSent
        };
        end(&remains, Some((why, stop))).await;
        return;
    }
    let r = remains.clone();
    let machine = Machine::new(crate::machine::profile::profile(&r.action));
    let stopper = Supervisor::new(r.ctx, r.cmd, r.dev, r.action, r.params, machine);
    let stopper = Supervisor {
        permit: r.permit,
        ..stopper
    };
    if let Some(again) = panicked(tokio::spawn(stopper.stop_after_crash(why.clone())).await) {
        tracing::error!(command_id = %id, panic = %again, "writing the stop after a panic panicked too");
        let stop = CrashStop::Failed(format!("writing it panicked too ({again})"));
        end(&remains, Some((why, stop))).await;
    }
}

/// The panic's message when the task panicked; `None` when it ended or was cancelled.
fn panicked(joined: Result<(), tokio::task::JoinError>) -> Option<String> {
    match joined {
        Err(e) if e.is_panic() => Some(panic_text(e.into_panic())),
        _ => None,
    }
}

/// Ends the command `failed INTERRUPTED` (when `crash` says why; a command already ended is
/// only let go), then lets its device go.
async fn end(r: &Remains, crash: Option<(String, CrashStop)>) {
    if let Some((why, stop)) = crash
        && !r.cmd.status().is_terminal()
    {
        let detail = crate::views::detail::crashed_text(&why, &stop);
        let outcome = Outcome::failed(
            ErrorCode::Interrupted,
            Reason::Crashed {
                why: why.clone(),
                stop,
            },
        );
        let end = Ending::new(outcome, Some(detail), None);
        let mut events = vec![internal_error_event(&why)];
        events.extend(end.events());
        r.ctx.record(&r.cmd, |row| end.apply(row), events).await;
    }
    r.ctx.forget(&r.cmd);
    release(&r.permit);
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
