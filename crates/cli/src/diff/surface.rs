//! The tool-surface rules of `closedloop diff`, as one pure function over two loaded plants.
//!
//! The test for every rule: could a call that a client made against the old plant — a tool it
//! called, arguments it sent, a result it waited for — now be refused, be held for someone, or
//! mean something else? Then the change is breaking. A change that only adds or loosens is
//! compatible, and still listed, so a reviewer sees the whole difference.

use super::{Change, Verdict};
use closedloop_plant::{Action, Device, ParamSpec, ParamType, Plant, TaskSupport, ToolMode};
use serde_json::Value;

use Verdict::{Breaking, Compatible};

/// The tool column of plant-wide changes.
const PLANT: &str = "(plant)";

/// Every difference between the two plants' tool surfaces: plant-wide settings first, then the
/// action tools (old plant order, then the new plant's added ones), then the tools the plant
/// does not declare itself but whose presence or arguments depend on it (raw and bridge tools,
/// `list_alarms`, `keep_alive`, the generic tools, the fixed ones).
pub(crate) fn compare(old: &Plant, new: &Plant) -> Vec<Change> {
    let mut out = plant_wide(old, new);
    for (device, action) in old.actions() {
        match new.tool(&action.tool_name) {
            None => out.push(Change::new(&action.tool_name, "removed", Breaking)),
            Some((new_device, new_action)) => {
                out.extend(action_changes((device, action), (new_device, new_action)));
            }
        }
    }
    for (_, action) in new.actions() {
        if old.tool(&action.tool_name).is_none() {
            out.push(Change::new(&action.tool_name, "added", Compatible));
        }
    }
    out.extend(builtin_changes(old, new));
    out
}

/// `[server]` keys that shape every action tool: the tool mode (which tools exist at all) and
/// the default `wait_s` (how long a call without one waits).
fn plant_wide(old: &Plant, new: &Plant) -> Vec<Change> {
    let mut out = Vec::new();
    let mode = |m: ToolMode| match m {
        ToolMode::PerAction => "per_action",
        ToolMode::Generic => "generic",
    };
    if old.server.tools != new.server.tools {
        let (a, b) = (mode(old.server.tools), mode(new.server.tools));
        let how = match new.server.tools {
            ToolMode::Generic => "actions run through run_action, not their own tools",
            ToolMode::PerAction => "actions run through their own tools, not run_action",
        };
        out.push(Change::new(
            PLANT,
            format!("tools {a} → {b}: {how}"),
            Breaking,
        ));
    }
    let (a, b) = (old.server.default_wait_s, new.server.default_wait_s);
    if a != b {
        // A call without wait_s answers sooner or later; a client follows a command with
        // get_command_status either way, as every tool description says.
        let what = format!("default wait_s {a} → {b} s");
        out.push(Change::new(PLANT, what, Compatible));
    }
    out
}

/// The changes of one action present in both plants (same tool name).
fn action_changes(old: (&Device, &Action), new: (&Device, &Action)) -> Vec<Change> {
    let ((od, oa), (nd, na)) = (old, new);
    let tool = oa.tool_name.as_str();
    let mut out = Vec::new();
    let mut push = |what: String, verdict| out.push(Change::new(tool, what, verdict));
    let (ov, nv) = (oa.effective_verification(), na.effective_verification());
    if ov != nv {
        let (a, b) = (ov.as_str(), nv.as_str());
        push(format!("verification {a} → {b}"), Breaking);
    }
    match (oa.confirm, na.confirm) {
        (false, true) => push(
            "confirm turned on: nothing moves until a person confirms".into(),
            Breaking,
        ),
        (true, false) => push(
            "confirm turned off: runs without a person's confirmation".into(),
            Compatible,
        ),
        _ => {}
    }
    if oa.checklist != na.checklist {
        // Each item is a question a client answers under its own key (`check_1`, …).
        let (a, b) = (oa.checklist.len(), na.checklist.len());
        match a == b {
            true => push("checklist items reworded".into(), Compatible),
            false => push(
                format!("checklist {a} → {b} items: the confirmation asks other questions"),
                Breaking,
            ),
        }
    }
    if let Some((what, verdict)) = keepalive(oa.keepalive_s, na.keepalive_s) {
        push(what, verdict);
    }
    if oa.task != na.task {
        // A client without the Tasks extension can call an optional-task tool, not a required one.
        let (a, b) = (oa.task.as_str(), na.task.as_str());
        let verdict = match na.task {
            TaskSupport::Required => Breaking,
            TaskSupport::Optional => Compatible,
        };
        push(format!("task {a} → {b}"), verdict);
    }
    for (hint, a, b) in [
        ("idempotent", oa.idempotent, na.idempotent),
        ("destructive", oa.destructive, na.destructive),
    ] {
        if a != b {
            push(format!("{hint} {a} → {b}"), Compatible);
        }
    }
    if oa.description.trim() != na.description.trim()
        || od.description.trim() != nd.description.trim()
    {
        push("description changed".into(), Compatible);
    }
    out.extend(params_changes(tool, &oa.params, &na.params));
    out
}

