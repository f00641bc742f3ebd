//! Pure conversion between OPC UA variants and the engine's [`Value`] (bool or f64).
//!
//! Reading is lossless for the engine's purposes: every numeric variant becomes an f64
//! (docs/plant-file.md: every number is a double), Boolean stays a bool, anything else is no value
//! but is named. Writing goes the other way and is strict: the variant must be the node's own data
//! type (an Int16 node gets an Int16), numbers are rounded to the nearest integer for integer
//! types, and a value the type cannot hold (40000 for an Int16, NaN, 1e39 for a Float) is an error
//! — never saturated, because a saturated setpoint is a silent lie about what was commanded.

use closedloop_contract::Value;
use opcua::types::{DateTime, NodeId, Variant};

/// The scalar types closedloop can write; the OPC UA built-in types with ids 1–11.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scalar {
    Boolean,
    SByte,
    Byte,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float,
    Double,
}

impl Scalar {
    /// The type of a DataType attribute, when it is a built-in scalar (or Duration, a Double).
    pub fn from_data_type(id: &NodeId) -> Option<Scalar> {
        if id.namespace != 0 {
            return None;
        }
        let opcua::types::Identifier::Numeric(n) = id.identifier else {
            return None;
        };
        Some(match n {
            1 => Scalar::Boolean,
            2 => Scalar::SByte,
            3 => Scalar::Byte,
            4 => Scalar::Int16,
            5 => Scalar::UInt16,
            6 => Scalar::Int32,
            7 => Scalar::UInt32,
            8 => Scalar::Int64,
            9 => Scalar::UInt64,
            10 => Scalar::Float,
            11 | 290 => Scalar::Double,
            _ => return None,
        })
    }

    /// The type of a value the node holds now: the fallback when its DataType is abstract
    /// (Number, Integer) or a subtype closedloop does not know.
    pub fn from_variant(v: &Variant) -> Option<Scalar> {
        Some(match v {
            Variant::Boolean(_) => Scalar::Boolean,
            Variant::SByte(_) => Scalar::SByte,
            Variant::Byte(_) => Scalar::Byte,
            Variant::Int16(_) => Scalar::Int16,
            Variant::UInt16(_) => Scalar::UInt16,
            Variant::Int32(_) => Scalar::Int32,
            Variant::UInt32(_) => Scalar::UInt32,
            Variant::Int64(_) => Scalar::Int64,
            Variant::UInt64(_) => Scalar::UInt64,
            Variant::Float(_) => Scalar::Float,
            Variant::Double(_) => Scalar::Double,
            _ => return None,
        })
    }

    /// The OPC UA name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Scalar::Boolean => "Boolean",
            Scalar::SByte => "SByte",
            Scalar::Byte => "Byte",
            Scalar::Int16 => "Int16",
            Scalar::UInt16 => "UInt16",
            Scalar::Int32 => "Int32",
            Scalar::UInt32 => "UInt32",
            Scalar::Int64 => "Int64",
            Scalar::UInt64 => "UInt64",
            Scalar::Float => "Float",
            Scalar::Double => "Double",
        }
    }

    /// `value` as a variant of this type, or why it cannot be one.
    pub fn encode(self, value: Value) -> Result<Variant, String> {
        let x = value.as_f64();
        if !x.is_finite() {
            return Err(format!("{x} is not a finite number"));
        }
        let int = |min: f64, max: f64| -> Result<f64, String> {
            let r = x.round();
            if r < min || r > max {
                Err(format!("{x} is outside {min}..={max}"))
            } else {
                Ok(r)
            }
        };
        Ok(match self {
            Scalar::Boolean => return encode_bool(value),
            Scalar::SByte => Variant::SByte(int(-128.0, 127.0)? as i8),
            Scalar::Byte => Variant::Byte(int(0.0, 255.0)? as u8),
            Scalar::Int16 => Variant::Int16(int(-32768.0, 32767.0)? as i16),
            Scalar::UInt16 => Variant::UInt16(int(0.0, 65535.0)? as u16),
            Scalar::Int32 => Variant::Int32(int(-2_147_483_648.0, 2_147_483_647.0)? as i32),
            Scalar::UInt32 => Variant::UInt32(int(0.0, 4_294_967_295.0)? as u32),
            // The bounds are the nearest doubles inside the range (2^63 itself does not fit).
            Scalar::Int64 => {
                Variant::Int64(int(-9.223_372_036_854_776e18, 9.223_372_036_854_775e18)? as i64)
            }
            Scalar::UInt64 => Variant::UInt64(int(0.0, 1.844_674_407_370_955e19)? as u64),
            Scalar::Float => {
                if x.abs() > f64::from(f32::MAX) {
                    return Err(format!("{x} is outside the range of a Float"));
                }
                Variant::Float(x as f32)
            }
            Scalar::Double => Variant::Double(x),
        })
    }
}

