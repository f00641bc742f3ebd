//! CEL expressions of the plant file, compiled once and evaluated on every poll.
//!
//! Names: the device's own signals (`position_mm`), `params.<name>`, and
//! `devices.<id>.<signal>`; functions: CEL's standard library plus `abs`, `min` and `max` over
//! doubles. Every number is a double (see [`crate::literal`]). Values are handed to `cel` through
//! a variable resolver that reads the caller's maps directly, so an evaluation builds no maps.

use crate::ast::{self, Names};
use crate::expr_words::describe;
pub(crate) use crate::expr_words::kind_of;
use crate::interned::Interned;
use crate::literal;
use crate::params::{ParamValue, Params};
use cel::common::types::{CelBool, CelDouble, CelString};
use cel::common::value::CowVal;
use cel::context::VariableResolver;
use cel::{Context, Env, Program};
use closedloop_contract::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, OnceLock};
use thiserror::Error;

/// `devices.<id>.<signal>`, the one spelling of another device's signal in an expression and in
/// evidence: `Some((id, signal))`, or `None` for a name of the device's own (`position_mm`).
pub fn other_device(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("devices.")?.split_once('.')
}

/// The name [`other_device`] reads: `devices.<id>.<signal>`.
pub fn other_device_name(device: &str, signal: &str) -> String {
    format!("devices.{device}.{signal}")
}

/// A compiled expression.
///
/// # Invariants
/// Every name it reads is in [`Expr::signals`], [`Expr::params`] or [`Expr::devices`]:
/// `params` and `devices` are only accepted as `params.<name>` and `devices.<id>.<signal>`.
/// Cloning is cheap (the program is shared).
#[derive(Clone)]
pub struct Expr {
    inner: Arc<Compiled>,
}

struct Compiled {
    source: String,
    program: Program,
    names: Names,
}

impl Compiled {
    fn new(src: &str) -> Result<Compiled, String> {
        let rewritten = literal::doubles(src);
        let program = env().compile(&rewritten).map_err(|e| {
            let first = e
                .errors
                .first()
                .map(|p| p.msg.clone())
                .unwrap_or_else(|| e.to_string());
            format!("\"{src}\" is not a valid CEL expression: {first}")
        })?;
        let mut names = Names::default();
        ast::collect(program.expression(), &mut Vec::new(), &mut names)
            .map_err(|m| format!("in \"{src}\": {m}"))?;
        Ok(Compiled {
            source: src.to_string(),
            program,
            names,
        })
    }
}

/// The values an expression is evaluated against.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// The device's own signals by name.
    pub signals: &'a BTreeMap<String, Value>,
    /// The command's parameters.
    pub params: &'a Params,
    /// Every device's signals: `devices.<id>.<signal>`.
    pub devices: &'a BTreeMap<String, BTreeMap<String, Value>>,
    /// Strings the engine supplies to payload templates, such as `("command_id", "0193…")`.
    pub extra_strings: &'a [(&'a str, &'a str)],
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A name it reads has no value in the scope yet; the engine treats this as "not yet known".
    #[error("{name} has no value yet")]
    Missing {
        /// `position_mm`, `params.target_mm` or `devices.slide.fault`.
        name: String,
    },
    /// It yielded a value of the wrong kind (a string where a number was needed, ...).
    #[error("`{expr}` yields {got}, but {expected} is needed")]
    Type {
        /// The expression's source.
        expr: String,
        /// What the caller needed.
        expected: &'static str,
        /// What it yielded.
        got: String,
    },
    /// CEL refused to evaluate it (no such operator for these types, and the like).
    #[error("`{expr}` cannot be evaluated: {message}")]
    Failed {
        /// The expression's source.
        expr: String,
        /// What went wrong.
        message: String,
    },
}

impl EvalError {
    /// Whether the failure only means that a value is not known yet.
    pub fn is_missing(&self) -> bool {
        matches!(self, EvalError::Missing { .. })
    }
}

