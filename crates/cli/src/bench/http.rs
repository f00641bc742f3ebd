//! Act-and-confirm through MCP Streamable HTTP: `closedloop serve --http ADDR` as a child on
//! relays fast enough that HTTP, not physics, is what is measured (1 ms pull-in, polled every
//! 1 ms), and [`CLIENTS`] clients each on a keep-alive connection of its own, switching its own
//! relay one command after the other. Requests are stateless 2026-07-28 MCP requests, so no
//! session set-up is counted; the client is `http_client.rs`.

use super::BenchArgs;
pub(super) use super::http_client::Connection;
use super::stats::{Latencies, Progress, ms, table};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::json;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Clients at once, each with one command in flight.
pub const CLIENTS: usize = 16;

/// Where the HTTP bench's gateways keep their journal: one `serve` on a SQLite file of its own,
/// or `gateways` of them (`--instance g1`, `g2`, …) sharing the PostgreSQL database `journal`.
#[derive(Debug, Clone, Copy)]
pub struct Topology<'a> {
    /// A `postgres://` URL, or `None` for one gateway on SQLite.
    pub journal: Option<&'a str>,
    /// How many gateways serve the relays (clients are spread over them).
    pub gateways: usize,
    /// The device lease, s (several gateways only).
    pub lease_s: u32,
}

/// Writes the bench plant of [`CLIENTS`] fast relays, journaled as `topo` says; its path.
pub(super) fn plant(dir: &Path, topo: Topology<'_>) -> Result<std::path::PathBuf> {
    let plant = dir.join("http-bench.toml");
    let mut src = super::hall::relays(CLIENTS, 1, 1).replace("bench.db", "http-bench.db");
    if let Some(url) = topo.journal {
        let shared = format!("journal = \"{url}\"\nlease_s = {}", topo.lease_s);
        src = src.replace("journal = \"sqlite://http-bench.db\"", &shared);
    }
    std::fs::write(&plant, src)?;
    Ok(plant)
}

/// A `serve --http` child, where it listens, and the last lines it logged (for a failure's
/// report: a bench that fails without the server's side of the story cannot be diagnosed).
pub(super) struct Served {
    pub child: Child,
    pub at: SocketAddr,
    log: Arc<Mutex<VecDeque<String>>>,
}

/// How many of a gateway's last log lines a failure report shows.
const LOG_TAIL: usize = 40;

impl Served {
    /// Its last [`LOG_TAIL`] log lines, each indented under `name`.
    pub(super) fn tail(&self, name: &str) -> String {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let lines: Vec<String> = log.iter().map(|l| format!("  {l}")).collect();
        format!("{name}'s last log lines:\n{}", lines.join("\n"))
    }
}

/// `e` with the last log lines of each of `gateways` (named g1, g2, …) appended.
pub(super) fn with_logs(e: anyhow::Error, gateways: &[Served]) -> anyhow::Error {
    let logs: Vec<String> = (gateways.iter().enumerate())
        .map(|(i, g)| g.tail(&format!("g{}", i + 1)))
        .collect();
    anyhow!("{e:#}\n{}", logs.join("\n"))
}

/// What the gateways log unless `CLOSEDLOOP_LOG` says otherwise: warnings, and the leases taken
/// and handed over (the story of a command that waited for its device's owner), not a line per
/// command.
const GATEWAY_LOG: &str = "warn,closedloop_engine::ownership=info";

