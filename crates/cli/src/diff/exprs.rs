//! Whether one expression holds in more states than another: `closedloop diff` decides looser or
//! stricter by evaluating both over states sampled from what they read — the declared ranges of
//! parameters, the constants both expressions are written with (and values just either side of
//! them, and one variable offset from another by them, as `abs(x - y) <= 0.2` needs), bools
//! both ways, and values recorded in a journal when one is given. It prints a state where one
//! holds and the other does not; finding none is "no difference found in N states", never
//! "equivalent".

use closedloop_contract::Value;
use closedloop_plant::{Expr, ParamSpec, ParamType, ParamValue, Params, Plant, Scope};
use std::collections::BTreeMap;

/// States evaluated per pair.
pub(crate) const STATES: usize = 4000;

/// What a pair of expressions showed over the sampled states.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Found {
    /// Neither held where the other did not, in this many states.
    NoDifference(usize),
    /// The new one holds in a state the old one does not (the state, in words), only that way.
    NewHoldsMore(String),
    /// The old one holds in a state the new one does not, only that way.
    OldHoldsMore(String),
    /// Both ways: the first state where the new holds alone, then the old.
    Both(String, String),
}

/// One name an expression reads and the values it is tried with.
#[derive(Debug, Clone)]
enum Var {
    /// A bool: false and true.
    Bool,
    /// A number, from these candidates, or offset from another number; kept within bounds.
    Number(Vec<f64>, Bounds),
    /// A string parameter, from these.
    Text(Vec<String>),
}

/// What a number may be: a parameter's declared range and whether it is whole (a state the
/// parameter check would refuse is no counterexample); a signal's is unbounded.
#[derive(Debug, Clone, Copy, Default)]
struct Bounds {
    min: Option<f64>,
    max: Option<f64>,
    integer: bool,
}

impl Bounds {
    fn fit(self, n: f64) -> f64 {
        let n = if self.integer { n.round() } else { n };
        let n = self.min.map_or(n, |m| n.max(m));
        self.max.map_or(n, |m| n.min(m))
    }
}

/// Where an expression is evaluated: the device it belongs to (for its own signals) and the
/// action's parameters, in both plants; values recorded in a journal, by name.
pub(crate) struct Context<'a> {
    pub old: &'a Plant,
    pub new: &'a Plant,
    /// The device whose own signals the expressions read.
    pub device: &'a str,
    /// The action's parameters (the new plant's, else the old's).
    pub params: &'a [ParamSpec],
    /// Values recorded in a journal, by `devices.<id>.<signal>` (see [`crate::diff::journal`]).
    pub recorded: &'a BTreeMap<String, Vec<f64>>,
}

/// Compares `old` and `new` over sampled states.
pub(crate) fn compare(old: &Expr, new: &Expr, cx: &Context) -> Found {
    let vars = variables(&[old, new], cx);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut new_only, mut old_only, mut tried) = (None, None, 0);
    for i in 0..STATES {
        let state = sample(&vars, &mut rng, i);
        let (Some(a), Some(b)) = (holds(old, &state), holds(new, &state)) else {
            continue;
        };
        tried += 1;
        match (a, b) {
            (false, true) if new_only.is_none() => new_only = Some(words(&state)),
            (true, false) if old_only.is_none() => old_only = Some(words(&state)),
            _ => {}
        }
        if new_only.is_some() && old_only.is_some() {
            break;
        }
    }
    match (new_only, old_only) {
        (None, None) => Found::NoDifference(tried),
        (Some(n), None) => Found::NewHoldsMore(n),
        (None, Some(o)) => Found::OldHoldsMore(o),
        (Some(n), Some(o)) => Found::Both(n, o),
    }
}

/// A sampled state: each variable's value by the name the expression reads it by.
type State = BTreeMap<String, Sampled>;

#[derive(Debug, Clone, PartialEq)]
enum Sampled {
    Value(Value),
    Text(String),
}

/// Whether `e` holds in `state`; `None` when it cannot be evaluated there.
fn holds(e: &Expr, state: &State) -> Option<bool> {
    let mut signals = BTreeMap::new();
    let mut devices: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut params = Params::new();
    for (name, v) in state {
        match (name.split_once('.'), v) {
            (Some(("params", p)), Sampled::Value(Value::Bool(b))) => {
                params.insert(p.into(), ParamValue::Bool(*b));
            }
            (Some(("params", p)), Sampled::Value(Value::Number(n))) => {
                params.insert(p.into(), ParamValue::Number(*n));
            }
            (Some(("params", p)), Sampled::Text(t)) => {
                params.insert(p.into(), ParamValue::String(t.clone()));
            }
            (Some(("devices", rest)), Sampled::Value(v)) => {
                let (d, s) = rest.split_once('.')?;
                devices.entry(d.into()).or_default().insert(s.into(), *v);
            }
            (None, Sampled::Value(v)) => {
                signals.insert(name.clone(), *v);
            }
            _ => return None,
        }
    }
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[("command_id", "cmd")],
    };
    e.eval_bool(&scope).ok()
}