/// A dead-man keepalive turned on or shortened makes a call that was left alone stop
/// (`DEADMAN`); turned off or lengthened, it only lets a command run longer unattended.
fn keepalive(old: Option<f64>, new: Option<f64>) -> Option<(String, Verdict)> {
    Some(match (old, new) {
        (None, Some(k)) => (
            format!("keepalive_s {k} added: stops unless the caller keeps asking"),
            Breaking,
        ),
        (Some(k), None) => (format!("keepalive_s {k} removed"), Compatible),
        (Some(a), Some(b)) if b < a => (format!("keepalive_s {a} → {b} s"), Breaking),
        (Some(a), Some(b)) if b > a => (format!("keepalive_s {a} → {b} s"), Compatible),
        _ => return None,
    })
}

/// Parameters by name: removed or added (every declared parameter is required, so an added
/// one breaks each call that did not send it), then each kept one's own changes.
fn params_changes(tool: &str, old: &[ParamSpec], new: &[ParamSpec]) -> Vec<Change> {
    let mut out = Vec::new();
    for o in old {
        match new.iter().find(|n| n.name == o.name) {
            // Nobody passed a parameter the person answered.
            None if o.ask.is_some() => out.push(Change::new(
                tool,
                format!("parameter {} (asked of the person) removed", o.name),
                Compatible,
            )),
            None => out.push(Change::new(
                tool,
                format!("parameter {} removed", o.name),
                Breaking,
            )),
            Some(n) => out.extend(
                param_changes(o, n)
                    .into_iter()
                    .map(|(what, v)| Change::new(tool, format!("parameter {}: {what}", o.name), v)),
            ),
        }
    }
    for n in new.iter().filter(|n| !old.iter().any(|o| o.name == n.name)) {
        // A client that cannot ask a person (no elicitation) can no longer call the tool.
        let what = match n.ask {
            Some(_) => format!("new parameter {} asked of the person", n.name),
            None => format!("new required parameter {} ({})", n.name, n.ty.key()),
        };
        out.push(Change::new(tool, what, Breaking));
    }
    out
}

/// One kept parameter's changes: type, unit, range, allowed strings, description. A type
/// change other than integer → number (every integer is still a number) makes the range and
/// the allowed strings moot, so they are not compared then.
pub(super) fn param_changes(old: &ParamSpec, new: &ParamSpec) -> Vec<(String, Verdict)> {
    let mut out = Vec::new();
    match (&old.ask, &new.ask) {
        (None, Some(_)) => out.push((
            "now asked of the person: a value passed is refused".into(),
            Breaking,
        )),
        (Some(_), None) => out.push((
            "no longer asked of the person: callers must pass it".into(),
            Breaking,
        )),
        (Some(a), Some(b)) if a != b => {
            out.push(("question to the person changed".into(), Compatible))
        }
        _ => {}
    }
    if old.ty != new.ty {
        let (a, b) = (old.ty.key(), new.ty.key());
        if (old.ty, new.ty) == (ParamType::Integer, ParamType::Number) {
            out.push((format!("type {a} → {b} (widened)"), Compatible));
        } else {
            out.push((format!("type {a} → {b}"), Breaking));
            return out;
        }
    }
    if old.unit != new.unit {
        let unit = |u: &Option<String>| u.clone().unwrap_or_else(|| "none".into());
        let what = format!("unit {} → {}", unit(&old.unit), unit(&new.unit));
        out.push((what, Breaking));
    }
    let unit = new
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    out.extend(bound("minimum", old.min, new.min, |a, b| b > a, &unit));
    out.extend(bound("maximum", old.max, new.max, |a, b| b < a, &unit));
    out.extend(choices(old.choices.as_deref(), new.choices.as_deref()));
    if old.description != new.description {
        out.push(("description changed".into(), Compatible));
    }
    out
}

