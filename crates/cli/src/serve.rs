//! `closedloop serve PLANT`: the MCP server over stdio.
//!
//! stdout carries the protocol, so logs go to stderr (and to `--log-file` when given). SIGINT and
//! SIGTERM shut down cleanly: queued commands end `INTERRUPTED`, running motion gets its cancel
//! plan, and the journal is closed. A client that disconnects does not cancel anything.

use anyhow::{Context, Result};
use closedloop_engine::Engine;
use closedloop_journal::Journal;
use rmcp::ServiceExt;
use std::path::Path;
use std::sync::Arc;

/// Loads the plant, starts the engine, and starts its pollers and recovery.
pub async fn start_engine(plant_path: &Path) -> Result<Arc<Engine>> {
    let plant = crate::load(plant_path)?;
    let journal = Journal::open(&plant.server.journal)
        .await
        .with_context(|| {
            format!(
                "{}: opening the journal {}",
                plant_path.display(),
                plant.server.journal
            )
        })?;
    let drivers = closedloop_engine::build_drivers(&plant)
        .with_context(|| format!("{}", plant_path.display()))?;
    let engine = Engine::start(Arc::new(plant), journal, drivers.map).await?;
    Ok(Arc::new(engine))
}

/// Serves MCP over stdio until the client goes away or a signal arrives.
pub async fn serve(plant_path: &Path) -> Result<()> {
    let engine = start_engine(plant_path).await?;
    tracing::info!(plant = %plant_path.display(), "closedloop serving MCP over stdio");
    let server = closedloop_mcp::Server::new(Arc::clone(&engine), "stdio");
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .context("MCP handshake over stdio")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = running.waiting() => { tracing::info!(?r, "client closed the connection"); }
        _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT"); }
        _ = term.recv() => { tracing::info!("SIGTERM"); }
    }
    engine.shutdown().await;
    tracing::info!("shut down cleanly");
    Ok(())
}
