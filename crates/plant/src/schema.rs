//! The MCP tool surface generated from the plant: names, descriptions, input schemas.
//!
//! The description is where an agent learns the one rule that matters: an action tool answers
//! `accepted` at once, and only `get_command_status` says whether the device confirmed it.

use crate::action::{Action, Verification};
use crate::params::{ParamSpec, ParamType};
use crate::plant::{Alarm, Device, Plant, ToolMode};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Longest tool name many MCP clients accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME: usize = 64;

/// What an action call answers, said from the plant's `[server] default_wait_s` (the wait when
/// a call passes no `wait_s`): a text written once for the default of 2 s told plants set to 0
/// that a call waits, and plants left at 2 that it answers at once.
pub fn outcome_text(default_wait_s: f64) -> String {
    let max = crate::limits::DEFAULT_WAIT_S.max;
    if default_wait_s <= 0.0 {
        return format!(
            "It returns status \"accepted\" and a command_id at once (pass wait_s, up to {max} s, \
             to wait for the outcome); accepted is not completion. Call get_command_status with \
             the command_id to learn whether the device confirmed it."
        );
    }
    format!(
        "It waits up to {default_wait_s} s (wait_s, 0 to {max}) for the device to confirm and \
         returns the status it reached: \"accepted\" or \"running\" with a command_id is not \
         completion; then call get_command_status with the command_id to learn whether the \
         device confirmed it."
    )
}

/// The `wait_s` property of a tool's input that acts (an action, `run_action`,
/// `confirm_command`), its default the plant's.
pub fn wait_s_property(default_wait_s: f64) -> Value {
    // Whole seconds as integers, as a client's form shows them: 2, not 2.0.
    let number = |x: f64| match x.fract() == 0.0 {
        true => json!(x as i64),
        false => json!(x),
    };
    let max = crate::limits::DEFAULT_WAIT_S.max;
    json!({
        "type": "number", "minimum": 0, "maximum": number(max), "default": number(default_wait_s),
        "description": format!(
            "Wait up to this many seconds (default {default_wait_s}) for a final status before \
             returning: a fast action completes in one call, a slow one returns accepted or \
             running (0: return at once)."
        )
    })
}

impl Action {
    /// The JSON Schema of the tool's input: every param (required) but those asked of a
    /// person (`ask`), plus optional `wait_s` (defaulting to the plant's `default_wait_s`) and
    /// `idempotency_key`; nothing else is accepted.
    pub fn input_schema(&self, default_wait_s: f64) -> Value {
        let mut props = Map::new();
        for p in self.params.iter().filter(|p| p.ask.is_none()) {
            props.insert(p.name.clone(), Value::Object(p.json_schema()));
        }
        props.insert("wait_s".into(), wait_s_property(default_wait_s));
        props.insert(
            "idempotency_key".into(),
            json!({
                "type": "string",
                "description": "Optional. Repeating a call with the same key and the same \
                                arguments returns the same command instead of acting twice."
            }),
        );
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.ask.is_none())
            .map(|p| p.name.as_str())
            .collect();
        // Assembled by hand: `json!` would copy `props` whole through `to_value`.
        let mut schema = Map::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), Value::Object(props));
        schema.insert("required".into(), json!(required));
        schema.insert("additionalProperties".into(), false.into());
        Value::Object(schema)
    }

    /// The tool description: the plant file's business text, the device, and how to learn the
    /// outcome (accepted is not done) as the plant's `default_wait_s` makes it, plus what cannot
    /// be confirmed for this action.
    pub fn tool_description(&self, device: &Device, default_wait_s: f64) -> String {
        let mut d = self.description.trim().to_string();
        if !d.is_empty() && !d.ends_with(['.', '!', '?']) {
            d.push('.');
        }
        if !device.description.trim().is_empty() {
            let _ = write!(d, " Device {}: {}", device.id, device.description.trim());
            if !d.ends_with(['.', '!', '?']) {
                d.push('.');
            }
        }
        d.push(' ');
        d.push_str(&outcome_text(default_wait_s));
        match self.effective_verification() {
            Verification::Feedback => {}
            Verification::Readback => d.push_str(
                " The device can only confirm that it holds the written value; the physical \
                 effect is not sensed.",
            ),
            Verification::None => d.push_str(
                " Nothing can confirm this action: its result is \"sent\", never verified.",
            ),
        }
        if let Some(k) = self.keepalive_s {
            let _ = write!(
                d,
                " It keeps running only while you call get_command_status or keep_alive with its \
                 command_id at least every {k} s; when you stop asking, it is stopped (DEADMAN)."
            );
        }
        let asked: Vec<&str> = self.asked().map(|p| p.name.as_str()).collect();
        if !asked.is_empty() {
            let _ = write!(
                d,
                " It asks the person for {} itself; do not pass or invent {}.",
                asked.join(" and "),
                if asked.len() == 1 { "it" } else { "them" }
            );
        }
        if self.confirm {
            d.push_str(" Nothing moves until the command is confirmed.");
        }
        if !self.checklist.is_empty() {
            let _ = write!(
                d,
                " Before confirming, the person checks: {}.",
                self.checklist.join("; ")
            );
        }
        if self.task == crate::TaskSupport::Required {
            d.push_str(
                " It runs as an MCP task: only a client that follows tasks (the \
                 io.modelcontextprotocol/tasks extension) can call it.",
            );
        }
        d
    }
}

