//! Write plans: the plant's entries evaluated to typed values, then encoded by the device's link.
//!
//! The plan is protocol-neutral: each entry's expressions are evaluated here (a template, such
//! as an MQTT payload, rendered), and the link turns the values into what its protocol sends
//! (register words, a payload, a node write or method call, a CAN frame) or says why a value does
//! not fit. Every entry is evaluated and encoded *before* anything is sent, so a value the device
//! cannot take refuses the whole plan (`INVALID_PARAMS`) with nothing written — never half a plan,
//! never a saturated value. What a failed write means in the contract's words is the link's to say.

pub use closedloop_contract::contract::WriteError;
use closedloop_link::Link;
pub use closedloop_link::value_json;
pub use closedloop_link::{Evaluated, PlanError, Request};
use closedloop_plant::{Scope, WriteEntry};

/// Evaluates every entry of a plan and has `link` encode it. An MQTT payload's `${command_id}`
/// comes from the scope's `extra_strings`. Nothing is sent unless every entry encodes.
pub fn evaluate(
    entries: &[WriteEntry],
    scope: &Scope<'_>,
    link: &dyn Link,
) -> Result<Vec<Request>, PlanError> {
    entries
        .iter()
        .map(|e| link.encode(e, &evaluate_entry(e, scope)?))
        .collect()
}

/// One entry's values: its template rendered, or each of its expressions evaluated.
pub fn evaluate_entry(entry: &WriteEntry, scope: &Scope<'_>) -> Result<Evaluated, PlanError> {
    if let WriteEntry::Mqtt { payload, .. } = entry {
        let text = payload.render(scope).map_err(|e| {
            PlanError(format!(
                "{}: the payload could not be rendered: {e}",
                entry.describe()
            ))
        })?;
        return Ok(Evaluated {
            values: Vec::new(),
            text: Some(text),
        });
    }
    let values = entry
        .exprs()
        .map(|x| {
            x.eval(scope).map_err(|e| {
                PlanError(format!(
                    "{}: `{}` could not be evaluated: {e}",
                    entry.describe(),
                    x.source()
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Evaluated { values, text: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_contract::Value;
    use closedloop_plant::{Expr, ParamValue, Params, Template};

    fn with_scope<T>(params: &Params, f: impl FnOnce(&Scope<'_>) -> T) -> T {
        let signals = std::collections::BTreeMap::new();
        let devices = std::collections::BTreeMap::new();
        let scope = Scope {
            signals: &signals,
            params,
            devices: &devices,
            extra_strings: &[("command_id", "0193abc")],
        };
        f(&scope)
    }

    #[test]
    fn an_mqtt_payload_renders_params_and_the_command_id() {
        let mut params = Params::new();
        params.insert("on".into(), ParamValue::Bool(true));
        let entry = WriteEntry::Mqtt {
            topic: "lab/lamp/set".into(),
            payload: Template::compile(r#"{"on": ${params.on}, "id": "${command_id}"}"#)
                .expect("compiles"),
            qos: 1,
        };
        let got = with_scope(&params, |s| evaluate_entry(&entry, s)).unwrap();
        assert_eq!(
            got.text.as_deref(),
            Some(r#"{"on": true, "id": "0193abc"}"#)
        );
    }

    #[test]
    fn every_expression_of_an_entry_is_evaluated_in_order_or_named_when_it_fails() {
        let params = Params::new();
        let entry = WriteEntry::OpcuaMethod {
            method: "ns=2;s=Start".into(),
            object: "ns=2;s=Pump".into(),
            args: vec![
                Expr::compile("1 + 1").expect("compiles"),
                Expr::compile("true").expect("compiles"),
            ],
        };
        let got = with_scope(&params, |s| evaluate_entry(&entry, s)).unwrap();
        assert_eq!(got.values, vec![Value::Number(2.0), Value::Bool(true)]);
        let bad = WriteEntry::OpcuaNode {
            node: "ns=2;s=Speed".into(),
            value: Expr::compile("params.missing").expect("compiles"),
        };
        let e = with_scope(&params, |s| evaluate_entry(&bad, s)).unwrap_err();
        assert!(e.0.starts_with("ns=2;s=Speed: `params.missing`"), "{e}");
    }
}
