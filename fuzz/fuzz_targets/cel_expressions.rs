//! CEL expressions (`closedloop_plant::Expr`, what `done_when`, `requires`, `fail_when` and write
//! values compile to): arbitrary source text must compile or be refused with a message, and a
//! compiled expression must evaluate or fail with an error, never panic.
//!
//! Input: the expression's source (non-UTF-8 read lossily). It is evaluated against a fixed
//! scope that names the usual things: the device's signals `position_mm`, `moving`, `fault`,
//! the parameter `params.target_mm` and `params.mode`, and `devices.lamp.contact`.
//!
//! Properties: no panic (nor stack overflow, nor unbounded memory); a refusal has a message;
//! `eval_bool`, `eval_f64` and `eval_text` agree with `eval` on whether it failed.

#![no_main]

use closedloop_contract::Value;
use closedloop_plant::{Expr, ParamValue, Params, Scope};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let expr = match Expr::compile(&src) {
        Ok(e) => e,
        Err(message) => {
            assert!(!message.is_empty(), "a refusal without a message");
            return;
        }
    };
    let signals = BTreeMap::from([
        ("position_mm".to_string(), Value::Number(12.5)),
        ("moving".to_string(), Value::Bool(false)),
        ("fault".to_string(), Value::Bool(false)),
    ]);
    let params: Params = BTreeMap::from([
        ("target_mm".to_string(), ParamValue::Number(100.0)),
        ("mode".to_string(), ParamValue::String("fast".into())),
    ]);
    let devices = BTreeMap::from([(
        "lamp".to_string(),
        BTreeMap::from([("contact".to_string(), Value::Bool(true))]),
    )]);
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[("command_id", "cmd_fuzz")],
    };
    let whole = expr.eval(&scope);
    if whole.is_err() {
        assert!(expr.eval_bool(&scope).is_err());
        assert!(expr.eval_f64(&scope).is_err());
    }
    let _ = expr.eval_text(&scope);
});