impl ParamSpec {
    /// The JSON Schema of one parameter: type, range, choices, and its description with its
    /// unit. The tool's input schema holds it, or, for a parameter asked of a person, the form
    /// that asks it.
    pub fn json_schema(&self) -> Map<String, Value> {
        let mut s = Map::new();
        s.insert("type".into(), json!(self.ty.json_type()));
        if matches!(self.ty, ParamType::Number | ParamType::Integer) {
            if let Some(min) = self.min {
                s.insert("minimum".into(), json!(min));
            }
            if let Some(max) = self.max {
                s.insert("maximum".into(), json!(max));
            }
        }
        if let Some(choices) = &self.choices {
            s.insert("enum".into(), json!(choices));
        }
        let desc = match (&self.description, &self.unit) {
            (Some(d), Some(u)) => Some(format!("{d} (unit: {u})")),
            (Some(d), None) => Some(d.clone()),
            (None, Some(u)) => Some(format!("In {u}.")),
            (None, None) => None,
        };
        if let Some(d) = desc {
            s.insert("description".into(), json!(d));
        }
        s
    }
}

/// The human listing `closedloop check` prints: every tool with its description and schema.
pub fn render_surface(plant: &Plant) -> String {
    let mut out = String::new();
    let count = plant.devices.iter().map(|d| d.actions.len()).sum::<usize>();
    let _ = writeln!(
        out,
        "{}: server \"{}\", {} device(s), {} action tool(s), journal {}",
        plant.file.display(),
        plant.server.name,
        plant.devices.len(),
        count,
        plant.server.journal
    );
    if plant.server.tools == ToolMode::Generic {
        out.push_str("tools = \"generic\": actions are run through one generic tool; per-action schemas below.\n");
    }
    // The alarms blocking each device, found once: a search of every alarm per action made
    // the listing of a hall with an alarm per device quadratic (8,000: 1.5 s).
    let mut blocked_by: HashMap<&str, Vec<&str>> = HashMap::new();
    for a in &plant.alarms {
        for d in &a.blocks {
            let names = blocked_by.entry(d.as_str()).or_default();
            if names.last() != Some(&a.name.as_str()) {
                names.push(a.name.as_str());
            }
        }
    }
    let mut schema = LastSchema {
        wait_s: plant.server.default_wait_s,
        ..LastSchema::default()
    };
    for device in &plant.devices {
        let blocked_by = blocked_by
            .get(device.id.as_str())
            .map_or(&[][..], Vec::as_slice);
        render_device(&mut out, device, blocked_by, &mut schema);
    }
    for a in &plant.alarms {
        render_alarm(&mut out, a);
    }
    out
}

/// One device of the listing: its driver, polling and signals, then each action tool.
fn render_device(out: &mut String, device: &Device, blocked_by: &[&str], schema: &mut LastSchema) {
    let signals: Vec<String> = device
        .signals
        .iter()
        .map(|s| format!("{} ({})", s.name, s.source.describe()))
        .collect();
    let _ = writeln!(
        out,
        "\ndevice {} [{}], poll {} ms, offline after {} s\n  signals: {}",
        device.id,
        device.driver.kind(),
        device.poll_ms,
        device.liveness.max_silence_s,
        if signals.is_empty() {
            "none".to_string()
        } else {
            signals.join(", ")
        }
    );
    for action in &device.actions {
        render_action(out, device, action, blocked_by, schema);
    }
}

