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
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod addrs;
use addrs::{announcement, host_addresses, literal_hosts, plain_http_warning, shown_addr};

/// Loads the plant, starts the engine, and starts its pollers and recovery.
pub async fn start_engine(plant_path: &Path) -> Result<Arc<Engine>> {
    start_engine_with(plant_path, crate::load(plant_path)?, None).await
}

/// Starts the engine on a plant already loaded from `plant_path`.
/// `instance` names this gateway among those sharing a PostgreSQL journal (default: the host
/// name); with such a journal the lease keeper starts here too.
async fn start_engine_with(
    plant_path: &Path,
    plant: closedloop_plant::Plant,
    instance: Option<String>,
) -> Result<Arc<Engine>> {
    // An in-process simulated device answers exception 2 for every address its model lacks:
    // refuse such a plant as `closedloop check` does, instead of serving signals that never read.
    let refused = crate::check::sim_errors(&plant, &plant_path.display().to_string());
    if !refused.is_empty() {
        let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
        anyhow::bail!("{}", lines.join("\n"));
    }
    if plant.server.journal.contains(":memory:") {
        anyhow::bail!(
            "{}: journal = {:?} keeps nothing: every accepted command would be lost with the process, and a restart could not stop or confirm what was running; write journal = \"sqlite://closedloop.db\" (a file next to the plant file)",
            plant_path.display(),
            plant.server.journal
        );
    }
    // Before the journal and the links exist: they take their metric handles when made, and
    // a handle made before the recorder records nothing.
    closedloop_mcp::metrics::install();
    let key = (plant.server.journal_key.as_ref())
        .map(|k| closedloop_journal::JournalKey::new(&k.0))
        .transpose()
        .map_err(|why| {
            anyhow::anyhow!("{}: key server.journal_key: {why}", plant_path.display())
        })?;
    let journal = Journal::open_keyed(&plant.server.journal, key)
        .await
        .with_context(|| {
            format!(
                "{}: opening the journal {}",
                plant_path.display(),
                closedloop_journal::shown_url(&plant.server.journal)
            )
        })?;
    let mut drivers = closedloop_connect::build_drivers(&plant)
        .with_context(|| format!("{}", plant_path.display()))?;
    let instance = instance.unwrap_or_else(closedloop_engine::ownership::host_name);
    if journal.leases().is_some() {
        drivers.per_instance_client_ids(&instance);
    }
    let links = drivers.open(&plant.devices)?;
    crate::retention::keep_pruned(&closedloop_plant::JournalView::of(&plant), journal.clone());
    let engine = Arc::new(Engine::start_as(Arc::new(plant), journal, links, instance).await?);
    engine.keep_leases().await;
    Ok(engine)
}

/// Serves MCP over stdio until the client goes away or a signal arrives.
pub async fn serve(
    plant_path: &Path,
    metrics: Option<SocketAddr>,
    instance: Option<String>,
) -> Result<()> {
    crate::logfile::reopen_on_hangup().context("listening for SIGHUP")?;
    let plant = crate::load(plant_path)?;
    // Bound (and refused beyond loopback without a token) before anything starts.
    let metrics = match metrics {
        Some(addr) => Some(bind_metrics(plant_path, addr, &plant).await?),
        None => None,
    };
    let engine = start_engine_with(plant_path, plant, instance).await?;
    let mut metrics_at = None;
    if let Some((listener, opts)) = metrics {
        let local = listener.local_addr()?;
        let engine = Arc::clone(&engine);
        let path = closedloop_mcp::http::METRICS_PATH;
        eprintln!("closedloop: metrics on http://{local}{path}");
        metrics_at = Some(format!("http://{local}{path}"));
        tokio::spawn(async move {
            let served =
                closedloop_mcp::http::serve_metrics(listener, engine, opts, std::future::pending());
            if let Err(e) = served.await {
                tracing::error!("metrics endpoint stopped: {e}");
            }
        });
    }
    tracing::info!(plant = %plant_path.display(), "closedloop serving MCP over stdio");
    let mut endpoints = vec![("MCP".to_string(), "on stdio".to_string())];
    if let Some(at) = &metrics_at {
        endpoints.push(("metrics".into(), at.clone()));
    }
    let traces = start_traces(&engine, &mut endpoints);
    crate::banner::print_when_settled(&engine, plant_path, endpoints);
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        let src = std::fs::read_to_string(plant_path).unwrap_or_default();
        let vars = closedloop_plant::env_variables(&src);
        let name = &engine.plant().server.name;
        eprint!("{}", terminal_hint(plant_path, name, &vars));
    }
    let server = closedloop_mcp::Server::new(Arc::clone(&engine), "stdio");
    let running = server
        .serve(closedloop_mcp::stdio::StdioTransport::stdio())
        .await
        .context("MCP handshake over stdio")?;
    let signal = signalled()?;
    tokio::select! {
        r = running.waiting() => { tracing::info!(?r, "client closed the connection"); }
        () = signal => {}
    }
    engine.shutdown().await;
    if let Some(t) = traces {
        t.finish().await;
    }
    tracing::info!("shut down cleanly");
    Ok(())
}

