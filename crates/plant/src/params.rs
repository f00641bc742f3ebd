//! Action parameters: their declaration, their values, and the check of a tool call's
//! arguments against the declaration.
//!
//! A bad argument is refused before anything is written (`INVALID_PARAMS`), with a message that
//! names the parameter and says what to send instead, because the reader is a model that will
//! retry with whatever the message suggests.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The type of an action parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    /// `true` / `false`.
    Bool,
    /// A double.
    Number,
    /// A whole number, still a double inside expressions.
    Integer,
    /// Text, usually restricted by `enum`.
    String,
}

impl ParamType {
    /// The plant-file spelling.
    pub fn key(self) -> &'static str {
        match self {
            ParamType::Bool => "bool",
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::String => "string",
        }
    }

    /// The JSON Schema type name.
    pub fn json_type(self) -> &'static str {
        match self {
            ParamType::Bool => "boolean",
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::String => "string",
        }
    }
}

/// One declared parameter of an action.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    /// The name, read in expressions as `params.<name>`.
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// Smallest allowed value (numbers and integers).
    pub min: Option<f64>,
    /// Largest allowed value (numbers and integers).
    pub max: Option<f64>,
    /// Engineering unit, shown to the agent.
    pub unit: Option<String>,
    /// What it means, shown to the agent.
    pub description: Option<String>,
    /// The allowed strings (`enum`), for string parameters.
    pub choices: Option<Vec<String>>,
    /// The question that asks a person for the value (`ask`): a value the model must not make
    /// up (who signs, the lot number on the label) is left out of the tool's input schema and
    /// asked of the person in-protocol, so the journal records what the person answered.
    pub ask: Option<String>,
}

/// A parameter value of a command. Serializes untagged, so params are plain JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// A bool parameter.
    Bool(bool),
    /// A number or integer parameter (every number is a double).
    Number(f64),
    /// A string parameter.
    String(String),
}

/// A command's parameters by name.
pub type Params = BTreeMap<String, ParamValue>;

/// One problem with one argument of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamProblem {
    /// The argument's name.
    pub param: String,
    /// What is wrong and what to send instead.
    pub message: String,
}

/// Why a tool call's arguments were refused (`INVALID_PARAMS`): every problem, not the first.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamError {
    /// The problems, in the order of the declared parameters, then unknown arguments.
    pub problems: Vec<ParamProblem>,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", p.param, p.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ParamError {}

/// Checks `args` against `specs`: all declared params required, nothing else allowed.
pub(crate) fn check(
    specs: &[ParamSpec],
    args: &serde_json::Map<String, serde_json::Value>,
) -> Result<Params, ParamError> {
    let mut params = Params::new();
    let mut problems = Vec::new();
    for spec in specs {
        let Some(arg) = args.get(&spec.name) else {
            problems.push(ParamProblem {
                param: spec.name.clone(),
                message: format!("missing; send {}", expected(spec)),
            });
            continue;
        };
        match check_one(spec, arg) {
            Ok(v) => {
                params.insert(spec.name.clone(), v);
            }
            Err(message) => problems.push(ParamProblem {
                param: spec.name.clone(),
                message,
            }),
        }
    }
    for name in args.keys().filter(|k| !specs.iter().any(|s| &s.name == *k)) {
        let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let message = if known.is_empty() {
            "unknown parameter; this action takes none".to_string()
        } else {
            format!("unknown parameter; the parameters are {}", known.join(", "))
        };
        problems.push(ParamProblem {
            param: name.clone(),
            message,
        });
    }
    if problems.is_empty() {
        Ok(params)
    } else {
        Err(ParamError { problems })
    }
}

/// What came, for a message that is journaled and read by others: short values as they are
/// (`"150"`, `yes`), a long string by its length only — a caller once pasted an API key into a
/// parameter, and the refusal kept it for every reader of the journal.
fn what_came(arg: &serde_json::Value) -> String {
    const SHOWN: usize = 16;
    match arg {
        serde_json::Value::String(s) if s.chars().count() > SHOWN => {
            format!("a string of {} characters", s.chars().count())
        }
        serde_json::Value::Array(_) => "an array".into(),
        serde_json::Value::Object(_) => "an object".into(),
        other => other.to_string(),
    }
}

