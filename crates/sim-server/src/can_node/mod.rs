//! Simulated CAN nodes on a simulated slcan adapter, reached through a pty: what `closedloop
//! sim` runs for `[device.sim] can = { bus, dbc, status, command, period_ms }`, so that the
//! `can` driver (`interface = "slcan:/dev/pts/N"`) talks to them exactly as to a USB-CAN adapter
//! on a real bus.
//!
//! # The bus
//! One [`SimBus`] per `bus` name: socat makes a pty ([`socat`] says how); the host opens it as
//! an slcan adapter's serial port, and the simulator answers as the adapter (Lawicel; the table
//! in [`adapter`]): it takes `S<n>`, `O`, `C`, frames the host transmits while the channel is
//! open (each is put on the bus: every node sees it), and reports every frame the nodes send —
//! only while the channel is open. Several nodes share one bus, as on a real one.
//!
//! # A node
//! A [`CanNode`] runs a [`SimDevice`](closedloop_sim::SimDevice) (relay, stepper, heater or
//! sensor). Every `period_ms` it reads the device's registers and sends its `status` message;
//! it turns each `command` message into register writes. The DBC signals are matched by name
//! ([`signals`] has the table); a status signal the model does not have is sent as raw 0, a
//! command signal it does not take is ignored, and a signal the model needs that the message
//! lacks is refused at start, naming the file, the message and the signal.
//!
//! # Faults
//! | fault | on the bus |
//! |---|---|
//! | `power_off` | nothing sent, commands ignored; cleared: back with outputs off |
//! | `zombie` | as `power_off`, but the device keeps its outputs (frozen firmware) |
//! | `reboot {down_ms}` | silent for `down_ms`, back with outputs off; commands waiting are forgotten |
//! | `latency_ms {ms}` | each command frame takes effect `ms` after it arrived (status frames keep their period) |
//! | `drop_rate {p}` | each command frame is lost with probability `p` (a seeded draw) |
//! | `stall`, `brownout`, `swapped_contacts` | as in-process: the status shows what the registers would |
//! | `nak`, `crc_error` | refused: a node has no negative answer, and the CRC is checked by the controller and invisible over slcan |
//!
//! # Bounds
//! Frames the nodes send wait for the pty in a queue of [`BUS_QUEUE`]; when the host does not
//! read (or has gone without closing the channel), the queue fills and further frames are
//! dropped, as a CAN controller's full transmit buffer drops them. Each node keeps up to
//! [`BUS_FANOUT`] bus frames it has not looked at yet; a node that falls further behind misses
//! the oldest.

mod adapter;
mod bus;
mod faults;
mod node;
mod signals;
mod socat;

use closedloop_can::{Dbc, DbcError, Message};
use closedloop_plant::SimCan;
use closedloop_sim::{SimConfig, SimConfigError};
use thiserror::Error;
use tokio::task::JoinSet;
use tokio::time::Duration;

use bus::spawn_bus;
use node::Plan;
pub use node::{CanNode, MAX_DELAYED};
use signals::Kind;

/// Frames from the nodes waiting to be written to the pty, per bus; one more is dropped.
pub const BUS_QUEUE: usize = 256;
/// Bus frames one node may leave unread; a node further behind misses the oldest.
pub const BUS_FANOUT: usize = 256;
/// The most bytes a classic CAN frame carries, all slcan can send.
const CLASSIC_MAX: usize = 8;

/// One CAN node to run: a device's `[device.sim]` table and its `can = { ... }` key.
#[derive(Debug, Clone, PartialEq)]
pub struct CanNodeSpec {
    /// The device id (what the control endpoint calls it).
    pub device: String,
    /// The bus, the DBC file (absolute) and the two messages.
    pub can: SimCan,
    /// The model, its options and its faults.
    pub config: SimConfig,
}

