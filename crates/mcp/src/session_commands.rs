//! The dead-man commands a 2025-era HTTP session started, ended with the session.
//!
//! A `keepalive_s` action runs only while its caller keeps asking about it. Over Streamable HTTP
//! the end of the caller's session — `DELETE` with its `Mcp-Session-Id`, rmcp's idle expiry,
//! its worker gone — says for certain that nobody will ask again, so every such command the
//! session started and that still runs ends there and then, as a lapse ([`Engine::lapse`]):
//! cancel plan written, `cancelled` `DEADMAN`, the detail saying the session ended. Waiting out
//! `keepalive_s` would leave the motion running for nobody.
//!
//! rmcp serves each session with one [`Server`](crate::Server) of its own (the HTTP factory's
//! `Server::for_session`) and drops it when the session ends, however it ends; that `Server`
//! holds one [`SessionCommands`], so the drop is the session's end. Stdio and stateless
//! 2026-07-28 requests have no session and record nothing: only the keepalive ends their
//! commands.
//!
//! # Invariants
//! - Only calls that carried an `Mcp-Session-Id` record a command, so a per-request `Server`
//!   (stateless, or rmcp's own schema look-ups) never ends one when it is dropped.
//! - Finished commands leave the list whenever the session starts another: it holds at most the
//!   session's running dead-man commands plus one (and at most 256: the commands another gateway
//!   runs, on a shared journal, stay until the session ends, as their end is not seen here).
//! - A command the session started and another gateway runs is lapsed there: the engine
//!   announces it on the journal's feed.
//! - Nothing lapses once the HTTP server is shutting down: the engine's shutdown stops motion.

use closedloop_engine::Engine;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The detail's opening words for a command whose session ended.
pub(crate) const SESSION_ENDED: &str =
    "The MCP session that started this command ended (closed by its client, or idle too long)";

/// At most this many commands are held per session: the oldest is forgotten beyond it.
const HELD_AT_MOST: usize = 256;

/// The running dead-man commands of one session, lapsed when it is dropped.
pub(crate) struct SessionCommands {
    engine: Arc<Engine>,
    held: Mutex<Vec<String>>,
    /// Cancelled when the HTTP server stops; `None` off HTTP.
    shutdown: Option<CancellationToken>,
}

impl SessionCommands {
    /// An empty list for one session (or for a transport without sessions).
    pub(crate) fn new(engine: Arc<Engine>, shutdown: Option<CancellationToken>) -> SessionCommands {
        SessionCommands {
            engine,
            held: Mutex::new(Vec::new()),
            shutdown,
        }
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that the session started the dead-man command `command_id`; forgets those of its
    /// commands that have ended since.
    pub(crate) fn hold(&self, command_id: &str) {
        let mut held = self.list();
        // A command another gateway runs stays until the session ends (its end is not seen
        // here); the list is bounded all the same.
        held.retain(|id| self.engine.may_be_running(id));
        if held.len() >= HELD_AT_MOST {
            held.remove(0);
        }
        if !held.iter().any(|id| id == command_id) {
            held.push(command_id.to_string());
        }
    }
}

impl Drop for SessionCommands {
    fn drop(&mut self) {
        if self.shutdown.as_ref().is_some_and(|s| s.is_cancelled()) {
            return;
        }
        let held = std::mem::take(&mut *self.list());
        let ended = held
            .iter()
            .filter(|id| self.engine.lapse(id, SESSION_ENDED))
            .count();
        if ended > 0 {
            tracing::warn!(
                commands = ended,
                "MCP session ended: its running dead-man commands are being stopped"
            );
        }
    }
}
