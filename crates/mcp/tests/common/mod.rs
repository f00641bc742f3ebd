//! What the MCP tests share: an engine over simulated devices, and a server on one end of an
//! in-process pipe (MCP over `tokio::io::duplex`, exactly as over stdio).

#![allow(dead_code)]

use closedloop_engine::Engine;
use closedloop_journal::Journal;
use closedloop_mcp::Server;
use closedloop_sim::SimDevice;
use rmcp::ServiceExt;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

#[path = "../../../../tests/plants/mod.rs"]
pub mod plants;

/// Starts an engine for a plant given as TOML (relative paths resolve against `dir`).
pub async fn engine(src: &str, dir: &Path) -> (Arc<Engine>, BTreeMap<String, SimDevice>) {
    let plant = closedloop_plant::parse(src, "test.toml", dir).unwrap_or_else(|e| panic!("{e}"));
    let journal = Journal::open(&plant.server.journal).await.expect("journal");
    let drivers = closedloop_connect::build_drivers(&plant).expect("drivers");
    let links = drivers.open(&plant.devices).expect("links");
    let engine = Engine::start(Arc::new(plant), journal, links)
        .await
        .expect("engine");
    (Arc::new(engine), drivers.sims)
}

/// Serves `server` on one end of a pipe and returns the other end, for a client.
pub fn pipe(server: Server) -> tokio::io::DuplexStream {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    client_io
}

/// An MCP client of a served `Server`.
pub type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// An MCP client over Streamable HTTP at `url` (`http://…/mcp`) with the bearer `token`.
pub async fn http_client(url: &str, token: &str) -> Client {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// Calls `tool` with `args`; a protocol error fails the test.
pub async fn call(c: &Client, tool: &str, args: serde_json::Value) -> rmcp::model::CallToolResult {
    let p = rmcp::model::CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    c.call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured content of a tool result.
pub fn sc(r: &rmcp::model::CallToolResult) -> &serde_json::Value {
    r.structured_content.as_ref().expect("structured content")
}