/// The trace exporter when the plant names an OTLP collector (`[server] otlp`), with its line
/// for the banner.
fn start_traces(
    engine: &Arc<Engine>,
    endpoints: &mut Vec<(String, String)>,
) -> Option<closedloop_mcp::otlp::Exporter> {
    let url = engine.plant().server.otlp.clone()?;
    endpoints.push(("traces to".into(), format!("{url}/v1/traces")));
    Some(closedloop_mcp::otlp::Exporter::start(engine, &url))
}

/// `--metrics ADDR` of a stdio server: its listener, and the HTTP options of `/metrics` there.
async fn bind_metrics(
    plant_path: &Path,
    addr: SocketAddr,
    plant: &closedloop_plant::Plant,
) -> Result<(tokio::net::TcpListener, closedloop_mcp::http::HttpOptions)> {
    closedloop_mcp::http::check_listen(addr, plant)
        .map_err(|e| anyhow::anyhow!("{}: --metrics {e}", plant_path.display()))?;
    let mut opts = closedloop_mcp::http::HttpOptions::default();
    opts.allowed_hosts.extend(literal_hosts(addr));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics: listening on {addr}"))?;
    Ok((listener, opts))
}

/// What `serve` says when a person runs it at a terminal: stdin/stdout carry MCP's JSON-RPC,
/// so typing at it does nothing useful. The server keeps serving all the same.
/// The configuration shown carries an `env` block naming every variable the plant reads
/// (`vars`), since a client passes the server only those: values are left for the user to
/// fill in, never copied from this shell, where they may be secrets.
pub fn terminal_hint(plant_path: &Path, name: &str, vars: &[String]) -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "closedloop".into());
    let plant = std::fs::canonicalize(plant_path)
        .unwrap_or_else(|_| plant_path.to_path_buf())
        .display()
        .to_string();
    let json = |s: &str| serde_json::Value::from(s).to_string();
    let env = match vars {
        [] => String::new(),
        _ => {
            let each: Vec<String> = vars.iter().map(|v| format!("{}: \"…\"", json(v))).collect();
            format!(", \"env\": {{ {} }}", each.join(", "))
        }
    };
    format!(
        "closedloop serve speaks MCP (JSON-RPC) on stdin and stdout: an MCP client starts it and \
         talks to it; typing here does nothing useful.\n\
         \x20 Claude Desktop (claude_desktop_config.json) or Cursor (.cursor/mcp.json):\n\
         \x20   {{ \"mcpServers\": {{ {}: {{ \"command\": {}, \"args\": [\"serve\", {}]{} }} }} }}\n\
         \x20 Over HTTP instead: closedloop serve {} --http 127.0.0.1:8080  (then the URL http://127.0.0.1:8080/mcp)\n\
         \x20 To watch it work without a client: closedloop demo\n\
         Serving on stdio until the client closes it or Ctrl-C.\n",
        json(name),
        json(&exe),
        json(&plant),
        env,
        shell_word(&plant),
    )
}

/// `s` as one shell word: as it is when it needs no quoting, else in single quotes.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
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
    /// `--trusted-proxy`: proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<closedloop_mcp::http::Net>,
    /// `--max-connections`.
    pub max_connections: usize,
    /// `--idle-timeout`, seconds.
    pub idle_timeout_s: f64,
    /// `--handshake-timeout`, seconds.
    pub handshake_timeout_s: f64,
    /// `--tls-cert` and `--tls-key`: serve HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--instance`: this gateway's name among those sharing a PostgreSQL journal.
    pub instance: Option<String>,
}

/// A flag's seconds as a duration above zero, or an error naming the flag and an example.
fn seconds(flag: &str, s: f64, example: u32) -> Result<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(s)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{flag} {s}: give a number of seconds above zero, e.g. {example}"))
}

