//! closedloop's MCP surface (docs/architecture.md), served over stdio or Streamable HTTP
//! ([`http`]).
//!
//! - Tools, in `tools/list` order: one per plant action (or `run_action` and `describe_device`
//!   with `[server] tools = "generic"`); `modbus_read` / `modbus_write` and the read-only bridge
//!   tools (`can_signals`, `can_decode`, `opcua_browse`, `opcua_read`) when a device allows raw
//!   access; `list_alarms` when the plant declares alarms; `keep_alive` when an action has
//!   `keepalive_s`; then the six [`FIXED_TOOLS`]: `get_command_status`, `cancel_command`,
//!   `list_commands`, `list_devices`, `get_device_state` and `confirm_command`.
//! - `tools/call` is answered in `call.rs`; [`confirm`] (a token) and `elicit.rs` (a form) ask a
//!   person before a `confirm = true` action moves; `tasks.rs` serves the Tasks extension from
//!   the engine, and so from the journal after a restart.
//! - Resources `device://{id}/state`, `device://{id}/config`, `command://{id}`,
//!   `command://{id}/timeline` (paged) and `alarm://active`, with change notifications; prompts
//!   `diagnose_device` and `act_and_confirm`.
//! - `session_commands.rs`: the dead-man commands each HTTP session started, ended with the
//!   session.
//! - [`Caller`]: who calls and with which scopes (a bearer token's over HTTP, every scope over
//!   stdio). A reading tool needs `read`; an actuation without `actuate:<device>` is journaled
//!   `rejected UNAUTHORIZED`; `modbus_write` needs `admin`, the other raw and bridge tools
//!   `admin` or `actuate:<device>` (`raw.rs`, `gate`). `tools/list` shows a caller only the
//!   action tools it may call.
//! - `stdio.rs`: the stdio transport, lines bounded at rmcp's 16 MiB; `tools/call` and
//!   `tools/list` lines parsed straight into rmcp's types (`stdio/reading.rs`), an unchanged
//!   `tools/list` answer written from bytes serialised once (`stdio/listing.rs`).
//! - [`http`]: Streamable HTTP behind the `guard`, `auth` and `limit` layers, the connection
//!   listener with its caps and timeouts, TLS, sessions bound to the token that opened them, the
//!   operator page (`http/page.rs`) and `/metrics`; `[server] confirm_by` is applied in
//!   `call/confirming.rs`.
//! - [`metrics`]: the Prometheus recorder and its families; `otlp/`: a span per finished command,
//!   posted as OTLP.
//!
//! This crate turns the engine's results into MCP content and nothing more: every decision about a
//! command is the engine's. Nothing depends on this crate except the binary.

mod bridge;
mod call;
pub mod confirm;
mod elicit;
mod handler;
pub mod http;
pub mod metrics;
pub mod otlp;
mod prompts;
mod raw;
mod resources;
pub mod schema;
mod session_commands;
pub mod stdio;
mod tasks;
mod tools;

use closedloop_engine::Engine;
use closedloop_plant::TokenScope;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig, Tool};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use tools::FIXED_TOOLS;
/// The tools `serve` lists for a plant, built as `serve` builds them (the bench's bare server
/// lists the same ones, so the two `tools/list` figures compare like with like).
pub use tools::build as build_tools;

/// The instructions a client shows its model at connection time.
const INSTRUCTIONS: &str = "closedloop controls physical devices and reports only what the hardware confirmed. \
Every action tool returns a command with a command_id; status \"accepted\" or \"running\" is NOT completion. \
Call get_command_status (or pass wait_s) until the status is final: \"completed\" with verified=true means a sensor \
confirmed the effect; \"sent\" means it was delivered but nothing could confirm it; \"failed\", \"timeout\" and \
\"rejected\" carry an error_code, a detail and a hint saying what to do next. Never tell the user an action \
happened unless its status is \"completed\".";