/// One action tool of the listing: its verification and effects, its envelope, the
/// description an agent reads and the input schema.
fn render_action(
    out: &mut String,
    device: &Device,
    action: &Action,
    blocked_by: &[&str],
    schema: &mut LastSchema,
) {
    let _ = writeln!(
        out,
        "\n  tool {}  (verification {}, {}, {})",
        action.tool_name,
        action.effective_verification().as_str(),
        if action.idempotent {
            "idempotent"
        } else {
            "not idempotent"
        },
        if action.destructive {
            "destructive"
        } else {
            "not destructive"
        },
    );
    let envelope = envelope(device, action, blocked_by);
    if !envelope.is_empty() {
        let _ = writeln!(out, "    envelope: {}", envelope.join(", "));
    }
    let description = action.tool_description(device, schema.wait_s);
    let _ = writeln!(out, "    {description}");
    out.push_str(schema.of(action));
}

/// Equal parameters whose bounds are equal to the bit: `-0.0` equals `0.0` but is written
/// `-0.0` in a schema.
fn same_params(a: &[crate::ParamSpec], b: &[crate::ParamSpec]) -> bool {
    let bits = |p: &crate::ParamSpec| (p.min.map(f64::to_bits), p.max.map(f64::to_bits));
    a == b && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

/// The input schema last listed, indented, with the parameters it was made from. A hall
/// declares the same action on device after device, and an action's schema depends on its
/// parameters alone: the listing makes it again only when they differ from the last ones
/// (building and pretty-printing a JSON value per action was a tenth of `check` of 8,000 relays).
#[derive(Default)]
struct LastSchema {
    /// The plant's `default_wait_s`, the same for every action.
    wait_s: f64,
    params: Option<Vec<crate::ParamSpec>>,
    text: String,
}

impl LastSchema {
    fn of(&mut self, action: &Action) -> &str {
        if !self
            .params
            .as_deref()
            .is_some_and(|p| same_params(p, &action.params))
        {
            let pretty =
                serde_json::to_string_pretty(&action.input_schema(self.wait_s)).unwrap_or_default();
            self.text.clear();
            for line in pretty.lines() {
                let _ = writeln!(self.text, "    {line}");
            }
            self.params = Some(action.params.clone());
        }
        &self.text
    }
}

/// What limits when and how the action may run, in the plant file's own keys: the action's and
/// the device's rate limits, the dead-man keepalive, a person's confirmation and the alarms
/// that block its device (`blocked_by`) — so whoever reviews a plant sees each tool's envelope
/// in one line.
fn envelope(device: &Device, action: &Action, blocked_by: &[&str]) -> Vec<String> {
    let mut rates: Vec<String> = [("action", &action.max_rate), ("device", &device.max_rate)]
        .iter()
        .filter_map(|(whose, r)| {
            r.as_ref()
                .map(|r| format!("{whose} max_rate {} max_burst {}", r.text, r.burst))
        })
        .collect();
    if let Some(k) = action.keepalive_s {
        rates.push(format!("keepalive_s {k} (dead-man)"));
    }
    if action.confirm {
        rates.push("confirm (a person first)".into());
    }
    if action.task == crate::TaskSupport::Required {
        rates.push("task required (Tasks clients only)".into());
    }
    if !blocked_by.is_empty() {
        rates.push(format!("blocked by alarm {}", blocked_by.join(", ")));
    }
    rates
}

/// One alarm of the listing: what it blocks, while which condition, and what clears it.
fn render_alarm(out: &mut String, a: &Alarm) {
    let held = match a.for_ms {
        0 => String::new(),
        ms => format!(" for {ms} ms"),
    };
    let clear = match &a.clear_when {
        Some(c) => format!(", until `{}`", c.source()),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "\nalarm {} ({}) blocks {} while `{}`{held}{clear}",
        a.name,
        a.severity,
        a.blocks.join(", "),
        a.when.source(),
    );
}