/// `position_mm = 110, params.target_mm = 150`.
fn words(state: &State) -> String {
    let each: Vec<String> = (state.iter())
        .map(|(k, v)| match v {
            Sampled::Value(Value::Bool(b)) => format!("{k} = {b}"),
            Sampled::Value(Value::Number(n)) => format!("{k} = {n}"),
            Sampled::Text(t) => format!("{k} = {t:?}"),
        })
        .collect();
    each.join(", ")
}

/// Every name the expressions read, with the values to try.
fn variables(exprs: &[&Expr], cx: &Context) -> BTreeMap<String, Var> {
    let constants: Vec<f64> = exprs.iter().flat_map(|e| literals(e.source())).collect();
    let texts: Vec<String> = exprs.iter().flat_map(|e| quoted(e.source())).collect();
    let mut out = BTreeMap::new();
    for e in exprs {
        for s in e.signals() {
            out.insert(s.clone(), signal_var(cx, cx.device, s, &constants));
        }
        for p in e.params() {
            out.insert(format!("params.{p}"), param_var(cx, p, &constants, &texts));
        }
        for (d, s) in e.devices() {
            out.insert(
                closedloop_plant::other_device_name(d, s),
                signal_var(cx, d, s, &constants),
            );
        }
    }
    for (name, v) in out.iter_mut() {
        // The journal's sample is by `devices.<id>.<signal>`; a bare name is the device's own.
        let key = match name.split_once('.') {
            Some(("devices" | "params", _)) => name.clone(),
            _ => closedloop_plant::other_device_name(cx.device, name),
        };
        if let (Var::Number(c, _), Some(seen)) = (v, cx.recorded.get(&key)) {
            c.extend(seen.iter().copied().take(64));
        }
    }
    out
}

fn signal_var(cx: &Context, device: &str, signal: &str, constants: &[f64]) -> Var {
    let spec = [cx.new, cx.old]
        .iter()
        .find_map(|p| p.device(device)?.signal(signal));
    match spec {
        Some(s) if s.source.is_bool() => Var::Bool,
        _ => Var::Number(numbers(constants, &[]), Bounds::default()),
    }
}

fn param_var(cx: &Context, name: &str, constants: &[f64], texts: &[String]) -> Var {
    let Some(p) = cx.params.iter().find(|p| p.name == name) else {
        return Var::Number(numbers(constants, &[]), Bounds::default());
    };
    match &p.ty {
        ParamType::Bool => Var::Bool,
        ParamType::String => Var::Text(p.choices.clone().unwrap_or_else(|| {
            // Without `enum`: the strings the expressions compare with, and one they do not.
            let mut t = texts.to_vec();
            t.push("x".into());
            t
        })),
        ty => {
            let ends: Vec<f64> = [p.min, p.max].into_iter().flatten().collect();
            let mid = match (p.min, p.max) {
                (Some(a), Some(b)) => vec![(a + b) / 2.0],
                _ => vec![],
            };
            let bounds = Bounds {
                min: p.min,
                max: p.max,
                integer: *ty == ParamType::Integer,
            };
            let c = numbers(constants, &[ends, mid].concat());
            let mut c: Vec<f64> = c.into_iter().map(|n| bounds.fit(n)).collect();
            c.dedup();
            Var::Number(c, bounds)
        }
    }
}

/// Candidates for a number: 0, each constant (and its negation: `-18` is written as `18` after
/// a minus) and either side of it, and `extra`.
fn numbers(constants: &[f64], extra: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0, 1.0, -1.0];
    let negated = constants.iter().map(|c| -c);
    for c in constants
        .iter()
        .copied()
        .chain(negated)
        .chain(extra.iter().copied())
    {
        for d in [0.0, 0.5, -0.5, 1.0, -1.0, 0.01, -0.01] {
            out.push(c + d * c.abs().max(1.0));
        }
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
}

/// The string literals of an expression's text (`'fast'`, `"slow"`).
fn quoted(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<(char, String)> = None;
    for ch in source.chars() {
        match &mut open {
            Some((q, text)) if ch == *q => {
                out.push(std::mem::take(text));
                open = None;
            }
            Some((_, text)) => text.push(ch),
            None if ch == '\'' || ch == '"' => open = Some((ch, String::new())),
            None => {}
        }
    }
    out
}

/// The numeric literals of an expression's text.
fn literals(source: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in source.chars().chain([' ']) {
        if ch.is_ascii_digit() || ch == '.' {
            word.push(ch);
            continue;
        }
        if let Ok(n) = word.parse::<f64>()
            && !word.starts_with('.')
        {
            out.push(n);
        }
        word.clear();
        if ch.is_ascii_alphabetic() || ch == '_' {
            // A digit inside a name (`temp_2`) is no literal: skip to the name's end.
            word.push('x');
        }
    }
    out
}