/// Why CAN nodes cannot be started. Every variant names the device (or the bus) and says how to
/// fix it.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CanSimError {
    /// The table's model, options or faults are invalid (or refused on CAN).
    #[error("device {device:?}: [device.sim]: {source}")]
    Sim {
        /// Device id.
        device: String,
        /// What is wrong, with the key.
        source: SimConfigError,
    },
    /// A model with no register map for a node to report.
    #[error(
        "device {device:?}: sim.can: the sim model `{model}` cannot be a CAN node: use relay, \
         stepper, heater or sensor"
    )]
    Model {
        /// Device id.
        device: String,
        /// The model.
        model: String,
    },
    /// `period_ms = 0`.
    #[error("device {device:?}: sim.can.period_ms must be at least 1; the default is 50")]
    Period {
        /// Device id.
        device: String,
    },
    /// The DBC file cannot be read, or has no usable message of that name.
    #[error("device {device:?}: sim.can.{key}: {source}")]
    Dbc {
        /// Device id.
        device: String,
        /// `dbc`, `status` or `command`.
        key: &'static str,
        /// What is wrong (it names the file and the message). Boxed: it is large, and rare.
        source: Box<DbcError>,
    },
    /// The message lacks a signal the model needs.
    #[error(
        "device {device:?}: sim.can.{key}: {file}: message {message} has no signal {signal}, \
         which a simulated {model} {}: add it to the DBC file, or name another message",
        if *.key == "status" { "reports" } else { "takes" }
    )]
    MissingSignal {
        /// Device id.
        device: String,
        /// `status` or `command`.
        key: &'static str,
        /// The DBC file.
        file: String,
        /// The message.
        message: String,
        /// The missing signal.
        signal: &'static str,
        /// The model.
        model: &'static str,
    },
    /// The message cannot be sent or taken by a simulated node over slcan.
    #[error("device {device:?}: sim.can.{key}: {file}: message {message}: {reason}")]
    Message {
        /// Device id.
        device: String,
        /// `status` or `command`.
        key: &'static str,
        /// The DBC file.
        file: String,
        /// The message.
        message: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// The bus's pty could not be made (socat missing or failing).
    #[error("CAN bus {bus:?} (for {devices}): {reason}")]
    Socat {
        /// The bus name.
        bus: String,
        /// The devices on it.
        devices: String,
        /// Why.
        reason: String,
    },
}

/// A running simulated bus: its pty, the adapter behind it, and its nodes. Dropping it stops
/// them all and kills socat.
#[derive(Debug)]
pub struct SimBus {
    name: String,
    pty: String,
    nodes: Vec<CanNode>,
    /// The adapter and the nodes; aborted on drop.
    _tasks: JoinSet<()>,
    /// socat, killed on drop.
    _socat: tokio::process::Child,
}

impl SimBus {
    /// The bus name (`[device.sim] can.bus`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's end of the pty (`/dev/pts/N`).
    pub fn pty(&self) -> &str {
        &self.pty
    }

    /// The interface a `can` driver names to reach this bus: `slcan:` and the bus's stable link
    /// ([`link_path`]) to its pty.
    pub fn interface(&self) -> String {
        format!("slcan:{}", link_path(&self.name).display())
    }

    /// The nodes on it, in the order given.
    pub fn nodes(&self) -> &[CanNode] {
        &self.nodes
    }

    /// The node of `device`, if it is on this bus.
    pub fn node(&self, device: &str) -> Option<&CanNode> {
        self.nodes.iter().find(|n| n.device() == device)
    }
}

/// Checks every node (model, faults, DBC file, messages, signals), then starts one bus per
/// distinct `can.bus`, in order of first mention, each with its nodes in the order given.
/// Nothing is started unless every node checks out. Must be called inside a tokio runtime.
pub async fn start_buses(specs: &[CanNodeSpec]) -> Result<Vec<SimBus>, CanSimError> {
    let mut groups: Vec<(String, Vec<(CanNode, Plan)>)> = Vec::new();
    for spec in specs {
        let prepared = prepare(spec)?;
        match groups.iter_mut().find(|(name, _)| *name == spec.can.bus) {
            Some((_, nodes)) => nodes.push(prepared),
            None => groups.push((spec.can.bus.clone(), vec![prepared])),
        }
    }
    let mut buses = Vec::with_capacity(groups.len());
    for (name, nodes) in groups {
        buses.push(spawn_bus(name, nodes).await?);
    }
    Ok(buses)
}

