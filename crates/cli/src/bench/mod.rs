//! `closedloop bench`: the speed figures of a plant, measured on this machine and printed beside
//! the same figures for a bare rmcp server, so what closedloop adds reads as a ratio.
//!
//! Every figure goes through `closedloop serve` started as a child process and a lean JSON-RPC
//! client on its stdio (`rpc.rs`), as an MCP client would drive it. With no plant given, the
//! bundled one is 100 simulated relays (10 ms pull-in, polled every 5 ms) and the figures include
//! act-and-confirm against the physical floor (pull-in + half a poll period). A plant of yours is
//! only read: the bench never actuates real devices. `--hall N` adds the figures at a hall's
//! size (`hall.rs`): loading, memory and CPU at rest with N relays.

mod act;
mod baseline;
mod echo;
mod engine;
mod failover;
mod floor;
mod hall;
mod http;
mod http_client;
mod reads;
mod rpc;
mod stats;

use anyhow::{Context, Result, bail};
use rpc::Rpc;
use serde_json::json;
use stats::{Latencies, ms, table};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

pub use echo::serve as serve_echo;

/// Relays of the bundled plant.
const BUNDLED_RELAYS: usize = 100;
/// Its relays' pull-in and poll period, ms.
const PULL_IN_MS: u64 = 10;
const POLL_MS: u64 = 5;
/// Relays switched at once for the throughput figure.
const PARALLEL: usize = 8;

/// What to measure.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// A plant file to measure read-only (default: a bundled plant of 100 simulated relays,
    /// switched too).
    pub plant: Option<PathBuf>,
    /// Calls per figure.
    #[arg(long, default_value_t = 1000)]
    pub calls: usize,
    /// Also measure a plant of this many relays: `check` and `serve` loading time, memory and
    /// CPU at rest (e.g. 8000).
    #[arg(long, value_name = "RELAYS")]
    pub hall: Option<usize>,
    /// Also measure act-and-confirm through MCP Streamable HTTP: `serve --http ADDR` (e.g.
    /// 127.0.0.1:0) on 16 fast simulated relays, 16 clients at once.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// With `--http`: serve the relays from this many gateways (`serve --instance g1`, `g2`, …)
    /// sharing the PostgreSQL database `--journal`, the clients spread over them.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "http")]
    pub gateways: usize,
    /// The `postgres://` journal the gateways of `--gateways` and `--failover` share.
    #[arg(long, value_name = "URL")]
    pub journal: Option<String>,
    /// Also measure failover: two gateways on `--journal` with 1 s leases, the owner of a relay
    /// killed with SIGKILL this many times, the time until the survivor completes the next
    /// command for it.
    #[arg(long, value_name = "KILLS", requires = "journal")]
    pub failover: Option<usize>,
    /// Only the engine figures: commands per second and durable accepts through the engine's
    /// API on in-process relays, with no MCP and no child process (for profiling the engine).
    #[arg(long, conflicts_with_all = ["plant", "hall", "http"])]
    pub engine_only: bool,
    /// Serve the bare rmcp echo server the figures are compared with (used by the bench itself).
    #[arg(long, hide = true)]
    pub echo_server: bool,
    /// The plant whose tools the echo server lists beside `echo` (used by the bench itself).
    #[arg(long, hide = true, requires = "echo_server")]
    pub echo_tools: Option<PathBuf>,
    /// Serve the plain loop that answers `tools/list` with this file's list, the floor the
    /// list is compared with (used by the bench itself).
    #[arg(long, hide = true, value_name = "FILE")]
    pub floor_server: Option<PathBuf>,
}

/// One row of the main table.
struct Row {
    figure: String,
    ours: String,
    baseline: String,
    ratio: Option<f64>,
}

