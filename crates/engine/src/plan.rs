//! Write plans: from the plant's entries and CEL values to driver requests. What a failed write
//! means in the contract's words is the protocol crate's to say (`write_error`).
//!
//! Every value is evaluated and encoded *before* anything is sent, so a value the register cannot
//! hold refuses the whole plan (`INVALID_PARAMS`) with nothing written — never half a plan, never a
//! saturated value.

mod answer;

pub use answer::{matches, value_json};
pub use closedloop_driver::contract::WriteError;
use closedloop_driver::{Value, Write};
use closedloop_plant::{Scope, WriteEntry};
use std::fmt;

/// One request of an evaluated plan, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A coil or register write (sim, Modbus).
    Register(Write),
    /// An MQTT publish: never retained, expiring at the command's deadline.
    Publish(Publish),
    /// A CAN frame encoded from a DBC message.
    Can(CanWrite),
    /// An OPC UA variable write (in the node's own data type).
    OpcuaWrite {
        /// NodeId.
        node: String,
        /// The value.
        value: Value,
    },
    /// An OPC UA method call.
    OpcuaCall {
        /// The object the method is called on.
        object: String,
        /// The method's NodeId.
        method: String,
        /// Its arguments.
        args: Vec<Value>,
    },
}

/// A CAN frame ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct CanWrite {
    /// The DBC message it encodes.
    pub message: String,
    /// The frame.
    pub frame: closedloop_can::Frame,
    /// Re-sent at this period while the command runs (CAN actuators often want cyclic frames).
    pub cycle_ms: Option<u64>,
}

impl fmt::Display for CanWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex: String = self.frame.data.iter().map(|b| format!("{b:02X}")).collect();
        write!(f, "CAN {} 0x{:X} [{hex}]", self.message, self.frame.id)?;
        if let Some(ms) = self.cycle_ms {
            write!(f, " every {ms} ms")?;
        }
        Ok(())
    }
}

/// An MQTT publish with its payload rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// Topic.
    pub topic: String,
    /// Rendered payload.
    pub payload: String,
    /// QoS 0 or 1.
    pub qos: u8,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Register(w) => write!(f, "{w}"),
            Request::Publish(p) => write!(f, "publish {} {} (QoS {})", p.topic, p.payload, p.qos),
            Request::Can(c) => write!(f, "{c}"),
            Request::OpcuaWrite { node, value } => write!(f, "write {node} = {value}"),
            Request::OpcuaCall { method, args, .. } => {
                let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                write!(f, "call {method}({})", args.join(", "))
            }
        }
    }
}

impl Request {
    /// The register write, if this is one.
    pub fn as_register(&self) -> Option<&Write> {
        match self {
            Request::Register(w) => Some(w),
            _ => None,
        }
    }
}

/// Why a plan could not be built.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Evaluates and encodes every entry of a plan. An MQTT payload's `${command_id}` comes from the
/// scope's `extra_strings`; CAN entries are encoded through the device's `dbc`. Nothing is sent
/// unless every entry encodes.
pub fn evaluate(
    entries: &[WriteEntry],
    scope: &Scope<'_>,
    dbc: Option<&closedloop_can::Dbc>,
) -> Result<Vec<Request>, PlanError> {
    entries.iter().map(|e| request(e, scope, dbc)).collect()
}