/// Starts `serve PLANT --http ADDR` (as `instance`, when given); it, once it announced where it
/// listens (if it does not, the error shows what it logged).
pub(super) async fn start(
    exe: &Path,
    plant: &Path,
    addr: &str,
    instance: Option<&str>,
) -> Result<Served> {
    let dir = plant.parent().unwrap_or(Path::new("."));
    let level = std::env::var("CLOSEDLOOP_LOG").unwrap_or_else(|_| GATEWAY_LOG.into());
    let mut child = Command::new(exe)
        .arg("serve")
        .arg(plant)
        .args(["--http", addr])
        .args(instance.map(|i| ["--instance", i]).into_iter().flatten())
        .env("CLOSEDLOOP_LOG", level)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting closedloop serve --http")?;
    let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let mut lines = BufReader::new(stderr).lines();
    let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_TAIL)));
    let announced = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.split("listening on http://").nth(1) {
                let host = url.split('/').next().unwrap_or_default();
                return Ok(host.parse::<SocketAddr>()?);
            }
            keep(&log, line);
        }
        bail!("serve --http ended without announcing its address")
    })
    .await
    .unwrap_or_else(|_| Err(anyhow!("serve --http announced no address within 30 s")));
    let served = |at| Served {
        child,
        at,
        log: Arc::clone(&log),
    };
    let served = match announced {
        Ok(at) => served(at),
        Err(e) => return Err(with_logs(e, &[served(SocketAddr::from(([0, 0, 0, 0], 0)))])),
    };
    // Keep reading stderr so the server never blocks on a full pipe; keep the last lines.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            keep(&log, line);
        }
    });
    Ok(served)
}

/// Keeps `line` among the last [`LOG_TAIL`] of `log`.
fn keep(log: &Mutex<VecDeque<String>>, line: String) {
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    if log.len() == LOG_TAIL {
        log.pop_front();
    }
    log.push_back(line);
}

/// `calls` act-and-confirm commands over HTTP, [`CLIENTS`] at once, spread over the gateways
/// `topo` names (client `i` calls gateway `i % gateways`, whichever drives its relay).
pub async fn measure(
    exe: &Path,
    dir: &Path,
    addr: &str,
    calls: usize,
    topo: Topology<'_>,
) -> Result<Latencies> {
    let plant = plant(dir, topo)?;
    let mut gateways = Vec::with_capacity(topo.gateways);
    for g in 1..=topo.gateways {
        let instance = format!("g{g}");
        let shared = topo.journal.is_some().then_some(instance.as_str());
        gateways.push(start(exe, &plant, addr, shared).await?);
    }
    run_clients(&gateways, calls, topo)
        .await
        .map_err(|e| with_logs(e, &gateways))
}

/// The measured part of [`measure`]: [`CLIENTS`] clients on `gateways`, `calls` in all.
async fn run_clients(gateways: &[Served], calls: usize, topo: Topology<'_>) -> Result<Latencies> {
    let addrs: Vec<SocketAddr> = gateways.iter().map(|g| g.at).collect();
    let per_client = calls.div_ceil(CLIENTS);
    let label = format!("http: act-and-confirm, {CLIENTS} clients");
    let bar = Arc::new(Mutex::new(Progress::new(&label, per_client * CLIENTS)));
    let mut conns = Vec::with_capacity(CLIENTS);
    for relay in 0..CLIENTS {
        let mut c = Connection::open(addrs[relay % addrs.len()]).await?;
        wait_online(&mut c, relay).await?;
        conns.push(c);
    }
    if topo.gateways > 1 {
        super::failover::settled(&mut conns[..], CLIENTS, topo.lease_s).await?;
    }
    let start = Instant::now();
    let tasks: Vec<_> = (conns.into_iter().enumerate())
        .map(|(relay, c)| tokio::spawn(client(relay, c, per_client, Arc::clone(&bar))))
        .collect();
    let mut samples = Vec::with_capacity(per_client * CLIENTS);
    let (mut followed, mut retried) = (0, 0);
    for t in tasks {
        let (s, f, r) = t.await??;
        samples.extend(s);
        (followed, retried) = (followed + f, retried + r);
    }
    if followed + retried > 0 {
        // Counted in the latencies; said here so a fat tail is not taken for the gateways'.
        eprintln!(
            "bench: http: {followed} status calls for commands that outlasted their call, \
             {retried} calls made again after DEVICE_BUSY (a lease moved while measuring)"
        );
    }
    let total = start.elapsed();
    if let Ok(b) = Arc::try_unwrap(bar) {
        b.into_inner().unwrap_or_else(|p| p.into_inner()).finish();
    }
    Ok(Latencies::new(samples, total))
}

