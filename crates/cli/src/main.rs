//! The `closedloop` command line: a thin shell over the library crates.
//!
//! The command line itself is defined in `args`. One module per subcommand: `check` (the plant
//! loaded and its drivers built as `serve` would, then a summary or the tool surface), `init` (a
//! first plant from a DBC), `generate` (man pages and completions for the packages), `lint` (warnings about that surface), `diff` (two plants' surfaces
//! compared for clients), `serve` (MCP over stdio or Streamable HTTP), `demo` (the bundled
//! workshop through a real MCP client session), `instance` (an unset `STATE_DIRECTORY` taken as
//! the service instance's state directory by `check` and the journal commands), `journal_cmds` (`commands` and `trace`, reading
//! the journal's location alone, read-only), `audit` (`audit`, read-only too), `journal_verify`
//! (`journal verify`, read-only too), `report`
//! (per-tool figures from the journal, read-only as well) and `sim` (the simulated devices over
//! Modbus TCP, MQTT, CAN and OPC UA, and their run-time faults).
//!
//! Exit codes: 0 success; 1 the command ran and found a problem (an invalid plant file, an unknown
//! command id, a broken link in the journal's hash chain); 2 bad usage (clap's own code).

use anyhow::{Context, Result};
use args::{Cli, Cmd, JournalCmd};
use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::Layer;

mod alloc;
mod args;
mod audit;
mod banner;
mod bench;
mod check;
mod demo;
mod diff;
mod generate;
mod init;
mod instance;
mod journal_cmds;
mod journal_verify;
mod lint;
mod logfile;
mod report;
mod retention;
mod serve;
mod shown;
mod sim;

fn main() -> ExitCode {
    alloc::return_freed_memory();
    let cli = Cli::parse();
    let log_file = match &cli.command {
        Cmd::Serve { log_file, .. } => log_file.clone(),
        _ => None,
    };
    // `init` says in its own words what went wrong (a broker it cannot reach): the drivers'
    // reconnect warnings would only repeat it, unless CLOSEDLOOP_LOG asks for them.
    let quiet =
        matches!(cli.command, Cmd::Init { .. }) && std::env::var_os("CLOSEDLOOP_LOG").is_none();
    let logging = if quiet {
        Ok(())
    } else {
        init_logging(log_file.as_deref())
    };
    if let Err(e) = logging {
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
        Cmd::Check { plant, lint, tools } => Ok(check::run(&plant, tools, lint)),
        Cmd::Lint {
            plant,
            strict,
            examples,
        } => Ok(lint::run(&plant, strict, examples)),
        cmd @ Cmd::Init { .. } => Ok(run_init(&cmd)),
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
        cmd @ Cmd::Serve { .. } => run_serve(cmd),
        Cmd::Demo => runtime()?.block_on(demo::run()).map(|()| ExitCode::SUCCESS),
        Cmd::Sim(args) => runtime()?.block_on(sim::run(args)),
        Cmd::Bench(args) => {
            let rt = runtime()?;
            let result = rt.block_on(bench::run(args));
            // The echo server's stdin is read by a blocking thread: do not wait for it.
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
            result
        }
        Cmd::Generate { what, out } => {
            generate::run(what, &out, <Cli as clap::CommandFactory>::command())
        }
        cmd => run_journal(cmd),
    }
}

/// `init`, from a DBC, a broker's discovery messages or an OPC UA server.
fn run_init(cmd: &Cmd) -> ExitCode {
    let Cmd::Init {
        out,
        force,
        dry_run,
        ..
    } = cmd
    else {
        unreachable!("run_init is given init only");
    };
    let password = std::env::var("MQTT_PASSWORD").ok();
    let Some(source) = init_source(cmd, password.as_deref()) else {
        return ExitCode::from(2);
    };
    init::run(&init::Options {
        source,
        out: out.as_deref(),
        force: *force,
        dry_run: *dry_run,
    })
}

