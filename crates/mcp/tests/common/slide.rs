//! The slide a person confirms every move of, served over an in-process pipe: what the
//! confirmation tests (`confirm.rs`, `elicitation.rs`) share.

use closedloop_engine::Engine;
use closedloop_sim::SimDevice;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

pub type Client = RunningService<RoleClient, ()>;

/// A slide a person confirms every move of (no fault signal, no cancel).
pub const SLIDE: &str = r#"
[server]
name = "confirm-test"
journal = "sqlite::memory:"
SERVER_EXTRA

[[device]]
id = "slide"
description = "Linear slide"
driver = { kind = "sim", model = "stepper", speed_mm_s = 200.0, travel_mm = [0.0, 300.0] }
poll_ms = 20
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving      = { discrete_input = 0 }
[[device.action]]
name = "move_to"
description = "Move the slide; a person confirms every move."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving"
expect_s = "abs(params.target_mm - position_mm) / 200.0 + 0.05"
confirm = true
"#;

/// `SLIDE` with the `[server]` lines `extra`, and the shared lamp.
pub fn plant(extra: &str) -> String {
    format!(
        "{}\n{}",
        SLIDE.replace("SERVER_EXTRA", extra),
        super::plants::LAMP
    )
}

/// A client of a server on [`plant`]`(extra)`, the simulated devices and the engine.
pub async fn start(extra: &str) -> (Client, BTreeMap<String, SimDevice>, Arc<Engine>) {
    let src = plant(extra);
    let (engine, sims) = super::engine(&src, std::path::Path::new(".")).await;
    let io = super::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    (().serve(io).await.unwrap(), sims, engine)
}

/// Calls `tool` with `args`; panics on a protocol error.
pub async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    c.call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A result's structured content.
pub fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().unwrap()
}
