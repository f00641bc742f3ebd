//! Expressions at load: compile, check every name, dry-run against sample values.
//!
//! The plant file promises "never a surprise at run time" (docs/plant-file.md): an unknown name
//! or a type error refuses the file. Names are checked against the device's signals, the action's params and the
//! catalog of every device; types are found by evaluating the expression twice (all bools
//! false, then all true, so both sides of `&&`, `||` and `?:` are reached) with numbers at a
//! value inside each param's range, plus a static check of `==` between a number and a bool
//! (that type half is in `types.rs`).

use super::types::{dry_run, equality_types};
use crate::expr::Expr;
use crate::params::ParamSpec;
use crate::suggest::did_you_mean;
use crate::template::Template;
use std::collections::BTreeMap;

/// Every device's signals: id → signal name → whether it is a bool (None: refused, unknown).
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    pub devices: BTreeMap<String, BTreeMap<String, Option<bool>>>,
}

/// Where an expression stands: which names it may read.
pub(crate) struct ExprCtx<'a> {
    pub device: &'a str,
    pub action: &'a str,
    pub own: &'a BTreeMap<String, Option<bool>>,
    pub catalog: &'a Catalog,
    pub params: &'a [ParamSpec],
}

/// The result an expression must yield.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// A criterion: `true` or `false`.
    Bool,
    /// A number (`expect_s`).
    Number,
    /// A register value: a number, or a bool written as 0/1.
    Value,
    /// A payload interpolation: a string, number or bool.
    Text,
}

impl Want {
    /// What the result must be, as messages say it.
    pub(super) fn says(self) -> &'static str {
        match self {
            Want::Bool => "true or false",
            Want::Number => "a number",
            Want::Value => "a number or a bool",
            Want::Text => "a string, a number or a bool",
        }
    }

    /// Whether a dry run's result is of the wanted kind.
    pub(super) fn accepts(self, v: &cel::Value) -> bool {
        use cel::Value as V;
        let number = matches!(v, V::Float(_) | V::Int(_) | V::UInt(_));
        match self {
            Want::Bool => matches!(v, V::Bool(_)),
            Want::Number => number,
            Want::Value => number || matches!(v, V::Bool(_)),
            Want::Text => number || matches!(v, V::Bool(_) | V::String(_)),
        }
    }
}

/// CEL keywords and the names expressions reserve; none can name a signal or param. Public
/// (`closedloop_plant::RESERVED_NAMES`) so that a generated plant avoids the same list.
pub const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
    "params",
    "devices",
    "command_id",
];

/// Whether `name` can be read in an expression as a bare name or `params.<name>`.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("use letters, digits and _, not starting with a digit".into());
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "\"{name}\" is reserved in expressions; choose another name"
        ));
    }
    Ok(())
}

/// Compiles and checks an expression; the error names the offending name and the fix.
pub(crate) fn check(ctx: &ExprCtx, src: &str, want: Want) -> Result<Expr, String> {
    let expr = Expr::compile(src)?;
    check_compiled(ctx, &expr, want, false)?;
    Ok(expr)
}

/// Compiles and checks an MQTT payload template (`${command_id}` is allowed there).
pub(crate) fn check_template(ctx: &ExprCtx, src: &str) -> Result<Template, String> {
    let t = Template::compile(src)?;
    for e in t.exprs() {
        check_compiled(ctx, e, Want::Text, true)?;
    }
    Ok(t)
}

/// Checks a compiled expression: every name it reads first, then (unless it reads a refused
/// signal, whose type is unknown) its types, by a dry run.
fn check_compiled(ctx: &ExprCtx, expr: &Expr, want: Want, extras: bool) -> Result<(), String> {
    let src = expr.source();
    for name in expr.signals() {
        if !ctx.own.contains_key(name) {
            return Err(unknown_name(ctx, src, name));
        }
    }
    if let Some(x) = expr.extras().iter().next().filter(|_| !extras) {
        return Err(format!(
            "in \"{src}\": {x} is only known inside an MQTT payload's ${{...}}"
        ));
    }
    for p in expr.params() {
        if !ctx.params.iter().any(|s| &s.name == p) {
            return Err(unknown_param(ctx, src, p));
        }
    }
    for (d, s) in expr.devices() {
        device_signal(ctx, src, d, s)?;
    }
    if reads_refused(ctx, expr) {
        // It reads a signal that was refused (and reported); its type cannot be checked.
        return Ok(());
    }
    equality_types(ctx, expr)?;
    dry_run(ctx, expr, want)
}

