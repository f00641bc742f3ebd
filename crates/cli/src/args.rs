//! The command line's definition: every subcommand and flag, as clap parses them and as the
//! man pages and completions (`closedloop generate`) describe them.

use crate::{audit, bench, diff, generate, sim};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

/// `closedloop --version`: the version and the commit it was built from (`build.rs`).
pub(crate) const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CLOSEDLOOP_COMMIT"),
    ")"
);

/// closedloop: act on physical hardware and never report an action as done before the hardware
/// confirmed it.
#[derive(Parser, Debug)]
#[command(name = "closedloop", version = VERSION, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
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
    /// Write a first plant file from what the devices already describe: a DBC (one device per
    /// node that sends messages, its signals, and with `--node` the messages that node receives
    /// as actions), an MQTT broker's Home Assistant discovery messages (one device per
    /// discovered device, its entities' states as signals and commands as actions) or an OPC UA
    /// server's address space (one device per object, its variables as signals, writable ones
    /// and methods as actions); checked as `check` would before it is printed or written.
    #[command(group(clap::ArgGroup::new("source").required(true).args(["dbc", "mqtt", "opcua"])))]
    Init {
        /// The DBC file describing the bus.
        #[arg(long, value_name = "FILE")]
        dbc: Option<PathBuf>,
        /// A broker to read discovery messages from (`mqtt://host:1883`, `mqtts://host:8883`).
        #[arg(long, value_name = "URL")]
        mqtt: Option<String>,
        /// An OPC UA server's endpoint to survey (`opc.tcp://host:4840/`).
        #[arg(long, value_name = "ENDPOINT")]
        opcua: Option<String>,
        /// --dbc: a node whose received messages become actions on its device (repeatable);
        /// --opcua: the NodeId to start from (default i=85, the Objects folder).
        #[arg(long = "node", value_name = "NAME", conflicts_with = "mqtt")]
        nodes: Vec<String>,
        /// The bus speed in bit/s written into every driver table (--dbc; default 500000).
        #[arg(long, value_name = "BPS", conflicts_with_all = ["mqtt", "opcua"])]
        bitrate: Option<u32>,
        /// The CAN interface written into every driver table, `socketcan:can0` or
        /// `slcan:/dev/ttyACM0` (--dbc; default `${env:CAN_INTERFACE}`, set when serving).
        #[arg(long, value_name = "IFACE", conflicts_with_all = ["mqtt", "opcua"])]
        interface: Option<String>,
        /// How many levels below the start node to survey (--opcua).
        #[arg(long, value_name = "N", default_value_t = 4, conflicts_with_all = ["dbc", "mqtt"])]
        depth: u32,
        /// The session's security: none, sign, sign_and_encrypt (--opcua).
        #[arg(long, value_name = "MODE", default_value = "none", conflicts_with_all = ["dbc", "mqtt"])]
        security: String,
        /// The server's certificate to pin, with sign or sign_and_encrypt (--opcua).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["dbc", "mqtt"])]
        server_cert: Option<PathBuf>,
        /// The discovery prefix (--mqtt).
        #[arg(long, value_name = "PREFIX", default_value = "homeassistant", conflicts_with_all = ["dbc", "opcua"])]
        prefix: String,
        /// How long to listen for discovery messages once connected: 5s, 500ms, 1m (--mqtt).
        #[arg(long, value_name = "TIME", default_value = "5s", value_parser = crate::init::listen_time, conflicts_with_all = ["dbc", "opcua"])]
        listen: std::time::Duration,
        /// The user to log in as; the password is read from MQTT_PASSWORD (--mqtt) or
        /// OPCUA_PASSWORD (--opcua).
        #[arg(long, value_name = "USER", conflicts_with = "dbc")]
        username: Option<String>,
        /// The CA certificate(s) to trust for an mqtts:// broker (--mqtt).
        #[arg(long, value_name = "FILE", conflicts_with_all = ["dbc", "opcua"])]
        ca_file: Option<PathBuf>,
        /// A client certificate for a broker that wants mutual TLS, with --client-key (--mqtt).
        #[arg(long, value_name = "FILE", requires = "client_key", conflicts_with_all = ["dbc", "opcua"])]
        client_cert: Option<PathBuf>,
        /// The client certificate's private key (--mqtt).
        #[arg(long, value_name = "FILE", requires = "client_cert", conflicts_with_all = ["dbc", "opcua"])]
        client_key: Option<PathBuf>,
        /// Write the plant here instead of printing it.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Overwrite --out if it exists.
        #[arg(long, requires = "out")]
        force: bool,
        /// Print the plant to stdout, writing nothing.
        #[arg(long)]
        dry_run: bool,
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
        /// A proxy (ADDR or ADDR/LEN) whose X-Forwarded-For names the client: behind it, the
        /// guessing hold and the pre-authentication pool count each client, not the proxy.
        /// Repeatable.
        #[arg(long, value_name = "ADDR[/LEN]", requires = "http", value_parser = closedloop_mcp::http::Net::parse)]
        trusted_proxy: Vec<closedloop_mcp::http::Net>,
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
pub(crate) enum JournalCmd {
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
        /// A head a verify printed before (`SEQ:HASH`, from its `head seq N hash H` line),
        /// kept outside the journal: the chain must still reach it with that hash (repeatable).
        #[arg(long = "head", value_name = "SEQ:HASH", value_parser = crate::journal_verify::kept_head)]
        heads: Vec<(i64, String)>,
    },
}