/// A Boolean node takes a bool, or a number that is exactly 0 or 1.
fn encode_bool(value: Value) -> Result<Variant, String> {
    match value {
        Value::Bool(b) => Ok(Variant::Boolean(b)),
        Value::Number(0.0) => Ok(Variant::Boolean(false)),
        Value::Number(1.0) => Ok(Variant::Boolean(true)),
        Value::Number(n) => Err(format!("{n} is not a boolean (only 0 and 1 are)")),
    }
}

/// A received variant as the engine's value, with the variant's type named: numbers → f64,
/// Boolean → bool, anything else → `None` (a String, a structure, an array).
pub(crate) fn decode(v: &Variant) -> (Option<Value>, String) {
    let number = |n: f64| Some(Value::Number(n));
    let value = match v {
        Variant::Boolean(b) => Some(Value::Bool(*b)),
        Variant::SByte(n) => number(f64::from(*n)),
        Variant::Byte(n) => number(f64::from(*n)),
        Variant::Int16(n) => number(f64::from(*n)),
        Variant::UInt16(n) => number(f64::from(*n)),
        Variant::Int32(n) => number(f64::from(*n)),
        Variant::UInt32(n) => number(f64::from(*n)),
        Variant::Int64(n) => number(*n as f64),
        Variant::UInt64(n) => number(*n as f64),
        Variant::Float(n) => number(f64::from(*n)),
        Variant::Double(n) => number(*n),
        _ => None,
    };
    (value, variant_type_name(v))
}

/// The built-in type name of a variant (`Double`, `String`, `Array of Int16`, `Empty`).
pub(crate) fn variant_type_name(v: &Variant) -> String {
    match v {
        Variant::Array(a) => format!("Array of {:?}", a.value_type),
        other => format!("{:?}", other.type_id())
            .trim_start_matches("Scalar(")
            .trim_end_matches(')')
            .to_string(),
    }
}

/// A DataType node id as a name: the built-in types by name, others as their node id.
pub(crate) fn data_type_name(id: &NodeId) -> String {
    match Scalar::from_data_type(id) {
        Some(s) if !matches!(id.identifier, opcua::types::Identifier::Numeric(290)) => {
            s.name().to_string()
        }
        _ => {
            if id.namespace == 0
                && let opcua::types::Identifier::Numeric(n) = id.identifier
            {
                let known = match n {
                    12 => Some("String"),
                    13 => Some("DateTime"),
                    14 => Some("Guid"),
                    15 => Some("ByteString"),
                    17 => Some("NodeId"),
                    19 => Some("StatusCode"),
                    20 => Some("QualifiedName"),
                    21 => Some("LocalizedText"),
                    22 => Some("Structure"),
                    24 => Some("BaseDataType"),
                    26 => Some("Number"),
                    27 => Some("Integer"),
                    28 => Some("UInteger"),
                    29 => Some("Enumeration"),
                    290 => Some("Duration"),
                    294 => Some("UtcTime"),
                    _ => None,
                };
                if let Some(k) = known {
                    return k.to_string();
                }
            }
            id.to_string()
        }
    }
}

/// Milliseconds since the Unix epoch; `None` for the null (unset) time.
pub(crate) fn unix_ms(t: &DateTime) -> Option<i64> {
    if t.is_null() {
        None
    } else {
        Some(t.as_chrono().timestamp_millis())
    }
}