fn check_one(spec: &ParamSpec, arg: &serde_json::Value) -> Result<ParamValue, String> {
    let wrong = || format!("got {}; send {}", what_came(arg), expected(spec));
    match spec.ty {
        ParamType::Bool => arg.as_bool().map(ParamValue::Bool).ok_or_else(wrong),
        ParamType::String => {
            let s = arg.as_str().ok_or_else(wrong)?;
            match &spec.choices {
                Some(c) if !c.iter().any(|x| x == s) => Err(format!(
                    "{} is not allowed; send one of {}",
                    what_came(arg),
                    quoted(c)
                )),
                _ => Ok(ParamValue::String(s.to_string())),
            }
        }
        ParamType::Number | ParamType::Integer => {
            let n = arg.as_f64().filter(|n| n.is_finite()).ok_or_else(wrong)?;
            if spec.ty == ParamType::Integer && n.fract() != 0.0 {
                return Err(format!("{n} is not a whole number; send an integer"));
            }
            let unit = spec
                .unit
                .as_deref()
                .map(|u| format!(" {u}"))
                .unwrap_or_default();
            if let Some(min) = spec.min.filter(|m| n < *m) {
                return Err(format!(
                    "{n}{unit} is below the minimum {min}{unit}; {}",
                    range(spec)
                ));
            }
            if let Some(max) = spec.max.filter(|m| n > *m) {
                return Err(format!(
                    "{n}{unit} is above the maximum {max}{unit}; {}",
                    range(spec)
                ));
            }
            Ok(ParamValue::Number(n))
        }
    }
}

/// "a number from 0 to 300 mm", "true or false", ...
fn expected(spec: &ParamSpec) -> String {
    match spec.ty {
        ParamType::Bool => "true or false".to_string(),
        ParamType::String => match &spec.choices {
            Some(c) => format!("one of {}", quoted(c)),
            None => "a string".to_string(),
        },
        ParamType::Number | ParamType::Integer => {
            let what = if spec.ty == ParamType::Integer {
                "an integer"
            } else {
                "a number"
            };
            match (spec.min, spec.max) {
                (None, None) => what.to_string(),
                _ => format!("{what} {}", bounds(spec)),
            }
        }
    }
}

fn range(spec: &ParamSpec) -> String {
    format!("send {}", expected(spec))
}

fn bounds(spec: &ParamSpec) -> String {
    let unit = spec
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    match (spec.min, spec.max) {
        (Some(a), Some(b)) => format!("from {a} to {b}{unit}"),
        (Some(a), None) => format!("of at least {a}{unit}"),
        (None, Some(b)) => format!("of at most {b}{unit}"),
        (None, None) => String::new(),
    }
}

fn quoted(c: &[String]) -> String {
    c.iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn specs() -> Vec<ParamSpec> {
        let base = ParamSpec {
            name: String::new(),
            ty: ParamType::Number,
            min: None,
            max: None,
            unit: None,
            description: None,
            choices: None,
            ask: None,
        };
        vec![
            ParamSpec {
                name: "count".into(),
                ty: ParamType::Integer,
                min: Some(1.0),
                ..base.clone()
            },
            ParamSpec {
                name: "mode".into(),
                ty: ParamType::String,
                choices: Some(vec!["fast".into(), "slow".into()]),
                ..base.clone()
            },
            ParamSpec {
                name: "on".into(),
                ty: ParamType::Bool,
                ..base.clone()
            },
            ParamSpec {
                name: "target_mm".into(),
                min: Some(0.0),
                max: Some(300.0),
                unit: Some("mm".into()),
                ..base
            },
        ]
    }

    fn run(v: serde_json::Value) -> Result<Params, ParamError> {
        check(&specs(), v.as_object().unwrap())
    }

    #[test]
    fn good_arguments_become_params() {
        let p = run(json!({"count": 3, "mode": "fast", "on": true, "target_mm": 150})).unwrap();
        assert_eq!(p["count"], ParamValue::Number(3.0));
        assert_eq!(p["target_mm"], ParamValue::Number(150.0));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"count": 3.0, "mode": "fast", "on": true, "target_mm": 150.0})
        );
    }

    #[test]
    fn every_problem_names_the_param_and_the_fix() {
        let e =
            run(json!({"count": 2.5, "mode": "turbo", "on": "yes", "target_mm": 301, "speed": 1}))
                .unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("count: 2.5 is not a whole number; send an integer"),
            "{s}"
        );
        assert!(
            s.contains("mode: \"turbo\" is not allowed; send one of \"fast\", \"slow\""),
            "{s}"
        );
        assert!(s.contains("on: got \"yes\"; send true or false"), "{s}");
        assert!(
            s.contains(
                "target_mm: 301 mm is above the maximum 300 mm; send a number from 0 to 300 mm"
            ),
            "{s}"
        );
        assert!(
            s.contains("speed: unknown parameter; the parameters are count, mode, on, target_mm"),
            "{s}"
        );
        assert_eq!(e.problems.len(), 5);
    }

    #[test]
    fn missing_and_below_minimum() {
        let e = run(json!({"count": 0, "mode": "fast", "on": false})).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("count: 0 is below the minimum 1; send an integer of at least 1"),
            "{s}"
        );
        assert!(
            s.contains("target_mm: missing; send a number from 0 to 300 mm"),
            "{s}"
        );
    }

    #[test]
    fn no_params_declared() {
        assert_eq!(check(&[], &serde_json::Map::new()), Ok(Params::new()));
        let e = check(&[], json!({"x": 1}).as_object().unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x: unknown parameter; this action takes none"
        );
    }
}
