//! The type half of expression checks: `==` between kinds that are never equal, and a dry run
//! against sample values of the right types (see `exprs.rs`).

use super::exprs::{ExprCtx, Want};
use crate::ast::{self, Leaf};
use crate::expr::{EvalError, Expr, Scope, kind_of};
use crate::params::{ParamType, ParamValue, Params};
use closedloop_contract::Value;
use std::collections::BTreeMap;

/// Evaluates the expression twice (all bools false, then all true, so both sides of `&&`,
/// `||` and `?:` are reached): it must yield what `want` accepts, without a type error.
pub(super) fn dry_run(ctx: &ExprCtx, expr: &Expr, want: Want) -> Result<(), String> {
    let src = expr.source();
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

/// Refuses `==` / `!=` between a number and a bool, which CEL answers with `false`.
pub(super) fn equality_types(ctx: &ExprCtx, expr: &Expr) -> Result<(), String> {
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
            .map(|b| (crate::expr::other_device_name(d, s), bool_kind(b))),
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
