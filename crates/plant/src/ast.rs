//! What a compiled expression reads, found by walking its syntax tree.
//!
//! `Program::references()` of `cel` 0.15 lists only the root identifier of a select chain
//! (`params`, not `params.target_mm`; `devices`, not `devices.slide.fault`), and counts the
//! variables of comprehension macros as references. The engine needs the full names: to know
//! which signals decide a command (evidence, "did the feedback move?"), and to tell a missing
//! value ("not yet known") from a broken expression. So the tree is walked here.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use std::collections::BTreeSet;

/// Names that are not signals but strings supplied by the engine (payload interpolation).
pub(crate) const EXTRA_NAMES: &[&str] = &["command_id"];

/// The names one expression reads.
#[derive(Debug, Default, Clone)]
pub(crate) struct Names {
    /// Bare signal names of the expression's own device.
    pub signals: BTreeSet<String>,
    /// `params.<name>`.
    pub params: BTreeSet<String>,
    /// `devices.<id>.<signal>`.
    pub devices: BTreeSet<(String, String)>,
    /// Engine-supplied strings such as `command_id`.
    pub extras: BTreeSet<String>,
}

/// A name as written, for static checks.
pub(crate) enum Leaf<'a> {
    Signal(&'a str),
    Param(&'a str),
    Device(&'a str, &'a str),
    Bool,
    Number,
    String,
}

/// Collects the names `expr` reads; refuses `params` and `devices` used other than as
/// `params.<name>` and `devices.<id>.<signal>`, so that every name is known at load.
pub(crate) fn collect(
    expr: &IdedExpr,
    bound: &mut Vec<String>,
    names: &mut Names,
) -> Result<(), String> {
    match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) => Ok(()),
        Expr::Ident(name) => {
            if name.starts_with('@') || bound.iter().any(|b| b == name) {
                return Ok(());
            }
            match name.as_str() {
                "params" => Err("write params.<name> to read a parameter".to_string()),
                "devices" => Err("write devices.<id>.<signal> to read another device".to_string()),
                n if EXTRA_NAMES.contains(&n) => {
                    names.extras.insert(n.to_string());
                    Ok(())
                }
                n => {
                    names.signals.insert(n.to_string());
                    Ok(())
                }
            }
        }
        Expr::Select(select) => {
            let segments = chain(expr);
            match segments.as_deref() {
                Some(["params", p, ..]) if !bound.iter().any(|b| b == "params") => {
                    names.params.insert((*p).to_string());
                    Ok(())
                }
                Some(["devices", d, s, ..]) if !bound.iter().any(|b| b == "devices") => {
                    names.devices.insert(((*d).to_string(), (*s).to_string()));
                    Ok(())
                }
                Some(["devices", _]) => {
                    Err("write devices.<id>.<signal>: a device is read one signal at a time".into())
                }
                _ => collect(&select.operand, bound, names),
            }
        }
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                collect(t, bound, names)?;
            }
            call.args.iter().try_for_each(|a| collect(a, bound, names))
        }
        Expr::Comprehension(c) => {
            collect(&c.iter_range, bound, names)?;
            collect(&c.accu_init, bound, names)?;
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            let r = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|e| collect(e, bound, names));
            bound.truncate(before);
            r
        }
        Expr::List(list) => list
            .elements
            .iter()
            .try_for_each(|e| collect(e, bound, names)),
        Expr::Map(map) => map
            .entries
            .iter()
            .try_for_each(|e| entry(&e.expr, bound, names)),
        Expr::Struct(s) => s
            .entries
            .iter()
            .try_for_each(|e| entry(&e.expr, bound, names)),
    }
}

fn entry(e: &EntryExpr, bound: &mut Vec<String>, names: &mut Names) -> Result<(), String> {
    match e {
        EntryExpr::StructField(f) => collect(&f.value, bound, names),
        EntryExpr::MapEntry(m) => {
            collect(&m.key, bound, names)?;
            collect(&m.value, bound, names)
        }
    }
}

/// `a.b.c` as `["a", "b", "c"]` when `expr` is a plain select chain rooted at an identifier.
fn chain(expr: &IdedExpr) -> Option<Vec<&str>> {
    match &expr.expr {
        Expr::Ident(name) => Some(vec![name.as_str()]),
        Expr::Select(s) if !s.test => {
            let mut v = chain(&s.operand)?;
            v.push(s.field.as_str());
            Some(v)
        }
        _ => None,
    }
}

/// The operands of every `==` / `!=` in `expr` whose both sides are a name or a literal.
///
/// CEL answers `1.0 == true` with `false` instead of a type error, so a dry run cannot catch
/// `contact == params.on` where `contact` is a number; the loader checks these pairs itself.
pub(crate) fn equalities<'a>(expr: &'a IdedExpr, out: &mut Vec<(Leaf<'a>, Leaf<'a>)>) {
    match &expr.expr {
        Expr::Call(call) => {
            if matches!(call.func_name.as_str(), "_==_" | "_!=_")
                && call.args.len() == 2
                && let (Some(a), Some(b)) = (leaf(&call.args[0]), leaf(&call.args[1]))
            {
                out.push((a, b));
            }
            if let Some(t) = &call.target {
                equalities(t, out);
            }
            call.args.iter().for_each(|a| equalities(a, out));
        }
        Expr::Select(s) => equalities(&s.operand, out),
        Expr::List(l) => l.elements.iter().for_each(|e| equalities(e, out)),
        _ => {}
    }
}

fn leaf(expr: &IdedExpr) -> Option<Leaf<'_>> {
    match &expr.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => Some(Leaf::Bool),
        Expr::Literal(LiteralValue::Double(_) | LiteralValue::Int(_) | LiteralValue::UInt(_)) => {
            Some(Leaf::Number)
        }
        Expr::Literal(LiteralValue::String(_)) => Some(Leaf::String),
        Expr::Ident(n) if !n.starts_with('@') => Some(Leaf::Signal(n)),
        Expr::Select(_) => match chain(expr)?.as_slice() {
            ["params", p] => Some(Leaf::Param(p)),
            ["devices", d, s] => Some(Leaf::Device(d, s)),
            _ => None,
        },
        _ => None,
    }
}
