//! What `closedloop init --dbc` generates, decided before any text is written: one device per
//! transmitting node (or one for messages no node sends), its signals, its actions, and every
//! thing left out with the reason.

use super::meta::{MessageMeta, Meta};
use crate::init::names::{sentence, snake, unique};
use closedloop_sim_server::can::{Dbc, DbcError, Message, Mux};

/// One generated device: a node of the DBC.
#[derive(Debug, Default)]
pub struct Device {
    /// The plant id (the node's name in snake_case).
    pub id: String,
    /// The DBC node, or [`UNASSIGNED`] for messages no node sends.
    pub node: String,
    /// For the plant's `description`.
    pub description: String,
    /// The device of messages no node sends, rather than a node's.
    pub unassigned: bool,
    /// The longest `GenMsgCycleTime` of the messages it sends, when all of them have one.
    pub cycle_ms: Option<f64>,
    /// Messages it sends without a cycle time (for the liveness comment).
    pub no_cycle: Vec<String>,
    /// Its signals, from the messages it sends.
    pub signals: Vec<SignalOut>,
    /// Its actions, from the messages it receives (with `--node`).
    pub actions: Vec<super::actions::ActionOut>,
}

/// One generated `[device.signals]` entry.
#[derive(Debug)]
pub struct SignalOut {
    /// The plant name.
    pub name: String,
    /// The DBC message.
    pub message: String,
    /// The DBC signal.
    pub signal: String,
    /// The DBC unit, if any.
    pub unit: Option<String>,
    /// A 1-bit signal reads as a bool.
    pub bool: bool,
    /// The DBC comment, if any.
    pub description: Option<String>,
    /// The resolution (the DBC factor), for `done_when` tolerances.
    pub factor: f64,
}

/// The whole generated plant, and what a person should look at.
#[derive(Debug, Default)]
pub struct Generated {
    /// Devices in `BU_` order, then the device of messages no node sends.
    pub devices: Vec<Device>,
    /// Things left out, each a sentence starting with what it is.
    pub skipped: Vec<String>,
    /// Things generated that a person should review.
    pub needs_person: Vec<String>,
}

/// The `node` of the device of messages no node sends: empty, which no DBC node name is, so
/// that device never merges with a node's.
const UNASSIGNED: &str = "";

/// The longest device id: the rest of a tool name (`<device>_<action>`, at most
/// [`closedloop_plant::MAX_TOOL_NAME`] characters) is left for the action's name.
const MAX_DEVICE_ID: usize = closedloop_plant::MAX_TOOL_NAME - 16;

/// The receivers of a message: the union of its signals' receivers, in order of appearance.
pub fn receivers(m: &Message, meta: Option<&MessageMeta>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in m.signals() {
        let r = meta.and_then(|mm| mm.signals.get(&s.name));
        for node in r.map(|r| r.receivers.as_slice()).unwrap_or_default() {
            if !out.contains(node) {
                out.push(node.clone());
            }
        }
    }
    out
}