/// Builds a node and resolves its messages, or says exactly what is wrong.
fn prepare(spec: &CanNodeSpec) -> Result<(CanNode, Plan), CanSimError> {
    let device = || spec.device.clone();
    let sim = |source| CanSimError::Sim {
        device: device(),
        source,
    };
    let valid = spec.config.validate().map_err(sim)?;
    let kind = Kind::of(&valid.model).ok_or_else(|| CanSimError::Model {
        device: device(),
        model: valid.model.name().to_string(),
    })?;
    if spec.can.period_ms == 0 {
        return Err(CanSimError::Period { device: device() });
    }
    let node = CanNode::new(&spec.device, &spec.can.bus, &spec.config).map_err(sim)?;
    let dbc = Dbc::load(&spec.can.dbc).map_err(|source| CanSimError::Dbc {
        device: device(),
        key: "dbc",
        source: Box::new(source),
    })?;
    let message = |key: &'static str, name: &str| {
        dbc.message(name)
            .cloned()
            .map_err(|source| CanSimError::Dbc {
                device: device(),
                key,
                source: Box::new(source),
            })
    };
    let status = message("status", &spec.can.status)?;
    let command = message("command", &spec.can.command)?;
    let model = valid.model.name();
    check_message(
        &spec.device,
        &dbc,
        "status",
        &status,
        kind.status_signals(),
        model,
    )?;
    check_message(
        &spec.device,
        &dbc,
        "command",
        &command,
        kind.command_signals(),
        model,
    )?;
    let plan = Plan {
        kind,
        status,
        command,
        period: Duration::from_millis(spec.can.period_ms),
    };
    Ok((node, plan))
}

/// Refuses a message a simulated node cannot use as its `key` (`status` or `command`) over
/// slcan: larger than a classic frame, a multiplexed status, or without a signal in `needed`
/// (the signals a `model` reports or takes).
fn check_message(
    device: &str,
    dbc: &Dbc,
    key: &'static str,
    m: &Message,
    needed: &[&'static str],
    model: &'static str,
) -> Result<(), CanSimError> {
    let refuse = |reason: String| CanSimError::Message {
        device: device.to_string(),
        key,
        file: dbc.file().to_string(),
        message: m.name().to_string(),
        reason,
    };
    if m.size() > CLASSIC_MAX || m.fd() {
        return Err(refuse(format!(
            "it is a {}-byte{} frame; slcan carries classic CAN frames of at most 8 bytes",
            m.size(),
            if m.fd() { " CAN FD" } else { "" }
        )));
    }
    if key == "status" && m.switch().is_some() {
        return Err(refuse(
            "it is multiplexed; a simulated node sends plain status messages only: name a \
             message without a multiplexer"
                .into(),
        ));
    }
    if let Some(&missing) = needed.iter().find(|s| m.signal(s).is_none()) {
        return Err(CanSimError::MissingSignal {
            device: device.to_string(),
            key,
            file: dbc.file().to_string(),
            message: m.name().to_string(),
            signal: missing,
            model,
        });
    }
    Ok(())
}

impl Drop for SimBus {
    fn drop(&mut self) {
        // Remove the link, unless another simulator has taken the name since.
        let link = link_path(&self.name);
        if std::fs::read_link(&link).is_ok_and(|to| to == std::path::Path::new(&self.pty)) {
            let _ = std::fs::remove_file(link);
        }
    }
}

/// Where a bus's pty is linked: `$TMPDIR/closedloop-can-{bus}` (`/tmp/closedloop-can-workshop`),
/// the same on every run, so a plant file's `interface = "slcan:/tmp/closedloop-can-workshop"`
/// reaches the simulator without editing. Two simulators running one bus name take the link from
/// each other: give each its own name.
pub fn link_path(bus: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("closedloop-can-{bus}"))
}
