//! Act-and-confirm through MCP Streamable HTTP: `closedloop serve --http ADDR` as a child on
//! relays fast enough that HTTP, not physics, is what is measured (1 ms pull-in, polled every
//! 1 ms), and [`CLIENTS`] clients each on a keep-alive connection of its own, switching its own
//! relay one command after the other. Requests are stateless 2026-07-28 MCP requests, so no
//! session set-up is counted. The client is a few lines of HTTP/1.1 written here: a library
//! client's own costs would be counted as the server's.

use super::BenchArgs;
use super::stats::{Latencies, Progress, ms, table};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
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

/// Starts `serve PLANT --http ADDR` (as `instance`, when given); it once it announced where it
/// listens.
pub(super) async fn start(
    exe: &Path,
    plant: &Path,
    addr: &str,
    instance: Option<&str>,
) -> Result<Served> {
    let dir = plant.parent().unwrap_or(Path::new("."));
    let mut child = Command::new(exe)
        .arg("serve")
        .arg(plant)
        .args(["--http", addr])
        .args(instance.map(|i| ["--instance", i]).into_iter().flatten())
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting closedloop serve --http")?;
    let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
    let mut lines = BufReader::new(stderr).lines();
    let announced = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.split("listening on http://").nth(1) {
                let host = url.split('/').next().unwrap_or_default();
                return Ok(host.parse::<SocketAddr>()?);
            }
        }
        bail!("serve --http ended without announcing its address")
    })
    .await
    .map_err(|_| anyhow!("serve --http announced no address within 30 s"))??;
    // Keep reading stderr so the server never blocks on a full pipe; keep the last lines.
    let log = Arc::new(Mutex::new(VecDeque::with_capacity(LOG_TAIL)));
    let kept = Arc::clone(&log);
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let mut log = kept.lock().unwrap_or_else(|p| p.into_inner());
            if log.len() == LOG_TAIL {
                log.pop_front();
            }
            log.push_back(line);
        }
    });
    Ok(Served {
        child,
        at: announced,
        log,
    })
}

/// One keep-alive HTTP/1.1 connection speaking stateless MCP requests.
pub(super) struct Connection {
    addr: SocketAddr,
    stream: BufReader<TcpStream>,
    next_id: u64,
}

impl Connection {
    pub(super) async fn open(addr: SocketAddr) -> Result<Connection> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            addr,
            stream: BufReader::new(stream),
            next_id: 0,
        })
    }

    /// Calls `tool` and returns its structured content.
    pub(super) async fn tool(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let answer = self.response().await?;
        let message = json_of(&answer)?;
        message["result"]
            .get("structuredContent")
            .cloned()
            .ok_or_else(|| anyhow!("{tool}: no result in {message}"))
    }

    /// Calls the action tool `tool` and follows its command to its end as a client would, for
    /// up to 60 s: `get_command_status` while it is not final (a command handed to another
    /// gateway may outlast the call's `wait_s` while its device's lease changes hands), and the
    /// call again after a `DEVICE_BUSY` refusal (a lease that moved while it was accepted: its
    /// hint asks for the retry, nothing was written).
    pub(super) async fn act_to_end(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        let until = Instant::now() + Duration::from_secs(60);
        let mut r = self.tool(tool, arguments.clone()).await?;
        loop {
            let retry = r["status"] == "rejected" && r["error_code"] == "DEVICE_BUSY";
            let open = matches!(r["status"].as_str(), Some("accepted" | "running"));
            if !retry && !open {
                return Ok(r);
            }
            if Instant::now() >= until {
                bail!("{tool}: still {} after 60 s: {}", r["status"], r["detail"]);
            }
            r = match retry {
                true => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.tool(tool, arguments.clone()).await?
                }
                false => {
                    let id = json!({"command_id": r["command_id"], "wait_s": 10});
                    self.tool("get_command_status", id).await?
                }
            };
        }
    }

    /// Reads one response (Content-Length or chunked body).
    async fn response(&mut self) -> Result<String> {
        let mut status = String::new();
        self.stream.read_line(&mut status).await?;
        if !status.starts_with("HTTP/1.1 200") {
            bail!("HTTP answer {:?}", status.trim_end());
        }
        let (mut length, mut chunked) = (None, false);
        loop {
            let mut line = String::new();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the server closed the connection");
            }
            let line = line.trim_end().to_ascii_lowercase();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("content-length:") {
                length = Some(v.trim().parse::<usize>()?);
            }
            chunked |= line == "transfer-encoding: chunked";
        }
        match (length, chunked) {
            (Some(n), _) => self.exactly(n).await,
            (None, true) => self.chunks().await,
            (None, false) => bail!("an answer with neither Content-Length nor chunks"),
        }
    }

    async fn exactly(&mut self, n: usize) -> Result<String> {
        let mut body = vec![0; n];
        self.stream.read_exact(&mut body).await?;
        Ok(String::from_utf8(body)?)
    }

    /// A chunked body, whole. An event stream ends with the answer: its last chunk is `0`.
    async fn chunks(&mut self) -> Result<String> {
        let mut body = String::new();
        loop {
            let mut size = String::new();
            self.stream.read_line(&mut size).await?;
            let n = usize::from_str_radix(size.trim(), 16)?;
            let chunk = self.exactly(n).await?;
            let mut crlf = [0; 2];
            self.stream.read_exact(&mut crlf).await?;
            if n == 0 {
                return Ok(body);
            }
            body.push_str(&chunk);
        }
    }
}

/// The JSON-RPC message of a body: the body itself, or the `data:` of an event stream.
fn json_of(body: &str) -> Result<Value> {
    if let Ok(v) = serde_json::from_str(body) {
        return Ok(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .ok_or_else(|| anyhow!("no JSON-RPC answer in {body:?}"))
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
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(relay, mut c)| {
            let bar = Arc::clone(&bar);
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let t = Instant::now();
                    let args = json!({"on": i.is_multiple_of(2), "wait_s": 5});
                    let r = c.act_to_end(&format!("relay{relay}_switch"), args).await?;
                    if r["status"] != "completed" {
                        bail!(
                            "relay{relay} over HTTP ended {}: {}",
                            r["status"],
                            r["detail"]
                        );
                    }
                    samples.push(t.elapsed());
                    bar.lock().unwrap_or_else(|p| p.into_inner()).step();
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(per_client * CLIENTS);
    for t in tasks {
        samples.extend(t.await??);
    }
    let total = start.elapsed();
    if let Ok(b) = Arc::try_unwrap(bar) {
        b.into_inner().unwrap_or_else(|p| p.into_inner()).finish();
    }
    Ok(Latencies::new(samples, total))
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