/// Runs the bench and prints its tables on stdout.
pub async fn run(args: BenchArgs) -> Result<ExitCode> {
    if args.echo_server {
        serve_echo(args.echo_tools.as_deref()).await?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(list) = &args.floor_server {
        floor::serve(list)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.calls == 0 {
        bail!("--calls must be at least 1");
    }
    http::check_gateways(&args)?;
    let dir = tempfile::tempdir()?;
    if args.engine_only {
        print_engine(dir.path(), args.calls).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe().context("finding the closedloop binary")?;
    let plant = match &args.plant {
        Some(p) => std::fs::canonicalize(p).with_context(|| format!("{}", p.display()))?,
        None => {
            let p = dir.path().join("bench.toml");
            std::fs::write(&p, hall::relays(BUNDLED_RELAYS, POLL_MS, PULL_IN_MS))?;
            p
        }
    };
    let rows = measure(&exe, dir.path(), &plant, args.plant.is_none(), args.calls).await?;
    print_rows(&plant, &rows);
    if args.plant.is_none() {
        println!();
        print_engine(dir.path(), args.calls).await?;
    }
    if let Some(addr) = &args.http {
        http::print(&exe, dir.path(), addr, &args).await?;
    }
    if let (Some(kills), Some(journal)) = (args.failover, &args.journal) {
        let addr = args.http.as_deref().unwrap_or("127.0.0.1:0");
        let f = failover::measure(&exe, dir.path(), addr, journal, kills).await?;
        let rows = vec![vec![
            format!("owner killed (SIGKILL) → next command completed, p50 / p99 of {kills}"),
            format!("{} / {}", ms(f.p50()), ms(f.p99())),
        ]];
        println!();
        print!(
            "{}",
            table(&["Failover, 2 gateways, lease_s 1", "measured"], &rows)
        );
    }
    if let Some(n) = args.hall {
        let h = hall::measure(&exe, dir.path(), n).await?;
        print_hall(&h);
    }
    Ok(ExitCode::SUCCESS)
}

/// closedloop's figures on `plant` and the bare rmcp echo server's (serving the plant's tools),
/// each row beside its baseline.
async fn measure(
    exe: &Path,
    dir: &Path,
    plant: &Path,
    bundled: bool,
    calls: usize,
) -> Result<Vec<Row>> {
    let path = plant.display().to_string();
    let mut ours = Rpc::start(exe, &["serve", &path], dir).await?;
    let (device, page) = first_online_device(&mut ours).await?;
    let echo_args = ["bench", "--echo-server", "--echo-tools", &path];
    let mut bare = Rpc::start(exe, &echo_args, dir).await?;
    let mut rows = baseline::rows(&mut ours, &mut bare, calls).await?;
    bare.stop().await;
    let mut floor = floor::start(exe, dir, &mut ours).await?;
    rows.extend(baseline::floor_rows(&mut ours, &mut floor, calls).await?);
    floor.stop().await;
    let mut act_rows = Vec::new();
    let mut finished = None;
    if bundled {
        let (rows, last) = act::act(&mut ours, calls).await?;
        act_rows = rows;
        finished = Some(last);
    }
    rows.extend(reads::measure(&mut ours, calls, &device, finished.as_deref(), page).await?);
    ours.stop().await;
    rows.extend(act_rows);
    Ok(rows)
}

/// A row of a p50 against the baseline's, which the baseline cell names (`of`).
fn ratio_row(figure: &str, ours: &Latencies, baseline: &Latencies, of: &str) -> Row {
    Row {
        figure: figure.into(),
        ours: ms(ours.p50()),
        baseline: format!("{} ({of})", ms(baseline.p50())),
        ratio: Some(ours.p50().as_secs_f64() / baseline.p50().as_secs_f64().max(1e-9)),
    }
}

/// The first device `list_devices` shows, once it is online (bounded: 10 s), and how many
/// devices its first page holds.
async fn first_online_device(rpc: &mut Rpc) -> Result<(String, usize)> {
    let listed = rpc.tool("list_devices", json!({})).await?;
    let page = listed["devices"].as_array().map_or(0, Vec::len);
    let device = listed["devices"][0]["device"]
        .as_str()
        .context("the plant lists no device")?
        .to_string();
    for _ in 0..200 {
        let s = rpc
            .tool("get_device_state", json!({"device": device}))
            .await?;
        if s["liveness"] == "online" {
            return Ok((device, page));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{device} did not come online within 10 s")
}

/// The main table on stdout.
fn print_rows(plant: &Path, rows: &[Row]) {
    let build = if cfg!(debug_assertions) {
        "a debug build: build with --release for figures worth comparing"
    } else {
        "release build"
    };
    println!("closedloop bench: {} ({build})\n", plant.display());
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.figure.clone(),
                r.ours.clone(),
                r.baseline.clone(),
                r.ratio.map(|x| format!("{x:.2} ×")).unwrap_or_default(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["figure", "measured", "baseline", "ratio"], &cells)
    );
}

/// The engine's figures (`engine.rs`) as a table on stdout.
async fn print_engine(dir: &Path, calls: usize) -> Result<()> {
    let figures = engine::measure(dir, calls.max(engine::RELAYS)).await?;
    let rows = engine::rows(&figures);
    print!(
        "{}",
        table(&["the engine alone (no MCP)", "measured"], &rows)
    );
    Ok(())
}

/// The hall table on stdout.
fn print_hall(h: &hall::Hall) {
    let n = h.relays;
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let mib = h.resident as f64 / (1024.0 * 1024.0);
    let rows = vec![
        vec![
            format!("`check`, 1,000 relays (median of {})", hall::CHECK_RUNS),
            secs(h.check_1000),
        ],
        vec![
            format!("`check`, {n} relays (median of {})", hall::CHECK_RUNS),
            format!(
                "{} ({:.1} × the 1,000-relay time)",
                secs(h.check_big),
                h.check_big.as_secs_f64() / h.check_1000.as_secs_f64().max(1e-9)
            ),
        ],
        vec![
            format!("`serve` of {n} relays: `tools/list` answered after"),
            secs(h.tools_list_after_start),
        ],
        vec![
            "resident memory at rest".into(),
            format!(
                "{mib:.0} MiB ({:.1} KiB a relay)",
                h.resident as f64 / 1024.0 / n.max(1) as f64
            ),
        ],
        vec![
            "CPU at rest, polled every 100 ms".into(),
            format!("{:.0} % of one core", h.cpu_at_rest * 100.0),
        ],
    ];
    println!();
    print!("{}", table(&["at a hall's size", "measured"], &rows));
}
