//! Expressions at load: compile, check every name, dry-run against sample values.
//!
//! DESIGN §3 promises "never a surprise at run time": an unknown name or a type error refuses
//! the file. Names are checked against the device's signals, the action's params and the
//! catalog of every device; types are found by evaluating the expression twice (all bools
//! false, then all true, so both sides of `&&`, `||` and `?:` are reached) with numbers at a
//! value inside each param's range, plus a static check of `==` between a number and a bool.

use crate::ast::{self, Leaf};
use crate::expr::{EvalError, Expr, Scope, kind_of};
use crate::params::{ParamSpec, ParamType, ParamValue, Params};
use crate::suggest::did_you_mean;
use crate::template::Template;
use closedloop_driver::Value;
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
    fn says(self) -> &'static str {
        match self {
            Want::Bool => "true or false",
            Want::Number => "a number",
            Want::Value => "a number or a bool",
            Want::Text => "a string, a number or a bool",
        }
    }

    fn accepts(self, v: &cel::Value) -> bool {
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

/// CEL keywords and the names expressions reserve; none can name a signal or param.
const RESERVED: &[&str] = &[
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
            let names: Vec<&str> = ctx.params.iter().map(|s| s.name.as_str()).collect();
            let hint = did_you_mean(p, names.iter().copied())
                .map(|b| format!(" (did you mean params.{b}?)"))
                .unwrap_or_default();
            let list = if names.is_empty() {
                format!("action {} has no params", ctx.action)
            } else {
                format!("params of {} are {}", ctx.action, names.join(", "))
            };
            return Err(format!(
                "in \"{src}\": unknown name \"params.{p}\"{hint} — {list}"
            ));
        }
    }
    for (d, s) in expr.devices() {
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
    }
    let unknown_kind = expr
        .signals()
        .iter()
        .any(|s| ctx.own.get(s).is_some_and(Option::is_none))
        || expr.devices().iter().any(|(d, s)| {
            ctx.catalog
                .devices
                .get(d)
                .and_then(|m| m.get(s))
                .is_some_and(Option::is_none)
        });
    if unknown_kind {
        // It reads a signal that was refused (and reported); its type cannot be checked.
        return Ok(());
    }
    equality_types(ctx, expr)?;
    for sample in [false, true] {
        let (signals, params, devices) = samples(ctx, expr, sample);
        let extra = [("command_id", "0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77")];
        let scope = Scope {
            signals: &signals,
            params: &params,
            devices: &devices,
            extra_strings: &extra,
        };
        match expr.eval_cel(&scope) {
            Ok(v) if want.accepts(&v) => {}
            Ok(v) => {
                return Err(format!(
                    "\"{src}\" must yield {}, but it yields {}",
                    want.says(),
                    kind_of(&v)
                ));
            }
            Err(EvalError::Failed { message, .. }) => {
                return Err(format!(
                    "type error in \"{src}\": {message}; here {}",
                    kinds(ctx, expr)
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

fn unknown_name(ctx: &ExprCtx, src: &str, name: &str) -> String {
    if ctx.params.iter().any(|p| p.name == name) {
        return format!("in \"{src}\": \"{name}\" is a parameter; write params.{name}");
    }
    if ctx.catalog.devices.contains_key(name) {
        return format!("in \"{src}\": \"{name}\" is a device; write devices.{name}.<signal>");
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

/// Refuses `==` / `!=` between a number and a bool, which CEL answers with `false`.
fn equality_types(ctx: &ExprCtx, expr: &Expr) -> Result<(), String> {
    let mut pairs = Vec::new();
    ast::equalities(expr.syntax(), &mut pairs);
    for (a, b) in &pairs {
        if let (Some((na, ka)), Some((nb, kb))) = (leaf(ctx, a), leaf(ctx, b))
            && ka != kb
        {
            return Err(format!(
                "type error in \"{}\": it compares {na} ({ka}) with {nb} ({kb}), which is never \
                 equal; compare values of the same kind",
                expr.source()
            ));
        }
    }
    Ok(())
}

fn leaf(ctx: &ExprCtx, l: &Leaf) -> Option<(String, &'static str)> {
    let bool_kind = |b: bool| if b { "a bool" } else { "a number" };
    match l {
        Leaf::Bool => Some(("a bool literal".into(), "a bool")),
        Leaf::Number => Some(("a number literal".into(), "a number")),
        Leaf::String => Some(("a string literal".into(), "a string")),
        Leaf::Signal(n) => ctx
            .own
            .get(*n)
            .copied()
            .flatten()
            .map(|b| ((*n).to_string(), bool_kind(b))),
        Leaf::Device(d, s) => ctx
            .catalog
            .devices
            .get(*d)?
            .get(*s)
            .copied()
            .flatten()
            .map(|b| (format!("devices.{d}.{s}"), bool_kind(b))),
        Leaf::Param(p) => ctx.params.iter().find(|s| s.name == *p).map(|s| {
            let k = match s.ty {
                ParamType::Bool => "a bool",
                ParamType::String => "a string",
                ParamType::Number | ParamType::Integer => "a number",
            };
            (format!("params.{p}"), k)
        }),
    }
}

/// "position_mm is a number, moving is a bool, params.target_mm is a number".
fn kinds(ctx: &ExprCtx, expr: &Expr) -> String {
    let mut parts: Vec<String> = Vec::new();
    for s in expr.signals() {
        if let Some((n, k)) = leaf(ctx, &Leaf::Signal(s)) {
            parts.push(format!("{n} is {k}"));
        }
    }
    for p in expr.params() {
        if let Some((n, k)) = leaf(ctx, &Leaf::Param(p)) {
            parts.push(format!("{n} is {k}"));
        }
    }
    for (d, s) in expr.devices() {
        if let Some((n, k)) = leaf(ctx, &Leaf::Device(d, s)) {
            parts.push(format!("{n} is {k}"));
        }
    }
    if parts.is_empty() {
        "every number is a double".into()
    } else {
        format!("{} (every number is a double)", parts.join(", "))
    }
}

type Samples = (
    BTreeMap<String, Value>,
    Params,
    BTreeMap<String, BTreeMap<String, Value>>,
);

/// Sample values of the right types for a dry run of `expr`: its own device's signals, the
/// parameters, and the signals of the devices it reads — only those, so that checking every
/// expression of a plant stays linear in the number of devices.
fn samples(ctx: &ExprCtx, expr: &Expr, b: bool) -> Samples {
    let sample = |is_bool: &Option<bool>| {
        if *is_bool == Some(true) {
            Value::Bool(b)
        } else {
            Value::Number(1.0)
        }
    };
    let signals = ctx
        .own
        .iter()
        .map(|(n, k)| (n.clone(), sample(k)))
        .collect();
    let devices = expr
        .devices()
        .iter()
        .filter_map(|(d, _)| ctx.catalog.devices.get_key_value(d))
        .map(|(d, m)| {
            (
                d.clone(),
                m.iter().map(|(n, k)| (n.clone(), sample(k))).collect(),
            )
        })
        .collect();
    let params = ctx
        .params
        .iter()
        .map(|p| {
            let v = match p.ty {
                ParamType::Bool => ParamValue::Bool(b),
                ParamType::Number | ParamType::Integer => ParamValue::Number(
                    p.min
                        .map_or(1.0, |m| m.max(1.0))
                        .min(p.max.unwrap_or(f64::MAX)),
                ),
                ParamType::String => ParamValue::String(
                    p.choices
                        .as_ref()
                        .and_then(|c| c.first().cloned())
                        .unwrap_or_else(|| "sample".into()),
                ),
            };
            (p.name.clone(), v)
        })
        .collect();
    (signals, params, devices)
}
