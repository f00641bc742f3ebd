//! The `closedloop` command line: a thin shell over the library crates.
//!
//! One module per subcommand: `check` (the plant loaded and its drivers built as `serve` would,
//! then the tool surface), `lint` (warnings about that surface), `diff` (two plants' surfaces
//! compared for clients), `serve` (MCP over stdio or Streamable HTTP), `demo` (the bundled
//! workshop through a real MCP client session), `journal_cmds` (`commands` and `trace`, reading
//! the journal read-only), `audit` (`audit` and `journal verify`, read-only too), `report`
//! (per-tool figures from the journal, read-only as well) and `sim` (the simulated devices over
//! Modbus TCP, MQTT, CAN and OPC UA, and their run-time faults).
//!
//! Exit codes: 0 success; 1 the command ran and found a problem (an invalid plant file, an unknown
//! command id, a broken link in the journal's hash chain); 2 bad usage (clap's own code).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use tracing_subscriber::Layer;

mod alloc;
mod audit;
mod banner;
mod bench;
mod check;
mod demo;
mod diff;
mod generate;
mod journal_cmds;
mod lint;
mod logfile;
mod report;
mod retention;
mod serve;
mod sim;

/// `closedloop --version`: the version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CLOSEDLOOP_COMMIT"),
    ")"
);