/// One entry of a plan, evaluated and encoded.
fn request(
    entry: &WriteEntry,
    scope: &Scope<'_>,
    dbc: Option<&closedloop_can::Dbc>,
) -> Result<Request, PlanError> {
    match entry {
        WriteEntry::Register {
            area,
            address,
            encoding,
            value,
        } => register(*area, *address, encoding, value, scope),
        WriteEntry::Mqtt {
            topic,
            payload,
            qos,
        } => {
            let payload = payload.render(scope).map_err(|e| {
                PlanError(format!(
                    "mqtt {topic}: the payload could not be rendered: {e}"
                ))
            })?;
            Ok(Request::Publish(Publish {
                topic: topic.clone(),
                payload,
                qos: *qos,
            }))
        }
        WriteEntry::Can {
            message,
            signals,
            cycle_ms,
        } => can_frame(message, signals, *cycle_ms, scope, dbc),
        WriteEntry::OpcuaNode { node, value } => {
            let v = value.eval(scope).map_err(|e| {
                PlanError(format!(
                    "{node}: `{}` could not be evaluated: {e}",
                    value.source()
                ))
            })?;
            Ok(Request::OpcuaWrite {
                node: node.clone(),
                value: v,
            })
        }
        WriteEntry::OpcuaMethod {
            method,
            object,
            args,
        } => {
            let args = args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    a.eval(scope).map_err(|e| {
                        PlanError(format!(
                            "call {method}: argument {i} `{}` could not be evaluated: {e}",
                            a.source()
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(Request::OpcuaCall {
                object: object.clone(),
                method: method.clone(),
                args,
            })
        }
        other => Err(PlanError(format!(
            "write entry {} is not one this build can send",
            other.describe()
        ))),
    }
}

/// A register or coil write: a coil takes a bool or exactly 0 or 1, a register the value
/// encoded as the entry declares (refused, never saturated).
fn register(
    area: closedloop_driver::Area,
    address: u16,
    encoding: &closedloop_driver::Encoding,
    value: &closedloop_plant::Expr,
    scope: &Scope<'_>,
) -> Result<Request, PlanError> {
    let v = value.eval(scope).map_err(|e| {
        PlanError(format!(
            "{area}:{address}: `{}` could not be evaluated: {e}",
            value.source()
        ))
    })?;
    if !area.is_bit() {
        let words = encoding.encode(v).map_err(|e| {
            PlanError(format!(
                "{area}:{address} cannot take `{}` = {v}: {e}",
                value.source()
            ))
        })?;
        return Ok(Request::Register(Write::Registers {
            start: address,
            values: words,
        }));
    }
    // A coil takes a bool, or exactly 0 or 1: 0.3 is a mistake, not "on".
    if let closedloop_driver::Value::Number(n) = v
        && n != 0.0
        && n != 1.0
    {
        return Err(PlanError(format!(
            "{area}:{address} is a coil and cannot take `{}` = {n}; give true/false or 0/1",
            value.source()
        )));
    }
    Ok(Request::Register(Write::Coils {
        start: address,
        values: vec![v.as_bool()],
    }))
}

/// A CAN frame: every signal evaluated and encoded into its message through the device's DBC.
fn can_frame(
    message: &str,
    signals: &[(String, closedloop_plant::Expr)],
    cycle_ms: Option<u64>,
    scope: &Scope<'_>,
    dbc: Option<&closedloop_can::Dbc>,
) -> Result<Request, PlanError> {
    let dbc = dbc.ok_or_else(|| PlanError(format!("CAN {message}: the device has no DBC file")))?;
    let msg = crate::device::can::find_message(dbc, message).map_err(PlanError)?;
    let mut values = std::collections::BTreeMap::new();
    for (name, expr) in signals {
        let v = expr.eval(scope).map_err(|e| {
            PlanError(format!(
                "CAN {message} {name}: `{}` could not be evaluated: {e}",
                expr.source()
            ))
        })?;
        values.insert(name.clone(), v.as_f64());
    }
    let data = closedloop_can::encode(msg, &values)
        .map_err(|e| PlanError(format!("CAN {message}: {e}")))?;
    Ok(Request::Can(CanWrite {
        message: msg.name().to_string(),
        frame: closedloop_can::Frame::data(msg.id(), msg.extended(), data),
        cycle_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_driver::Data;

    #[test]
    fn a_coil_takes_a_bool_or_exactly_zero_or_one() {
        use closedloop_driver::Encoding;
        use closedloop_plant::{Expr, Params, Scope};
        let signals = std::collections::BTreeMap::new();
        let devices = std::collections::BTreeMap::new();
        let params = Params::new();
        let scope = Scope {
            signals: &signals,
            params: &params,
            devices: &devices,
            extra_strings: &[],
        };
        let entry = |src: &str| WriteEntry::Register {
            area: closedloop_driver::Area::Coil,
            address: 0,
            encoding: Encoding::default(),
            value: Expr::compile(src).expect("compiles"),
        };
        assert_eq!(
            evaluate(&[entry("1.0")], &scope, None).unwrap(),
            vec![Request::Register(Write::Coils {
                start: 0,
                values: vec![true]
            })]
        );
        assert_eq!(
            evaluate(&[entry("true")], &scope, None).unwrap(),
            vec![Request::Register(Write::Coils {
                start: 0,
                values: vec![true]
            })]
        );
        let e = evaluate(&[entry("0.3")], &scope, None).unwrap_err();
        assert!(e.0.contains("coil"), "{e}");
    }

    #[test]
    fn an_mqtt_payload_renders_params_and_the_command_id() {
        use closedloop_plant::{ParamValue, Params, Scope, Template};
        let signals = std::collections::BTreeMap::new();
        let devices = std::collections::BTreeMap::new();
        let mut params = Params::new();
        params.insert("on".into(), ParamValue::Bool(true));
        let scope = Scope {
            signals: &signals,
            params: &params,
            devices: &devices,
            extra_strings: &[("command_id", "0193abc")],
        };
        let entry = WriteEntry::Mqtt {
            topic: "lab/lamp/set".into(),
            payload: Template::compile(r#"{"on": ${params.on}, "id": "${command_id}"}"#)
                .expect("compiles"),
            qos: 1,
        };
        assert_eq!(
            evaluate(&[entry], &scope, None).unwrap(),
            vec![Request::Publish(Publish {
                topic: "lab/lamp/set".into(),
                payload: r#"{"on": true, "id": "0193abc"}"#.into(),
                qos: 1,
            })]
        );
    }

    #[test]
    fn readback_compares_exactly() {
        let wr = Write::Registers {
            start: 0,
            values: vec![1, 2],
        };
        assert!(matches(&Data::Words(vec![1, 2]), &wr));
        assert!(!matches(&Data::Words(vec![1, 3]), &wr));
        assert!(!matches(&Data::Bits(vec![true]), &wr));
    }
}