/// Who is calling and what they may do: a bearer token's name and scopes over HTTP, or the
/// local user (every scope) over stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Journaled with every command the caller creates.
    pub name: String,
    /// `read`, `actuate:<device>`, `actuate:*`, `admin`.
    pub scopes: Vec<TokenScope>,
}

impl Caller {
    /// A caller with every scope (stdio: whoever can start the process can already do anything).
    pub fn local(name: &str) -> Caller {
        Caller {
            name: name.to_string(),
            scopes: vec![TokenScope::Admin],
        }
    }

    /// Whether the caller may read devices and commands.
    pub fn may_read(&self) -> bool {
        !self.scopes.is_empty()
    }

    /// Whether the caller holds `admin` (raw register writes).
    pub fn is_admin(&self) -> bool {
        self.scopes.contains(&TokenScope::Admin)
    }

    /// Whether the caller may run actions on `device` (and cancel its commands).
    pub fn may_actuate(&self, device: &str) -> bool {
        self.scopes.iter().any(|s| s.allows_actuate(device))
    }

    /// Whether the caller may act on some device (or cancel): its HTTP connections keep a
    /// reserved share of the slots.
    pub fn may_act(&self) -> bool {
        (self.scopes.iter()).any(|s| !matches!(s, TokenScope::Read))
    }
}

/// The MCP server: a thin handle on the engine.
#[derive(Clone)]
pub struct Server {
    engine: Arc<Engine>,
    tools: Arc<Vec<Tool>>,
    /// The caller when the transport says nothing else (stdio): every scope.
    local: Caller,
    /// Confirmation tokens of `confirm = true` actions waiting for their answer.
    confirmations: Arc<confirm::Confirmations>,
    /// Resource subscriptions of every client of this server.
    subscriptions: Arc<resources::Subscriptions>,
    /// The running dead-man commands of each HTTP session, ended with it.
    session_commands: Arc<session_commands::SessionCommands>,
}

impl Server {
    /// A server over a started engine; `caller` names the client in the journal.
    pub fn new(engine: Arc<Engine>, caller: &str) -> Server {
        let tools = Arc::new(tools::build(engine.plant()));
        let ttl = std::time::Duration::from_secs_f64(engine.plant().server.confirm_ttl_s);
        // Gateways sharing a journal share their confirmations: any of them redeems a token.
        let shared = engine.shared_confirmations();
        let session_commands = Arc::new(session_commands::SessionCommands::new(
            Arc::clone(&engine),
            None,
        ));
        Server {
            engine,
            tools,
            local: Caller::local(caller),
            confirmations: Arc::new(confirm::Confirmations::new(ttl, shared)),
            subscriptions: Arc::new(resources::Subscriptions::new()),
            session_commands,
        }
    }

    /// A copy for one HTTP session (or one stateless request): the same engine, tools,
    /// confirmations and subscriptions, with a list of the dead-man commands of its own, lapsed
    /// when rmcp drops it as the session ends (see `session_commands`), unless `shutdown` was
    /// cancelled.
    pub(crate) fn for_session(&self, shutdown: CancellationToken) -> Server {
        let engine = Arc::clone(&self.engine);
        Server {
            session_commands: Arc::new(session_commands::SessionCommands::new(
                engine,
                Some(shutdown),
            )),
            ..self.clone()
        }
    }

    /// The engine behind it.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The tools, in `tools/list` order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The caller of one request: the HTTP layer's authenticated token, else the local caller.
    pub(crate) fn caller(&self, cx: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Caller {
        http::caller_from(cx).unwrap_or_else(|| self.local.clone())
    }

    fn info(&self) -> ServerConfig {
        let plant = self.engine.plant();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("closedloop", env!("CARGO_PKG_VERSION"))
                .with_title(format!("closedloop — {}", plant.server.name)),
        )
        .with_instructions(INSTRUCTIONS)
    }
}