impl Expr {
    /// Compiles `src` (integer literals become doubles first). The error says what is wrong.
    /// Every expression with the same source shares one compiled program (see
    /// [`crate::interned`]).
    pub fn compile(src: &str) -> Result<Expr, String> {
        static COMPILED: OnceLock<Interned<Compiled>> = OnceLock::new();
        let inner = COMPILED
            .get_or_init(Interned::new)
            .get_or_make(src, || Compiled::new(src))?;
        Ok(Expr { inner })
    }

    /// The expression as written in the plant file.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The bare signal names of its own device it reads.
    pub fn signals(&self) -> &BTreeSet<String> {
        &self.inner.names.signals
    }

    /// The parameters it reads (`params.<name>`).
    pub fn params(&self) -> &BTreeSet<String> {
        &self.inner.names.params
    }

    /// The `(device id, signal)` pairs it reads through `devices.<id>.<signal>`.
    pub fn devices(&self) -> &BTreeSet<(String, String)> {
        &self.inner.names.devices
    }

    /// Engine-supplied strings it reads (`command_id`).
    pub fn extras(&self) -> &BTreeSet<String> {
        &self.inner.names.extras
    }

    /// Whether it reads any signal at all (its own or another device's).
    pub fn reads_signals(&self) -> bool {
        !self.signals().is_empty() || !self.devices().is_empty()
    }

    pub(crate) fn syntax(&self) -> &cel::IdedExpr {
        self.inner.program.expression()
    }

    /// Evaluates to a bool or a number. A missing name is [`EvalError::Missing`]; a string or
    /// any other CEL value is [`EvalError::Type`].
    pub fn eval(&self, scope: &Scope) -> Result<Value, EvalError> {
        match self.eval_cel(scope)? {
            cel::Value::Bool(b) => Ok(Value::Bool(b)),
            cel::Value::Float(f) => Ok(Value::Number(f)),
            cel::Value::Int(i) => Ok(Value::Number(i as f64)),
            cel::Value::UInt(u) => Ok(Value::Number(u as f64)),
            other => Err(self.type_error("a bool or a number", &other)),
        }
    }

    /// Evaluates to a bool (completion, failure and interlock criteria).
    pub fn eval_bool(&self, scope: &Scope) -> Result<bool, EvalError> {
        match self.eval_cel(scope)? {
            cel::Value::Bool(b) => Ok(b),
            other => Err(self.type_error("a bool", &other)),
        }
    }

    /// Evaluates to a number (`expect_s`, register values).
    pub fn eval_f64(&self, scope: &Scope) -> Result<f64, EvalError> {
        match self.eval(scope)? {
            Value::Number(n) => Ok(n),
            Value::Bool(b) => Err(EvalError::Type {
                expr: self.source().to_string(),
                expected: "a number",
                got: format!("the bool {b}"),
            }),
        }
    }

    /// Evaluates to text, for payload interpolation: strings as they are, numbers and bools
    /// as JSON writes them.
    pub fn eval_text(&self, scope: &Scope) -> Result<String, EvalError> {
        match self.eval_cel(scope)? {
            cel::Value::String(s) => Ok(s.as_str().to_string()),
            cel::Value::Bool(b) => Ok(b.to_string()),
            cel::Value::Float(f) if f.is_finite() => Ok(f.to_string()),
            cel::Value::Int(i) => Ok(i.to_string()),
            cel::Value::UInt(u) => Ok(u.to_string()),
            other => Err(self.type_error("a string, a bool or a finite number", &other)),
        }
    }

    /// Evaluates to whatever CEL yields; the loader uses it to check result types.
    pub(crate) fn eval_cel(&self, scope: &Scope) -> Result<cel::Value, EvalError> {
        self.check_known(scope)?;
        let resolver = Resolver { scope };
        let mut ctx = Context::with_env(Arc::clone(env()));
        ctx.set_variable_resolver(&resolver);
        self.inner
            .program
            .execute(&ctx)
            .map_err(|e| EvalError::Failed {
                expr: self.source().to_string(),
                message: describe(&e),
            })
    }

