//! `closedloop sim`: the plant's simulated devices as their own process, over Modbus TCP (units on
//! `[device.sim] listen`), MQTT (`mqtt-relay` clients of `[device.sim] broker`), CAN (nodes on
//! a simulated slcan adapter per `[device.sim] can.bus`, reached through a pty) and OPC UA (one
//! simulated server per distinct `[device.sim] opcua` address, its devices as nodes
//! `ns=2;s={device}.{Name}`), and the `fault` / `clear` requests to its control endpoint.
//!
//! stdout carries exactly one line per served Modbus device (`closedloop sim: slide unit 1 on
//! 127.0.0.1:PORT`), one per running relay (`closedloop sim: lamp mqtt-relay lab/lamp on
//! mqtt://127.0.0.1:1883`), one per CAN node (`closedloop sim: lamp can-node workshop on
//! slcan:/dev/pts/N`: the interface a `can` driver names), one per OPC UA device (`closedloop
//! sim: lamp opcua on opc.tcp://127.0.0.1:PORT/`: the endpoint an `opcua` driver names) and then
//! one for the control endpoint (`closedloop sim: control on 127.0.0.1:PORT`), printed once every
//! port accepts connections, every relay is connected to its broker (or held off by a fault it
//! was given), every bus's pty is open and every OPC UA server accepts sessions, so scripts and
//! tests read the real ports and ptys instead of sleeping. Devices that are not served are named
//! on stderr.
//!
//! `--write-log FILE` appends every write a Modbus unit receives to FILE, one JSON line each with
//! the client's address (closedloop_sim_server::write_log has the format): who wrote, which the
//! registers alone cannot tell.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use closedloop_sim_server::{ControlCommand, ControlServer, WriteLog, bind_plant, control};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `closedloop sim PLANT [--control ADDR]`, or one of its requests.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimArgs {
    #[command(subcommand)]
    request: Option<Request>,
    /// The plant file (TOML) whose [device.sim] tables to serve.
    #[arg(required = true)]
    plant: Option<PathBuf>,
    /// Where the fault control endpoint listens: loopback only; port 0 picks a free one (printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    control: SocketAddr,
    /// Append every write a Modbus unit receives to FILE, one JSON line each with the client's
    /// address: who wrote what, and when.
    #[arg(long, value_name = "FILE")]
    write_log: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Request {
    /// Inject (or replace) a fault in a running `closedloop sim`, e.g.
    /// `closedloop sim fault --control 127.0.0.1:7502 slide stall at_mm=70`.
    Fault {
        /// The control endpoint `closedloop sim PLANT` printed.
        #[arg(long, value_name = "ADDR")]
        control: SocketAddr,
        /// The device id.
        device: String,
        /// stall, brownout, swapped_contacts, power_off, zombie, nak, reboot, latency_ms,
        /// drop_rate or crc_error.
        kind: String,
        /// The fault's options as in the plant file: after_ms=, at_mm=, down_ms=, ms=, p=.
        #[arg(value_name = "KEY=VALUE", allow_hyphen_values = true)]
        options: Vec<String>,
    },
    /// Clear one fault kind, or every fault, of a device in a running `closedloop sim`.
    Clear {
        /// The control endpoint `closedloop sim PLANT` printed.
        #[arg(long, value_name = "ADDR")]
        control: SocketAddr,
        /// The device id.
        device: String,
        /// The fault kind; without it, every fault of the device.
        kind: Option<String>,
    },
}

/// Runs `closedloop sim` in whichever form was asked for.
pub async fn run(args: SimArgs) -> Result<ExitCode> {
    match (args.request, args.plant) {
        (Some(request), _) => send(request).await,
        (None, Some(plant)) => serve(&plant, args.control, args.write_log.as_deref()).await,
        (None, None) => bail!("give a plant file: closedloop sim PLANT"),
    }
}

async fn send(request: Request) -> Result<ExitCode> {
    let (addr, words) = match request {
        Request::Fault {
            control,
            device,
            kind,
            options,
        } => {
            let mut words = vec!["fault".to_string(), device, kind];
            words.extend(options);
            (control, words)
        }
        Request::Clear {
            control,
            device,
            kind,
        } => {
            let mut words = vec!["clear".to_string(), device];
            words.extend(kind);
            (control, words)
        }
    };
    let command = ControlCommand::from_words(&words).map_err(anyhow::Error::msg)?;
    control::send(addr, &command).await?;
    println!("ok");
    Ok(ExitCode::SUCCESS)
}

async fn serve(
    path: &Path,
    control_addr: SocketAddr,
    write_log: Option<&Path>,
) -> Result<ExitCode> {
    let plant = crate::load(path)?;
    let write_log = write_log
        .map(|file| {
            WriteLog::open(file).with_context(|| {
                format!(
                    "--write-log {}: cannot open it for appending; give a writable file",
                    file.display()
                )
            })
        })
        .transpose()?;
    // Before any port is announced, so a signal sent right after the announcement is not lost.
    let signal = signalled()?;
    let mut bound = bind_plant(&plant)
        .await
        .with_context(|| format!("{}", path.display()))?;
    if let Some(log) = &write_log {
        bound.log_writes(log);
    }
    for s in &bound.skipped {
        eprintln!("closedloop sim: {} skipped: {}", s.device, s.reason);
    }
    if bound.served.is_empty()
        && bound.relays.is_empty()
        && bound.can_nodes.is_empty()
        && bound.opcua.is_empty()
    {
        bail!(
            "{}: no device has a [device.sim] table with `listen` (Modbus), `broker` \
             (mqtt-relay), `can` (a CAN node) or `opcua` (OPC UA); add e.g. [device.sim] \
             model = \"relay\", listen = \"127.0.0.1:1502\", unit = 1",
            path.display()
        );
    }
    let control = ControlServer::bind(control_addr, bound.devices.clone()).await?;
    let control_addr = control.local_addr().context("the control endpoint")?;
    for s in &bound.served {
        println!("closedloop sim: {} unit {} on {}", s.device, s.unit, s.addr);
    }
    for r in &bound.relays {
        println!(
            "closedloop sim: {} mqtt-relay {} on {}",
            r.device, r.prefix, r.broker
        );
    }
    for n in &bound.can_nodes {
        println!(
            "closedloop sim: {} can-node {} on {}",
            n.device, n.bus, n.interface
        );
    }
    for o in &bound.opcua {
        println!("closedloop sim: {} opcua on {}", o.device, o.endpoint);
    }
    println!("closedloop sim: control on {control_addr}");
    tokio::select! {
        () = bound.run() => {}
        () = control.run() => {}
        () = signal => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Resolves on SIGINT or SIGTERM.
fn signalled() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
        }
    })
}