/// Builds the plant: `nodes` (from `--node`) are the nodes whose received messages become
/// actions; `group` names the device of messages no node sends.
pub fn build(dbc: &Dbc, meta: &Meta, nodes: &[String], group: &str) -> Generated {
    let mut g = Generated::default();
    for (name, e) in dbc.refused() {
        let why = match e {
            DbcError::Signal { signal, reason, .. } => format!("signal {signal}: {reason}"),
            DbcError::Message { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        g.skipped.push(format!(
            "message {name}: closedloop cannot decode it: {why}"
        ));
    }
    let mut written = Vec::new();
    for m in dbc.messages() {
        let mm = meta.message(m.id(), m.extended());
        let to = receivers(m, mm).into_iter().find(|r| nodes.contains(r));
        let sender = mm.and_then(|mm| mm.sender.clone());
        match to {
            Some(node) if sender.as_deref() != Some(node.as_str()) => {
                written.push((m, node));
            }
            _ => {
                if sender.is_none() && !g.devices.iter().any(|d| d.unassigned) {
                    unassigned(&mut g, meta, group);
                }
                let node = sender.as_deref().unwrap_or(UNASSIGNED);
                add_signals(&mut g, m, mm, node, meta);
            }
        }
    }
    for node in nodes {
        device(&mut g, node, meta);
    }
    for (m, node) in &written {
        let mm = meta.message(m.id(), m.extended());
        let i = device(&mut g, node, meta);
        super::actions::add(&mut g, i, m, mm);
    }
    replaced(&mut g, meta, &written);
    for d in g.devices.iter().filter(|d| d.signals.is_empty()) {
        g.needs_person.push(format!(
            "device {}: it sends no message closedloop reads, so it is never seen online and every action is refused DEVICE_OFFLINE; add a signal of a message it sends",
            d.id
        ));
    }
    order(&mut g, meta);
    g
}

/// Creates the device of messages no node sends, named `group` (the file's stem) unless a
/// node's name gives that id, then `<group>_unassigned` (with a number if that is a node's too).
fn unassigned(g: &mut Generated, meta: &Meta, group: &str) {
    let nodes: Vec<String> = meta.nodes.iter().map(|n| fit_id(n)).collect();
    let taken = |id: &str| nodes.iter().any(|n| n == id) || g.devices.iter().any(|d| d.id == id);
    let id = match taken(&fit_id(group)) {
        false => fit_id(group),
        true => unique(&format!("{group}_unassigned"), MAX_DEVICE_ID, taken),
    };
    g.devices.push(Device {
        id,
        node: UNASSIGNED.into(),
        description: "Messages of the CAN bus that the DBC assigns to no node".into(),
        unassigned: true,
        ..Device::default()
    });
}

/// A node's name as a device id: snake_case, at most [`MAX_DEVICE_ID`] characters.
fn fit_id(node: &str) -> String {
    crate::init::names::fit(&snake(node), MAX_DEVICE_ID)
}

/// The index of the node's device, created if new (with a numeric suffix when another
/// device already has its id).
pub fn device(g: &mut Generated, node: &str, meta: &Meta) -> usize {
    if let Some(i) = g.devices.iter().position(|d| d.node == node) {
        return i;
    }
    let description = match meta.node_comments.get(node) {
        Some(c) => c.trim().trim_end_matches('.').to_string(),
        None => format!("The {node} node on the CAN bus"),
    };
    let id = unique(&snake(node), MAX_DEVICE_ID, |id| {
        g.devices.iter().any(|d| d.id == id)
    });
    g.devices.push(Device {
        id,
        node: node.to_string(),
        description,
        ..Device::default()
    });
    g.devices.len() - 1
}

/// Adds a transmitted message's signals to its sender's device; multiplexed ones are skipped.
fn add_signals(g: &mut Generated, m: &Message, mm: Option<&MessageMeta>, node: &str, meta: &Meta) {
    let i = device(g, node, meta);
    let cycle = mm.and_then(|mm| mm.cycle_ms);
    let d = &mut g.devices[i];
    match cycle {
        Some(c) => d.cycle_ms = Some(d.cycle_ms.map_or(c, |old: f64| old.max(c))),
        None => d.no_cycle.push(m.name().to_string()),
    }
    for s in m.signals() {
        if s.mux != Mux::Plain {
            g.skipped.push(format!(
                "multiplexed signal {}.{}: a plant signal reads every frame of its message, and this one is only in some; read it by hand if the device needs it",
                m.name(),
                s.name
            ));
            continue;
        }
        let sm = mm.and_then(|mm| mm.signals.get(&s.name));
        let d = &mut g.devices[i];
        let taken = |n: &str| d.signals.iter().any(|o| o.name == n);
        let mut name = snake(&s.name);
        if taken(&name) {
            name = unique(&format!("{}_{name}", snake(m.name())), usize::MAX, taken);
        }
        d.signals.push(SignalOut {
            name,
            message: m.name().to_string(),
            signal: s.name.clone(),
            unit: (!s.unit.is_empty()).then(|| s.unit.clone()),
            bool: s.length == 1,
            description: sm.and_then(|sm| describe(sm.comment.as_deref(), &sm.values)),
            factor: s.factor,
        });
    }
}

/// A description from a DBC comment and value table, if the file gives either.
pub fn describe(comment: Option<&str>, values: &[(i64, String)]) -> Option<String> {
    let table: Vec<String> = values.iter().map(|(n, l)| format!("{n} = {l}")).collect();
    match (comment, table.is_empty()) {
        (None, true) => None,
        (Some(c), true) => Some(sentence(c)),
        (None, false) => Some(format!("Values: {}.", table.join(", "))),
        (Some(c), false) => Some(format!("{} Values: {}.", sentence(c), table.join(", "))),
    }
}

/// Notes each node that sends only messages closedloop now writes: closedloop takes its place.
fn replaced(g: &mut Generated, meta: &Meta, written: &[(&Message, String)]) {
    for node in &meta.nodes {
        let sent: Vec<&str> = written
            .iter()
            .filter(|(m, _)| {
                let mm = meta.message(m.id(), m.extended());
                mm.and_then(|mm| mm.sender.as_deref()) == Some(node.as_str())
            })
            .map(|(m, _)| m.name())
            .collect();
        if !sent.is_empty() && !g.devices.iter().any(|d| d.node == *node) {
            g.skipped.push(format!(
                "node {node}: it sends only messages closedloop writes as actions ({}), so closedloop takes its place on the bus",
                sent.join(", ")
            ));
        }
    }
}

/// Devices in `BU_` order, the group device (not a node) last.
fn order(g: &mut Generated, meta: &Meta) {
    g.devices.sort_by_key(|d| {
        meta.nodes
            .iter()
            .position(|n| *n == d.node)
            .unwrap_or(usize::MAX)
    });
}
