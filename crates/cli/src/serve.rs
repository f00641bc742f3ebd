//! `closedloop serve PLANT [--http ADDR]`: the MCP server over stdio, or over Streamable HTTP.
//!
//! Over stdio, stdout carries the protocol, so logs go to stderr (and to `--log-file` when
//! given). Over HTTP the bound address is announced on stderr as one line. SIGINT and SIGTERM
//! shut down cleanly: queued commands end `INTERRUPTED`, running motion gets its cancel plan, and
//! the journal is closed. A client that disconnects does not cancel anything.

use anyhow::{Context, Result};
use closedloop_engine::Engine;
use closedloop_journal::Journal;
use rmcp::ServiceExt;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

/// Loads the plant, starts the engine, and starts its pollers and recovery.
pub async fn start_engine(plant_path: &Path) -> Result<Arc<Engine>> {
    start_engine_with(plant_path, crate::load(plant_path)?).await
}

/// Starts the engine on a plant already loaded from `plant_path`.
async fn start_engine_with(
    plant_path: &Path,
    plant: closedloop_plant::Plant,
) -> Result<Arc<Engine>> {
    // An in-process simulated device answers exception 2 for every address its model lacks:
    // refuse such a plant as `closedloop check` does, instead of serving signals that never read.
    let refused = crate::check::sim_errors(&plant, &plant_path.display().to_string());
    if !refused.is_empty() {
        let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
        anyhow::bail!("{}", lines.join("\n"));
    }
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
    let signal = signalled()?;
    tokio::select! {
        r = running.waiting() => { tracing::info!(?r, "client closed the connection"); }
        () = signal => {}
    }
    engine.shutdown().await;
    tracing::info!("shut down cleanly");
    Ok(())
}

/// What `--http` was given.
#[derive(Debug, Clone)]
pub struct HttpArgs {
    /// Where to listen; port 0 picks a free port (announced on stderr).
    pub addr: SocketAddr,
    /// `--allow-host`, added to the loopback names.
    pub allow_hosts: Vec<String>,
    /// `--allow-origin`, added to the loopback origins.
    pub allow_origins: Vec<String>,
}

/// Serves MCP over Streamable HTTP at `/mcp` until a signal arrives.
///
/// Refuses, before anything starts, to listen beyond loopback when the plant declares no token.
pub async fn serve_http(plant_path: &Path, args: HttpArgs) -> Result<()> {
    let plant = crate::load(plant_path)?;
    closedloop_mcp::http::check_listen(args.addr, &plant)
        .map_err(|e| anyhow::anyhow!("{}: {e}", plant_path.display()))?;
    let mut opts = closedloop_mcp::http::HttpOptions::default();
    // A literal IP in `Host` cannot come from DNS rebinding, so the address listened on is safe
    // to accept as a name.
    if !args.addr.ip().is_unspecified() && !args.addr.ip().is_loopback() {
        opts.allowed_hosts.push(match args.addr.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        });
    }
    opts.allowed_hosts.extend(args.allow_hosts);
    opts.allowed_origins.extend(args.allow_origins);
    opts.validate()?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let local = listener.local_addr()?;
    let engine = start_engine_with(plant_path, plant).await?;
    let server = closedloop_mcp::Server::new(Arc::clone(&engine), "http");
    tracing::info!(plant = %plant_path.display(), %local, "closedloop serving MCP over HTTP");
    // One line, for people and for tests that need the port.
    eprintln!(
        "closedloop: listening on http://{local}{}",
        closedloop_mcp::http::PATH
    );
    let result = closedloop_mcp::http::serve(listener, server, opts, signalled()?).await;
    engine.shutdown().await;
    tracing::info!("shut down cleanly");
    result.context("serving HTTP")
}

/// Completes on SIGINT or SIGTERM.
fn signalled() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT"); }
            _ = term.recv() => { tracing::info!("SIGTERM"); }
        }
    })
}