    fn check_known(&self, scope: &Scope) -> Result<(), EvalError> {
        let n = &self.inner.names;
        let missing = |name: String| Err(EvalError::Missing { name });
        if let Some(s) = n.signals.iter().find(|s| !scope.signals.contains_key(*s)) {
            return missing(s.clone());
        }
        if let Some(p) = n.params.iter().find(|p| !scope.params.contains_key(*p)) {
            return missing(format!("params.{p}"));
        }
        let absent =
            |(d, s): &&(String, String)| scope.devices.get(d).is_none_or(|m| !m.contains_key(s));
        if let Some((d, s)) = n.devices.iter().find(absent) {
            return missing(other_device_name(d, s));
        }
        if let Some(x) = n
            .extras
            .iter()
            .find(|x| !scope.extra_strings.iter().any(|(k, _)| k == *x))
        {
            return missing(x.clone());
        }
        Ok(())
    }

    fn type_error(&self, expected: &'static str, got: &cel::Value) -> EvalError {
        EvalError::Type {
            expr: self.source().to_string(),
            expected,
            got: kind_of(got),
        }
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Expr({:?})", self.source())
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Expr) -> bool {
        self.source() == other.source()
    }
}

/// Answers `cel`'s variable lookups straight from the caller's maps. `cel` asks for the whole
/// qualified name first (`params.on`, `devices.slide.fault`), which is answered directly.
struct Resolver<'s> {
    scope: &'s Scope<'s>,
}

impl VariableResolver for Resolver<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        if let Some(p) = name.strip_prefix("params.") {
            return self.scope.params.get(p).map(|v| match v {
                ParamValue::Bool(b) => CowVal::owned(CelBool::from(*b)),
                ParamValue::Number(n) => CowVal::owned(CelDouble::from(*n)),
                ParamValue::String(s) => CowVal::owned(CelString::from(s.as_str())),
            });
        }
        if name.starts_with("devices.") {
            let (d, s) = other_device(name)?;
            return self.scope.devices.get(d)?.get(s).map(value);
        }
        if let Some(v) = self.scope.signals.get(name) {
            return Some(value(v));
        }
        let (_, s) = self.scope.extra_strings.iter().find(|(k, _)| *k == name)?;
        Some(CowVal::owned(CelString::from(*s)))
    }
}

fn value<'b>(v: &Value) -> CowVal<'b, 'b> {
    match v {
        Value::Bool(b) => CowVal::owned(CelBool::from(*b)),
        Value::Number(n) => CowVal::owned(CelDouble::from(*n)),
    }
}

fn abs(x: &CelDouble) -> CelDouble {
    CelDouble::from(x.inner().abs())
}

fn min(a: &CelDouble, b: &CelDouble) -> CelDouble {
    CelDouble::from(a.inner().min(*b.inner()))
}

fn max(a: &CelDouble, b: &CelDouble) -> CelDouble {
    CelDouble::from(a.inner().max(*b.inner()))
}

/// The one environment every expression compiles and runs in: the standard library plus
/// `abs(x)`, `min(a, b)` and `max(a, b)` over doubles (`cel` 0.15 ships `min`/`max` only as
/// functions to add per context; declaring them as overloads here costs nothing per eval).
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Registration can only fail on a duplicate name, which these are not.
        let _ = cel::add_overload!(env, fn abs: (CelDouble) -> CelDouble, name = "abs", id = "abs_double");
        let _ = cel::add_overload!(env, fn min: (CelDouble, CelDouble) -> CelDouble, name = "min", id = "min_double_double");
        let _ = cel::add_overload!(env, fn max: (CelDouble, CelDouble) -> CelDouble, name = "max", id = "max_double_double");
        Arc::new(env)
    })
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