/// Serves MCP over Streamable HTTP at `/mcp` until a signal arrives.
///
/// Refuses, before anything starts, to listen beyond loopback when the plant declares no token.
pub async fn serve_http(plant_path: &Path, args: HttpArgs) -> Result<()> {
    crate::logfile::reopen_on_hangup().context("listening for SIGHUP")?;
    let plant = crate::load(plant_path)?;
    closedloop_mcp::http::check_listen(args.addr, &plant)
        .and_then(|()| closedloop_mcp::http::check_allowed_hosts(&args.allow_hosts, &plant))
        .map_err(|e| anyhow::anyhow!("{}: {e}", plant_path.display()))?;
    let mut opts = closedloop_mcp::http::HttpOptions::default();
    let others = own_hosts(&mut opts, args.addr);
    limits(&mut opts, &args)?;
    opts.allowed_hosts.extend(args.allow_hosts);
    opts.allowed_origins.extend(args.allow_origins);
    opts.trusted_proxies = args.trusted_proxies;
    opts.validate()?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let local = listener.local_addr()?;
    let engine = start_engine_with(plant_path, plant, args.instance.clone()).await?;
    let server = closedloop_mcp::Server::new(Arc::clone(&engine), "http");
    tracing::info!(plant = %plant_path.display(), %local, "closedloop serving MCP over HTTP");
    // The first line is for people and for tests that need the port: always an address a client
    // can connect to (never 0.0.0.0).
    let scheme = if args.tls.is_some() { "https" } else { "http" };
    eprint!("{}", announcement(scheme, local, &others));
    let base = format!("{scheme}://{}", shown_addr(local));
    let mut endpoints = vec![
        (
            "MCP".to_string(),
            format!("{base}{}", closedloop_mcp::http::PATH),
        ),
        (
            "metrics".to_string(),
            format!("{base}{}", closedloop_mcp::http::METRICS_PATH),
        ),
        ("operator page".to_string(), format!("{base}/")),
    ];
    let traces = start_traces(&engine, &mut endpoints);
    crate::banner::print_when_settled(&engine, plant_path, endpoints);
    let result = closedloop_mcp::http::serve(listener, server, opts, signalled()?).await;
    engine.shutdown().await;
    if let Some(t) = traces {
        t.finish().await;
    }
    tracing::info!("shut down cleanly");
    result.context("serving HTTP")
}

/// Accepts as `Host` the address listened on, or this host's addresses when that is every
/// interface; returns the latter, which are announced too.
fn own_hosts(opts: &mut closedloop_mcp::http::HttpOptions, addr: SocketAddr) -> Vec<IpAddr> {
    // A literal IP in `Host` cannot come from DNS rebinding, so the address listened on is safe
    // to accept as a name.
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        opts.allowed_hosts.push(match addr.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => format!("[{ip}]"),
        });
    }
    // Listening on every interface (0.0.0.0 or [::]): clients reach it by this host's addresses,
    // which are literal IPs too, so they are accepted as Host and announced.
    let mut others = Vec::new();
    if addr.ip().is_unspecified() {
        others = host_addresses(addr.ip());
        // [::] takes IPv4 connections too unless the system says v6-only (Linux's default).
        let dual =
            std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").is_ok_and(|v| v.trim() == "0");
        if addr.is_ipv6() && dual {
            others.extend(host_addresses(std::net::Ipv4Addr::UNSPECIFIED.into()));
        }
    }
    opts.allowed_hosts.extend(others.iter().map(|ip| match ip {
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }));
    others
}

/// `--max-connections`, the timeouts and TLS, each refused with the flag named when unusable.
fn limits(opts: &mut closedloop_mcp::http::HttpOptions, args: &HttpArgs) -> Result<()> {
    if args.max_connections == 0 {
        anyhow::bail!(
            "--max-connections 0 would refuse every client: give at least 1 (default 256)"
        );
    }
    opts.max_connections = args.max_connections;
    opts.idle_timeout = seconds("--idle-timeout", args.idle_timeout_s, 60)?;
    opts.handshake_timeout = seconds("--handshake-timeout", args.handshake_timeout_s, 5)?;
    if let Some((cert, key)) = &args.tls {
        opts.tls = Some(closedloop_mcp::http::Tls::load(cert, key)?);
    } else if !args.addr.ip().is_loopback() {
        // Refusing would break every set-up behind a TLS-terminating proxy on another host;
        // saying it plainly at start is the least.
        eprintln!("{}", plain_http_warning(args.addr));
        tracing::warn!(addr = %args.addr, "serving plain HTTP beyond loopback");
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("/tmp/a/plant.toml"), "/tmp/a/plant.toml");
        assert_eq!(
            shell_word("/tmp/my plant's.toml"),
            "'/tmp/my plant'\\''s.toml'"
        );
    }
}