/// A bound added or moved inward narrows the accepted values (breaking); removed or moved
/// outward, it widens them. `narrower(old, new)` says whether a move is inward.
fn bound(
    name: &str,
    old: Option<f64>,
    new: Option<f64>,
    narrower: fn(f64, f64) -> bool,
    unit: &str,
) -> Option<(String, Verdict)> {
    Some(match (old, new) {
        (None, Some(b)) => (format!("{name} {b}{unit} added (narrowed)"), Breaking),
        (Some(a), None) => (format!("{name} {a}{unit} removed (widened)"), Compatible),
        (Some(a), Some(b)) if a != b => {
            let (how, verdict) = if narrower(a, b) {
                ("narrowed", Breaking)
            } else {
                ("widened", Compatible)
            };
            (format!("{name} {a} → {b}{unit} ({how})"), verdict)
        }
        _ => return None,
    })
}

/// The allowed strings (`enum`): a choice removed, or a restriction where there was none,
/// refuses a value a client sent; a choice added, or the restriction lifted, refuses nothing.
fn choices(old: Option<&[String]>, new: Option<&[String]>) -> Vec<(String, Verdict)> {
    match (old, new) {
        (None, Some(n)) => vec![(format!("now restricted to {}", quoted(n.iter())), Breaking)],
        (Some(_), None) => vec![("no longer restricted to a list".into(), Compatible)],
        (Some(o), Some(n)) => {
            let removed: Vec<&String> = o.iter().filter(|c| !n.contains(c)).collect();
            let added: Vec<&String> = n.iter().filter(|c| !o.contains(c)).collect();
            let mut out = Vec::new();
            if !removed.is_empty() {
                out.push((
                    format!("choice {} removed", quoted(removed.into_iter())),
                    Breaking,
                ));
            }
            if !added.is_empty() {
                out.push((
                    format!("choice {} added", quoted(added.into_iter())),
                    Compatible,
                ));
            }
            out
        }
        (None, None) => vec![],
    }
}

fn quoted<'a>(c: impl Iterator<Item = &'a String>) -> String {
    c.map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
}

/// The tools `serve` lists besides the action tools, built exactly as `serve` builds them:
/// one gone is breaking, one new is compatible, and a kept one whose argument lists the
/// plant's devices (`modbus_read`'s `device`, `run_action`'s) is compared choice by choice.
fn builtin_changes(old: &Plant, new: &Plant) -> Vec<Change> {
    let builtins = |p: &Plant| -> Vec<(String, Value)> {
        closedloop_mcp::build_tools(p)
            .into_iter()
            .filter(|t| p.tool(&t.name).is_none())
            .map(|t| (t.name.to_string(), Value::Object((*t.input_schema).clone())))
            .collect()
    };
    let (old_tools, new_tools) = (builtins(old), builtins(new));
    let mut out = Vec::new();
    for (name, schema) in &old_tools {
        match new_tools.iter().find(|(n, _)| n == name) {
            None => out.push(Change::new(name, "removed", Breaking)),
            Some((_, new_schema)) => out.extend(schema_changes(name, schema, new_schema)),
        }
    }
    for (name, _) in &new_tools {
        if !old_tools.iter().any(|(n, _)| n == name) {
            out.push(Change::new(name, "added", Compatible));
        }
    }
    out
}

/// A built-in tool's input schema: each property's `enum` compared as allowed strings; a
/// property's `default` and `description` left out (the only default that moves is `wait_s`'s,
/// the plant's `default_wait_s`, listed on its own); any other difference is breaking, as
/// nothing says what it would do to a call.
fn schema_changes(tool: &str, old: &Value, new: &Value) -> Vec<Change> {
    if old == new {
        return vec![];
    }
    let props = |v: &Value| v["properties"].as_object().cloned().unwrap_or_default();
    let (op, np) = (props(old), props(new));
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(p) = v["properties"].as_object_mut() {
            p.values_mut()
                .filter_map(Value::as_object_mut)
                .for_each(|s| {
                    for key in ["enum", "default", "description"] {
                        s.remove(key);
                    }
                });
        }
        v
    };
    if strip(old) != strip(new) {
        return vec![Change::new(tool, "input schema changed", Breaking)];
    }
    let strings = |v: Option<&Value>| -> Option<Vec<String>> {
        let list = v?.get("enum")?.as_array()?;
        Some(
            list.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
        )
    };
    let mut out = Vec::new();
    for (name, schema) in &op {
        let (a, b) = (strings(Some(schema)), strings(np.get(name)));
        for (what, verdict) in choices(a.as_deref(), b.as_deref()) {
            out.push(Change::new(
                tool,
                format!("argument {name}: {what}"),
                verdict,
            ));
        }
    }
    out
}