/// The message for `params.<p>` that the action does not declare: the close match, if any,
/// and the params it has.
fn unknown_param(ctx: &ExprCtx, src: &str, p: &str) -> String {
    let names: Vec<&str> = ctx.params.iter().map(|s| s.name.as_str()).collect();
    let hint = did_you_mean(p, names.iter().copied())
        .map(|b| format!(" (did you mean params.{b}?)"))
        .unwrap_or_default();
    let list = if names.is_empty() {
        format!("action {} has no params", ctx.action)
    } else {
        format!("params of {} are {}", ctx.action, names.join(", "))
    };
    format!("in \"{src}\": unknown name \"params.{p}\"{hint} — {list}")
}

/// Whether `devices.<d>.<s>` names a device of the plant and a signal of it; the error lists
/// what exists instead.
fn device_signal(ctx: &ExprCtx, src: &str, d: &str, s: &str) -> Result<(), String> {
    let Some(signals) = ctx.catalog.devices.get(d) else {
        let ids: Vec<&str> = ctx.catalog.devices.keys().map(String::as_str).collect();
        let hint = did_you_mean(d, ids.iter().copied())
            .map(|b| format!(" (did you mean {b}?)"))
            .unwrap_or_default();
        return Err(format!(
            "in \"{src}\": unknown device \"{d}\" in devices.{d}.{s}{hint} — devices are {}",
            ids.join(", ")
        ));
    };
    if !signals.contains_key(s) {
        let names: Vec<&str> = signals.keys().map(String::as_str).collect();
        let hint = did_you_mean(s, names.iter().copied())
            .map(|b| format!(" (did you mean {b}?)"))
            .unwrap_or_default();
        return Err(format!(
            "in \"{src}\": device {d} has no signal \"{s}\"{hint} — its signals are {}",
            list_or_none(&names)
        ));
    }
    Ok(())
}

/// Whether the expression reads a signal that was refused: its type is unknown, so a dry run
/// would report a follow-on error.
fn reads_refused(ctx: &ExprCtx, expr: &Expr) -> bool {
    expr.signals()
        .iter()
        .any(|s| ctx.own.get(s).is_some_and(Option::is_none))
        || expr.devices().iter().any(|(d, s)| {
            ctx.catalog
                .devices
                .get(d)
                .and_then(|m| m.get(s))
                .is_some_and(Option::is_none)
        })
}

fn unknown_name(ctx: &ExprCtx, src: &str, name: &str) -> String {
    if ctx.params.iter().any(|p| p.name == name) {
        return format!("in \"{src}\": \"{name}\" is a parameter; write params.{name}");
    }
    if ctx.catalog.devices.contains_key(name) {
        return format!("in \"{src}\": \"{name}\" is a device; write devices.{name}.<signal>");
    }
    if ctx.device.is_empty() {
        // An alarm's condition: it belongs to no device, so no bare name can be a signal.
        return format!(
            "unknown name \"{name}\" in \"{src}\": an alarm reads signals as devices.<id>.<signal> (it belongs to no device)"
        );
    }
    let signals: Vec<&str> = ctx.own.keys().map(String::as_str).collect();
    let params: Vec<&str> = ctx.params.iter().map(|p| p.name.as_str()).collect();
    let hint = did_you_mean(name, signals.iter().copied())
        .map(|b| format!(" (did you mean {b}?)"))
        .unwrap_or_default();
    let params = if params.is_empty() {
        "none".to_string()
    } else {
        params.join(", ")
    };
    format!(
        "unknown name \"{name}\"{hint} — signals of {} are {}; params are {params}",
        ctx.device,
        list_or_none(&signals)
    )
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}