/// closedloop: act on physical hardware and never report an action as done before the hardware
/// confirmed it.
#[derive(Parser, Debug)]
#[command(name = "closedloop", version = VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Validate a plant file exactly as `serve` would and print a summary (devices, tools,
    /// warnings) and the verdict; `--tools` prints every tool's description and schema.
    Check {
        /// The plant file (TOML).
        plant: PathBuf,
        /// Print every tool an agent will see, with its description and input schema.
        #[arg(long)]
        tools: bool,
        /// Also run `closedloop lint` on it (warnings only: the exit code stays the check's).
        #[arg(long)]
        lint: bool,
    },
    /// Warn about tool descriptions and parameters a model is likely to misread, naming file,
    /// device and key; `--examples` also checks that each action's example requests pick its
    /// tool first.
    Lint {
        /// The plant file (TOML).
        plant: PathBuf,
        /// Exit 1 on any warning (for a plant repository's CI).
        #[arg(long)]
        strict: bool,
        /// Rank every tool for every action's `examples` request and report each example whose
        /// own tool is not ranked first.
        #[arg(long)]
        examples: bool,
    },
    /// Compare two versions of a plant file: what would break a client written against OLD,
    /// and what changes next to the machine (completion, preconditions, timing, what is written
    /// and read, the envelope, alarms, tokens), each line looser, stricter or changed.
    Diff {
        /// The plant file as clients know it.
        old: PathBuf,
        /// The plant file about to replace it.
        new: PathBuf,
        /// What exits 1: a breaking surface change only (`surface`), that or any behaviour
        /// change (`behaviour`), or that or a change that lets more through (`looser`).
        #[arg(long, value_enum, default_value = "behaviour")]
        fail_on: diff::FailOn,
        /// Print one JSON document instead of the tables.
        #[arg(long)]
        json: bool,
        /// Judge the commands and readings of this journal (a plant file naming it, or a
        /// `sqlite://` or `postgres://` URL) again under NEW, and name every verdict that moves.
        #[arg(long, value_name = "PLANT_OR_URL")]
        journal: Option<String>,
    },
    /// Per tool, from the journal: calls, outcomes, rejections by code and the median time
    /// until the hardware confirmed (or refuted) the action.
    Report {
        /// The plant file whose journal to read.
        plant: PathBuf,
        /// How far back: a duration (30m, 24h, 7d) or a UTC time (2026-11-29T16:00:00Z).
        #[arg(long, value_name = "DURATION_OR_TIME", default_value = "7d")]
        since: String,
    },
    /// Serve the plant's tools over MCP on stdin/stdout (logs go to stderr), or over HTTP.
    ///
    /// An MCP client starts this command and speaks JSON-RPC on its stdin and stdout; to watch
    /// the tools work from a terminal, run `closedloop demo`.
    ///
    /// Logs: stderr shows warnings and errors; CLOSEDLOOP_LOG sets the level (error, warn, info,
    /// debug, trace, or a tracing filter such as closedloop_engine=debug) of stderr and of the
    /// log file alike.
    Serve {
        /// The plant file (TOML).
        plant: PathBuf,
        /// Also append logs to this file, at info level unless CLOSEDLOOP_LOG says otherwise
        /// (every command accepted and every change it goes through).
        #[arg(long, value_name = "FILE")]
        log_file: Option<PathBuf>,
        /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio, e.g. 127.0.0.1:8080
        /// (port 0 picks a free one). The URLs clients can use are printed on stderr; for
        /// 0.0.0.0 (every interface) that is 127.0.0.1 and this host's own addresses, which are
        /// also accepted as Host. An address other than loopback needs a [[server.token]] in the
        /// plant.
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
        /// Also accept this Host header (NAME or NAME:PORT), e.g. the gateway's DNS name.
        /// Repeatable.
        #[arg(long, value_name = "HOST", requires = "http")]
        allow_host: Vec<String>,
        /// Also accept requests from web pages of this origin (SCHEME://HOST[:PORT|:*]).
        /// Repeatable.
        #[arg(long, value_name = "ORIGIN", requires = "http")]
        allow_origin: Vec<String>,
        /// HTTP connections open at once. When all are taken, a new one evicts the oldest
        /// that never authenticated; one that can evict nothing is closed as it is accepted.
        #[arg(long, value_name = "N", requires = "http", default_value_t = 256)]
        max_connections: usize,
        /// Close an HTTP connection whose first request head has not arrived this many seconds
        /// after it opened (a silent connection gives its slot back).
        #[arg(long, value_name = "SECONDS", requires = "http", default_value_t = 5.0)]
        handshake_timeout: f64,
        /// Close an HTTP connection on which no byte moved either way for this many seconds.
        #[arg(
            long,
            value_name = "SECONDS",
            requires = "http",
            default_value_t = 60.0
        )]
        idle_timeout: f64,
        /// Serve HTTPS with this PEM certificate chain (leaf first) instead of plain HTTP;
        /// needs --tls-key. For a gateway reached without a TLS-terminating proxy.
        #[arg(long, value_name = "FILE", requires_all = ["http", "tls_key"])]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
        #[arg(long, value_name = "FILE", requires_all = ["http", "tls_cert"])]
        tls_key: Option<PathBuf>,
        /// Serve Prometheus metrics at http://ADDR/metrics beside stdio (with --http they are
        /// at /metrics of that address already). Beyond loopback it needs a [[server.token]].
        #[arg(long, value_name = "ADDR", conflicts_with = "http")]
        metrics: Option<SocketAddr>,
        /// This gateway's name among several sharing one PostgreSQL journal (default: the host
        /// name): the device leases it holds are held in this name, and a device's `gateways`
        /// list names instances so.
        #[arg(long, value_name = "NAME")]
        instance: Option<String>,
    },
    /// Run the bundled simulated workshop through a real MCP client session and print what happens.
    Demo,
    /// List the commands in a plant's journal, newest first.
    Commands {
        /// The plant file whose journal to read.
        plant: PathBuf,
        /// Only this device.
        #[arg(long)]
        device: Option<String>,
        /// Only this status (accepted, running, completed, failed, timeout, sent, cancelled, rejected).
        #[arg(long)]
        status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Run the plant's [device.sim] devices as Modbus TCP units, MQTT relays, CAN nodes (slcan on
    /// a pty) and OPC UA servers until SIGINT/SIGTERM; or, with `fault`/`clear`, change a running
    /// simulator's faults.
    Sim(sim::SimArgs),
    /// Measure the speed figures of a plant (a bundled one of simulated relays by default) and
    /// print them beside a bare rmcp server's, with `--hall N` also loading, memory and CPU at
    /// rest with N relays. Build with `--release` for figures worth comparing.
    Bench(bench::BenchArgs),
    /// Work on a plant's journal: `prune` deletes finished commands past their retention,
    /// `verify` checks its hash chain.
    #[command(subcommand)]
    Journal(JournalCmd),
    /// Print the audit trail: one line per command accepted since `--since`, oldest first, with
    /// its caller, device, action, status, error code and who confirmed it.
    Audit {
        /// The plant file whose journal to read.
        plant: PathBuf,
        /// How far back: a duration (30m, 24h, 7d) or a UTC time (2026-11-29T16:00:00Z).
        #[arg(long, value_name = "DURATION_OR_TIME", default_value = audit::DEFAULT_SINCE)]
        since: String,
        /// Only this caller (a token's name, or stdio).
        #[arg(long, value_name = "NAME")]
        caller: Option<String>,
    },
    /// Write the man pages or the shell completions into a folder (for packagers).
    #[command(hide = true)]
    Generate {
        /// What to write.
        #[arg(value_enum)]
        what: generate::What,
        /// The folder to write into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Print one command's timeline with the milliseconds between steps.
    Trace {
        /// The plant file whose journal to read.
        plant: PathBuf,
        /// The command's id.
        command_id: String,
    },
}

/// `closedloop journal …`.
#[derive(clap::Subcommand, Debug)]
enum JournalCmd {
    /// Delete the finished commands (with their timelines) older than `--older-than`, or the
    /// plant's `[server] retain`; unfinished ones always stay, and so does what a `max_rate`
    /// still counts. Safe while `serve` runs.
    Prune {
        /// The plant file whose journal to prune.
        plant: PathBuf,
        /// Keep this much: days or hours, like 30d or 12h (at least 1h).
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
    },
    /// Re-hash the journal's events in order and report the first broken link (an event
    /// edited, deleted, inserted or reordered): exit 0 when intact, 1 when broken. Read-only,
    /// safe while `serve` runs.
    Verify {
        /// The plant file whose journal to check.
        plant: PathBuf,
    },
}

fn main() -> ExitCode {
    alloc::return_freed_memory();
    let cli = Cli::parse();
    let log_file = match &cli.command {
        Cmd::Serve { log_file, .. } => log_file.clone(),
        _ => None,
    };
    if let Err(e) = init_logging(log_file.as_deref()) {
        eprintln!("error: {e:#}");
        return ExitCode::from(1);
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Cmd::Check { plant, lint, tools } => {
            let code = check::run(&plant, tools);
            if lint && code == ExitCode::SUCCESS {
                lint::run(&plant, false, false);
            }
            Ok(code)
        }
        Cmd::Lint {
            plant,
            strict,
            examples,
        } => Ok(lint::run(&plant, strict, examples)),
        Cmd::Diff {
            old,
            new,
            fail_on,
            json,
            journal,
        } => {
            let opts = diff::Options {
                fail_on,
                json,
                journal,
            };
            Ok(diff::run(&old, &new, &opts))
        }
        Cmd::Report { plant, since } => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(report::run(&plant, &since))
        }
        Cmd::Serve {
            plant,
            http,
            allow_host,
            allow_origin,
            max_connections,
            handshake_timeout,
            idle_timeout,
            tls_cert,
            tls_key,
            metrics,
            instance,
            ..
        } => {
            let rt = runtime()?;
            let result = match http {
                None => rt.block_on(serve::serve(&plant, metrics, instance)),
                Some(addr) => rt.block_on(serve::serve_http(
                    &plant,
                    serve::HttpArgs {
                        addr,
                        allow_hosts: allow_host,
                        allow_origins: allow_origin,
                        max_connections,
                        idle_timeout_s: idle_timeout,
                        handshake_timeout_s: handshake_timeout,
                        tls: tls_cert.zip(tls_key),
                        instance,
                    },
                )),
            };
            // stdin is read by a blocking thread that cannot be interrupted: do not wait for it.
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
            result.map(|()| ExitCode::SUCCESS)
        }
        Cmd::Demo => runtime()?.block_on(demo::run()).map(|()| ExitCode::SUCCESS),
        Cmd::Commands {
            plant,
            device,
            status,
            limit,
        } => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(journal_cmds::commands(&plant, device, status, limit))
        }
        Cmd::Sim(args) => runtime()?.block_on(sim::run(args)),
        Cmd::Bench(args) => {
            let rt = runtime()?;
            let result = rt.block_on(bench::run(args));
            // The echo server's stdin is read by a blocking thread: do not wait for it.
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
            result
        }
        Cmd::Journal(JournalCmd::Prune { plant, older_than }) => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(retention::prune(&plant, older_than))
        }
        Cmd::Journal(JournalCmd::Verify { plant }) => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(audit::verify(&plant))
        }
        Cmd::Audit {
            plant,
            since,
            caller,
        } => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(audit::audit(&plant, &since, caller))
        }
        Cmd::Generate { what, out } => {
            generate::run(what, &out, <Cli as clap::CommandFactory>::command())
        }
        Cmd::Trace { plant, command_id } => {
            let plant = journal_view(&plant)?;
            runtime()?.block_on(journal_cmds::trace(&plant, &command_id))
        }
    }
}