/// One client: `per_client` act-and-confirm commands on `relay`, one after the other; their
/// latencies (each from the first call to the final result), and the status calls and retries
/// they took.
async fn client(
    relay: usize,
    mut c: Connection,
    per_client: usize,
    bar: Arc<Mutex<Progress>>,
) -> Result<(Vec<Duration>, u32, u32)> {
    let mut samples = Vec::with_capacity(per_client);
    let (mut followed, mut retried) = (0, 0);
    for i in 0..per_client {
        let t = Instant::now();
        let args = json!({"on": i.is_multiple_of(2), "wait_s": 5});
        let ended = c.act_to_end(&format!("relay{relay}_switch"), args).await?;
        let r = &ended.result;
        if r["status"] != "completed" {
            bail!(
                "relay{relay} over HTTP: command {} ended {} ({}): {}",
                r["command_id"],
                r["status"],
                r["error_code"],
                r["detail"]
            );
        }
        samples.push(t.elapsed());
        (followed, retried) = (followed + ended.followed, retried + ended.retried);
        bar.lock().unwrap_or_else(|p| p.into_inner()).step();
    }
    Ok((samples, followed, retried))
}

/// Waits (bounded: 10 s) until `relay` reads online, so start-up is not measured.
pub(super) async fn wait_online(c: &mut Connection, relay: usize) -> Result<()> {
    for _ in 0..200 {
        let s = c
            .tool(
                "get_device_state",
                json!({"device": format!("relay{relay}")}),
            )
            .await?;
        if s["liveness"] == "online" {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("relay{relay} did not come online within 10 s")
}

/// Act-and-confirm through MCP Streamable HTTP, on one gateway or on `--gateways` sharing
/// `--journal`, in a table.
pub(super) async fn print(exe: &Path, dir: &Path, addr: &str, args: &BenchArgs) -> Result<()> {
    let topo = Topology {
        journal: args.journal.as_deref(),
        gateways: args.gateways,
        lease_s: 5,
    };
    let journal = match topo.journal {
        Some(_) if topo.gateways > 1 => format!("{} gateways on one PostgreSQL", topo.gateways),
        Some(_) => "one gateway on PostgreSQL".to_string(),
        None => "one gateway on SQLite".to_string(),
    };
    let calls = args.calls.max(CLIENTS);
    let over = measure(exe, dir, addr, calls, topo).await?;
    let rows = vec![
        vec![
            format!(
                "act-and-confirm commands/s, {} clients at once (1 ms pull-in, 1 ms poll), {journal}",
                CLIENTS
            ),
            format!("{:.0}", over.per_second()),
        ],
        vec![
            "their latency p50 / p99 over HTTP".into(),
            format!("{} / {}", ms(over.p50()), ms(over.p99())),
        ],
    ];
    println!();
    print!("{}", table(&["MCP Streamable HTTP", "measured"], &rows));
    Ok(())
}

/// `--gateways`, `--journal` and `--failover` together: several gateways share a PostgreSQL
/// journal, which must be named; a failover needs at least one kill.
pub(super) fn check_gateways(args: &BenchArgs) -> Result<()> {
    let postgres = args
        .journal
        .as_deref()
        .is_some_and(|j| j.starts_with("postgres://") || j.starts_with("postgresql://"));
    if args.gateways == 0 {
        bail!("--gateways must be at least 1");
    }
    if args.journal.is_some() && !postgres {
        bail!(
            "--journal must be a postgres:// URL (several gateways share one PostgreSQL database)"
        );
    }
    if args.gateways > 1 && !postgres {
        bail!(
            "--gateways {} needs --journal postgres://USER@HOST:PORT/DATABASE: gateways share one PostgreSQL journal",
            args.gateways
        );
    }
    if args.failover == Some(0) {
        bail!("--failover must be at least 1 kill");
    }
    Ok(())
}