/// A method output as JSON: booleans, numbers (non-finite → null), strings, arrays; other types
/// as their text form.
pub(crate) fn to_json(v: &Variant) -> serde_json::Value {
    use serde_json::Value as J;
    if let (Some(value), _) = decode(v) {
        return match value {
            Value::Bool(b) => J::Bool(b),
            Value::Number(n) => serde_json::Number::from_f64(n).map_or(J::Null, J::Number),
        };
    }
    match v {
        Variant::Empty => J::Null,
        Variant::String(s) => s.value().clone().map_or(J::Null, J::String),
        Variant::LocalizedText(t) => J::String(t.text.to_string()),
        Variant::StatusCode(s) => J::String(crate::error::status_name(*s)),
        Variant::Array(a) => J::Array(a.values.iter().map(to_json).collect()),
        other => J::String(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_numeric_variant_reads_as_a_double() {
        assert_eq!(decode(&Variant::Int16(-3)).0, Some(Value::Number(-3.0)));
        assert_eq!(decode(&Variant::UInt64(7)).0, Some(Value::Number(7.0)));
        assert_eq!(decode(&Variant::Float(1.5)).0, Some(Value::Number(1.5)));
        assert_eq!(decode(&Variant::Boolean(true)).0, Some(Value::Bool(true)));
        let (v, ty) = decode(&Variant::from("text"));
        assert_eq!(v, None);
        assert_eq!(ty, "String");
        assert_eq!(decode(&Variant::Empty).1, "Empty");
    }

    #[test]
    fn writes_take_the_node_type_and_never_saturate() {
        assert_eq!(
            Scalar::Int16.encode(Value::Number(300.0)),
            Ok(Variant::Int16(300))
        );
        assert_eq!(
            Scalar::Int16.encode(Value::Number(2.6)),
            Ok(Variant::Int16(3))
        );
        assert!(Scalar::Int16.encode(Value::Number(40000.0)).is_err());
        assert!(Scalar::Byte.encode(Value::Number(-1.0)).is_err());
        assert!(Scalar::Double.encode(Value::Number(f64::NAN)).is_err());
        assert!(Scalar::Float.encode(Value::Number(1e39)).is_err());
        assert_eq!(
            Scalar::Float.encode(Value::Number(0.5)),
            Ok(Variant::Float(0.5))
        );
        assert_eq!(
            Scalar::UInt32.encode(Value::Bool(true)),
            Ok(Variant::UInt32(1))
        );
        assert_eq!(
            Scalar::Boolean.encode(Value::Number(1.0)),
            Ok(Variant::Boolean(true))
        );
        assert!(Scalar::Boolean.encode(Value::Number(2.0)).is_err());
        assert!(Scalar::Int64.encode(Value::Number(9.3e18)).is_err());
        assert!(Scalar::UInt64.encode(Value::Number(1.9e19)).is_err());
    }

    #[test]
    fn data_types_map_to_scalars_and_names() {
        assert_eq!(
            Scalar::from_data_type(&NodeId::new(0, 4u32)),
            Some(Scalar::Int16)
        );
        assert_eq!(
            Scalar::from_data_type(&NodeId::new(0, 290u32)),
            Some(Scalar::Double)
        );
        assert_eq!(Scalar::from_data_type(&NodeId::new(0, 12u32)), None);
        assert_eq!(Scalar::from_data_type(&NodeId::new(2, 4u32)), None);
        assert_eq!(data_type_name(&NodeId::new(0, 11u32)), "Double");
        assert_eq!(data_type_name(&NodeId::new(0, 290u32)), "Duration");
        assert_eq!(data_type_name(&NodeId::new(0, 12u32)), "String");
        assert_eq!(data_type_name(&NodeId::new(3, 7u32)), "ns=3;i=7");
    }

    #[test]
    fn outputs_become_json() {
        assert_eq!(to_json(&Variant::Double(2.5)), serde_json::json!(2.5));
        assert_eq!(to_json(&Variant::from("ok")), serde_json::json!("ok"));
        assert_eq!(to_json(&Variant::Empty), serde_json::Value::Null);
    }
}