/// Logs go to stderr — stdout carries MCP — and, for `serve --log-file`, to a file as well.
/// `CLOSEDLOOP_LOG` sets the filter of both; without it stderr shows `warn` and the file `info`
/// (a log file asked for and left empty helps nobody).
fn init_logging(file: Option<&std::path::Path>) -> Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = |default: &str| {
        tracing_subscriber::EnvFilter::try_from_env("CLOSEDLOOP_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .with_filter(filter("warn"));
    let file_layer = match file {
        Some(path) => {
            let log = logfile::LogFile::install(path)
                .with_context(|| format!("opening the log file {}", path.display()))?;
            Some(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(log)
                    .with_filter(filter("info")),
            )
        }
        None => None,
    };
    tracing_subscriber::registry()
        .with(stderr)
        .with(file_layer)
        .init();
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Reads what the journal commands need of a plant file (where the journal is, its retention,
/// its rates and tools), never its drivers: `${env:…}` is resolved in those keys alone.
fn journal_view(path: &std::path::Path) -> Result<closedloop_plant::JournalView> {
    closedloop_plant::load_journal_view(path, &|k| std::env::var(k).ok())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Loads a plant file, turning its errors into one message per line.
fn load(path: &std::path::Path) -> Result<closedloop_plant::Plant> {
    closedloop_plant::load(path).map_err(|e| anyhow::anyhow!("{e}"))
}
