//! What a readback must match, and how a value shows on a timeline. A write's error in the
//! contract's words is the protocol crate's to say (`closedloop_driver::contract::register_write`,
//! `closedloop_mqtt::write_error`, `closedloop_opcua::write_error`, `closedloop_can::write_error`).

use closedloop_driver::{Data, Value, Write};

/// Whether a readback holds exactly what `w` wrote.
pub fn matches(data: &Data, w: &Write) -> bool {
    match (data, w) {
        (Data::Bits(b), Write::Coils { values, .. }) => b == values,
        (Data::Words(r), Write::Registers { values, .. }) => r == values,
        _ => false,
    }
}

/// A value as the JSON a timeline shows.
pub fn value_json(v: Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => serde_json::Value::Bool(b),
        Value::Number(n) => serde_json::json!(n),
    }
}
