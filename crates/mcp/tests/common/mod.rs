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

/// Starts an engine for a plant given as TOML (relative paths resolve against `dir`).
pub async fn engine(src: &str, dir: &Path) -> (Arc<Engine>, BTreeMap<String, SimDevice>) {
    let plant = closedloop_plant::parse(src, "test.toml", dir).unwrap_or_else(|e| panic!("{e}"));
    let journal = Journal::open(&plant.server.journal).await.expect("journal");
    let drivers = closedloop_engine::build_drivers(&plant).expect("drivers");
    let engine = Engine::start(Arc::new(plant), journal, drivers.map)
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
