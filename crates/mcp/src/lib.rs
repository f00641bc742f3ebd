//! closedloop's MCP surface (DESIGN §4): one tool per plant action, plus `get_command_status`,
//! `cancel_command`, `list_commands`, `list_devices` and `get_device_state`.
//!
//! This crate turns the engine's results into MCP content and nothing more: every decision about a
//! command is the engine's. Nothing depends on this crate except the binary.

mod call;
pub mod schema;
mod tools;

use closedloop_engine::Engine;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig, Tool};
use std::sync::Arc;

pub use tools::FIXED_TOOLS;

/// The instructions a client shows its model at connection time.
const INSTRUCTIONS: &str = "closedloop controls physical devices and reports only what the hardware confirmed. \
Every action tool returns a command with a command_id; status \"accepted\" or \"running\" is NOT completion. \
Call get_command_status (or pass wait_s) until the status is final: \"completed\" with verified=true means a sensor \
confirmed the effect; \"sent\" means it was delivered but nothing could confirm it; \"failed\", \"timeout\" and \
\"rejected\" carry an error_code, a detail and a hint saying what to do next. Never tell the user an action \
happened unless its status is \"completed\".";

/// The MCP server: a thin handle on the engine.
#[derive(Clone)]
pub struct Server {
    engine: Arc<Engine>,
    tools: Arc<Vec<Tool>>,
    /// Who the caller is, journaled with every command (`stdio`, or a token name over HTTP).
    caller: Arc<str>,
}

impl Server {
    /// A server over a started engine; `caller` names the client in the journal.
    pub fn new(engine: Arc<Engine>, caller: &str) -> Server {
        let tools = Arc::new(tools::build(engine.plant()));
        Server {
            engine,
            tools,
            caller: Arc::from(caller),
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

    fn info(&self) -> ServerConfig {
        let plant = self.engine.plant();
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("closedloop", env!("CARGO_PKG_VERSION"))
                    .with_title(format!("closedloop — {}", plant.server.name)),
            )
            .with_instructions(INSTRUCTIONS)
    }
}