/// One state: each variable from its candidates; half the numbers offset from the first
/// number by a constant, so relations between variables (`abs(x - y) <= c`) are tried.
fn sample(vars: &BTreeMap<String, Var>, rng: &mut Rng, i: usize) -> State {
    let mut state = State::new();
    let mut base: Option<f64> = None;
    for (name, var) in vars {
        let v = match var {
            Var::Bool => Sampled::Value(Value::Bool(rng.next().is_multiple_of(2))),
            Var::Text(t) => Sampled::Text(t[rng.below(t.len())].clone()),
            Var::Number(c, bounds) => {
                let pick = c[rng.below(c.len())];
                let n = match base {
                    Some(b) if i % 2 == 1 => {
                        bounds.fit(b + c[rng.below(c.len())] * [1.0, -1.0, 0.5, -0.5][rng.below(4)])
                    }
                    _ => pick,
                };
                base.get_or_insert(pick);
                Sampled::Value(Value::Number(n))
            }
        };
        state.insert(name.clone(), v);
    }
    state
}

/// A small deterministic generator: the same plants give the same counterexample every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant() -> Plant {
        closedloop_plant::parse(
            r#"
[[device]]
id = "oven"
description = "An oven"
driver = { kind = "sim", model = "heater" }
[device.signals]
temperature_c = { input = 0, type = "i16", scale = 0.1 }
enabled = { coil = 0 }
[[device.action]]
name = "set"
description = "Heat the oven."
params = { to_c = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, type = "i16", value = "params.to_c * 10.0" }]
done_when = "abs(temperature_c - params.to_c) <= 1.0"
expect_s = 1.0
"#,
            "t.toml",
            std::path::Path::new("."),
        )
        .expect("parses")
    }

    fn compared(old: &str, new: &str) -> Found {
        let p = plant();
        let action = p.device("oven").unwrap().action("set").unwrap();
        let expr = |src: &str| Expr::compile(src).expect("compiles");
        let recorded = BTreeMap::new();
        let cx = Context {
            old: &p,
            new: &p,
            device: "oven",
            params: &action.params,
            recorded: &recorded,
        };
        compare(&expr(old), &expr(new), &cx)
    }

    #[test]
    fn a_wider_tolerance_holds_where_the_old_did_not_and_the_state_shows_it() {
        let found = compared(
            "abs(temperature_c - params.to_c) <= 1.0",
            "abs(temperature_c - params.to_c) <= 40.0",
        );
        let Found::NewHoldsMore(state) = found else {
            panic!("{found:?}");
        };
        // The counterexample holds for the new one and not the old, evaluated again here.
        let nums: BTreeMap<&str, f64> = state
            .split(", ")
            .filter_map(|kv| {
                let (k, v) = kv.split_once(" = ")?;
                Some((k, v.parse().ok()?))
            })
            .collect();
        let gap = (nums["temperature_c"] - nums["params.to_c"]).abs();
        assert!(gap > 1.0 && gap <= 40.0, "{state}");
    }

    #[test]
    fn a_dropped_conjunct_is_looser_an_added_one_stricter_and_a_rewrite_is_no_difference() {
        let a = "temperature_c >= params.to_c - 0.5 && !enabled";
        let b = "temperature_c >= params.to_c - 0.5";
        assert!(matches!(compared(a, b), Found::NewHoldsMore(_)));
        assert!(matches!(compared(b, a), Found::OldHoldsMore(_)));
        let same = compared(b, "params.to_c - 0.5 <= temperature_c");
        assert!(
            matches!(same, Found::NoDifference(n) if n > 1000),
            "{same:?}"
        );
    }

    #[test]
    fn a_negative_threshold_is_tried_below_it() {
        // A freezer alarm raised above -15 instead of -18: raised in fewer states.
        let found = compared("temperature_c > -18.0", "temperature_c > -15.0");
        assert!(matches!(found, Found::OldHoldsMore(_)), "{found:?}");
    }

    #[test]
    fn a_parameter_is_tried_only_within_its_declared_range() {
        // `to_c` is declared 0..300: a bound at its maximum refuses nothing the check admits.
        let found = compared("params.to_c <= 300.0", "true");
        assert!(
            matches!(found, Found::NoDifference(n) if n > 1000),
            "{found:?}"
        );
        let found = compared("params.to_c <= 200.0", "true");
        let Found::NewHoldsMore(state) = found else {
            panic!("{found:?}");
        };
        let to_c: f64 = state
            .split("params.to_c = ")
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert!(to_c > 200.0 && to_c <= 300.0, "{state}");
    }

    #[test]
    fn the_literals_of_an_expression_are_its_numbers_not_digits_in_names() {
        assert_eq!(
            literals("abs(temp_2 - params.x) <= 0.25 || y > 100"),
            vec![0.25, 100.0]
        );
    }
}