/// Where `init` starts from, as its flags say; `None` (said on stderr) when they are bad usage.
fn init_source<'a>(cmd: &'a Cmd, password: Option<&'a str>) -> Option<init::Source<'a>> {
    let Cmd::Init {
        dbc,
        mqtt,
        opcua,
        nodes,
        bitrate,
        interface,
        depth,
        security,
        server_cert,
        prefix,
        listen,
        username,
        ca_file,
        client_cert,
        client_key,
        ..
    } = cmd
    else {
        unreachable!("init_source is given init only");
    };
    let source = match (dbc, mqtt, opcua) {
        (Some(dbc), _, _) => init::Source::Dbc {
            dbc,
            nodes,
            bitrate: *bitrate,
            interface: interface.as_deref(),
        },
        (None, None, Some(endpoint)) => {
            if nodes.len() > 1 {
                eprintln!(
                    "closedloop init --opcua: give one --node to start from, not {}",
                    nodes.len()
                );
                return None;
            }
            init::Source::Opcua(init::opcua::Source {
                endpoint,
                node: nodes.first().map_or("i=85", String::as_str),
                depth: *depth,
                security,
                server_cert: server_cert.as_deref(),
                username: username.as_deref(),
            })
        }
        (None, Some(url), _) => init::Source::Mqtt(init::mqtt::Source {
            url,
            prefix,
            listen: *listen,
            username: username.as_deref(),
            password: username.as_ref().and(password),
            ca_file: ca_file.as_deref(),
            client_cert: client_cert.as_deref(),
            client_key: client_key.as_deref(),
        }),
        (None, None, None) => unreachable!("clap requires --dbc, --mqtt or --opcua"),
    };
    Some(source)
}

/// `serve`, over stdio or `--http`.
fn run_serve(cmd: Cmd) -> Result<ExitCode> {
    let Cmd::Serve {
        plant,
        http,
        allow_host,
        trusted_proxy,
        allow_origin,
        max_connections,
        handshake_timeout,
        idle_timeout,
        tls_cert,
        tls_key,
        metrics,
        instance,
        ..
    } = cmd
    else {
        unreachable!("run_serve is given serve only");
    };
    let rt = runtime()?;
    let result = match http {
        None => rt.block_on(serve::serve(&plant, metrics, instance)),
        Some(addr) => rt.block_on(serve::serve_http(
            &plant,
            serve::HttpArgs {
                addr,
                allow_hosts: allow_host,
                trusted_proxies: trusted_proxy,
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

/// The commands that read or tend the journal, each given only the plant's [`JournalView`].
///
/// [`JournalView`]: closedloop_plant::JournalView
fn run_journal(cmd: Cmd) -> Result<ExitCode> {
    let rt = runtime()?;
    match cmd {
        Cmd::Report { plant, since } => rt.block_on(report::run(&journal_view(&plant)?, &since)),
        Cmd::Commands {
            plant,
            device,
            status,
            limit,
        } => {
            let plant = journal_view(&plant)?;
            rt.block_on(journal_cmds::commands(&plant, device, status, limit))
        }
        Cmd::Journal(JournalCmd::Prune { plant, older_than }) => {
            // Deleting rows is never done on a guessed state directory.
            let env = instance::Env::of(&plant);
            let view = closedloop_plant::load_journal_view(&plant, &|k| env.get(k));
            if let Some(dir) = env.stood_in() {
                anyhow::bail!(
                    "journal prune deletes rows, so it never guesses where the journal is: \
                     STATE_DIRECTORY is not set; run it with the service's, e.g. \
                     sudo env STATE_DIRECTORY={dir} closedloop journal prune {}",
                    plant.display()
                );
            }
            let view = view.map_err(|e| anyhow::anyhow!("{e}"))?;
            rt.block_on(retention::prune(&view, older_than))
        }
        Cmd::Journal(JournalCmd::Verify { plant, heads }) => {
            rt.block_on(journal_verify::verify(&journal_view(&plant)?, &heads))
        }
        Cmd::Audit {
            plant,
            since,
            caller,
        } => rt.block_on(audit::audit(&journal_view(&plant)?, &since, caller)),
        Cmd::Trace { plant, command_id } => {
            rt.block_on(journal_cmds::trace(&journal_view(&plant)?, &command_id))
        }
        _ => unreachable!("run_journal is given the journal commands only"),
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
/// its rates and tools), never its drivers: `${env:…}` is resolved in those keys alone. An unset
/// `STATE_DIRECTORY` is the state directory of the file's service instance, noted on stderr.
fn journal_view(path: &std::path::Path) -> Result<closedloop_plant::JournalView> {
    let env = instance::Env::of(path);
    let view = closedloop_plant::load_journal_view(path, &|k| env.get(k));
    if let Some(note) = env.note() {
        eprintln!("{note}");
    }
    view.map_err(|e| anyhow::anyhow!("{e}"))
}

/// Loads a plant file, turning its errors into one message per line.
fn load(path: &std::path::Path) -> Result<closedloop_plant::Plant> {
    closedloop_plant::load(path).map_err(|e| anyhow::anyhow!("{e}"))
}
