//! The Tasks extension's task tools, served by closedloop itself.
//!
//! The suite's task tools are the actions of `plant.toml`, whose simulated devices are named so
//! that each tool name `{device}_{action}` is the suite's:
//!
//! | suite tool       | closedloop command                                                       |
//! |------------------|--------------------------------------------------------------------------|
//! | `slow_compute`   | axis `slow` moves `seconds` mm at 1 mm/s; completes when the encoder reads the target; `tasks/cancel` stops it (`cancelled`) |
//! | `failing_job`    | relay `failing` (a simulated brownout) never closes: `failed` `FEEDBACK_MISMATCH` about 1 s after dispatch; `task = "required"`, so a client without the Tasks extension is refused with -32021 |
//! | `confirm_delete` | relay `confirm` is `confirm = true`: the task waits in `input_required` for the person's yes (`tasks/update`) |
//! | `protocol_error_job` | relay `protocol_error` behind a link whose writes panic (`buggy.rs`): the engine ends the command `failed INTERRUPTED`, the task is `failed` with JSON-RPC error -32603 |
//! | `multi_input` | relay `multi` is `confirm = true` with a `checklist` of two items: the task waits in `input_required` with two questions, answered one at a time with `tasks/update` |
//! | `test_tool_with_task` | relay `test_tool` whose `with_task` asks the person `name` (`ask`): round 1 is an `InputRequiredResult` with the form (no task yet), the retry carrying the answer becomes the task, whose result names the signer; `task = "required"` |
//!
//! The engine, the journal, the confirmations and the MCP mapping are closedloop's own
//! (`closedloop_mcp::Server`); nothing here answers a task itself.

use closedloop_engine::Engine;
use closedloop_journal::Journal;
use closedloop_mcp::Server;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The conformance plant; its `journal = "sqlite://journal.db"` resolves against the directory
/// `start` is given.
const PLANT: &str = include_str!("plant.toml");

fn other(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("conformance plant: {what}: {e}"))
}

/// Starts an engine over the conformance plant with its journal in `dir`, and closedloop's MCP
/// server on it (the journal names its caller `conformance`).
pub(crate) async fn start(dir: &Path) -> io::Result<Server> {
    let plant =
        closedloop_plant::parse(PLANT, "plant.toml", dir).map_err(|e| other("plant.toml", e))?;
    let journal = Journal::open(&plant.server.journal)
        .await
        .map_err(|e| other("journal", e))?;
    let drivers = closedloop_connect::build_drivers(&plant).map_err(|e| other("drivers", e))?;
    let mut links = drivers
        .open(&plant.devices)
        .map_err(|e| other("links", e))?;
    let relay = links.map.remove(crate::buggy::DEVICE).ok_or_else(|| {
        other(
            "plant.toml",
            format!("no device {:?}", crate::buggy::DEVICE),
        )
    })?;
    let buggy: Arc<dyn closedloop_link::Link> = Arc::new(crate::buggy::Buggy(relay));
    links.map.insert(crate::buggy::DEVICE.into(), buggy);
    let engine = Engine::start(Arc::new(plant), journal, links)
        .await
        .map_err(|e| other("engine", e))?;
    Ok(Server::new(Arc::new(engine), "conformance"))
}
