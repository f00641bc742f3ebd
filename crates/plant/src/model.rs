//! The plant file as written: serde types with every key optional where the file may omit it.
//!
//! Each piece (server, device head, signal, action, write entry) is typed separately from the
//! generic TOML tree, so that an unknown key or a wrong type is reported with the device and the
//! key path it is in, and one bad piece does not hide the problems of the others.

use crate::action::Verification;
use crate::params::ParamType;
use crate::plant::ToolMode;
use closedloop_contract::{ValueType, WordOrder};
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServer {
    pub name: Option<String>,
    pub journal: Option<String>,
    #[serde(default)]
    pub token: Vec<RawToken>,
    pub tools: Option<ToolMode>,
    pub confirm_ttl_s: Option<f64>,
    pub default_wait_s: Option<f64>,
    pub retain: Option<String>,
    pub confirm_by: Option<Vec<String>>,
    pub lease_s: Option<f64>,
    pub otlp: Option<String>,
    pub journal_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToken {
    pub name: String,
    pub sha256: String,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// A device's own keys; `id`, `driver`, `sim`, signals and actions are taken out of the table
/// first and checked on their own, so that a typo here hides nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDeviceHead {
    #[serde(default)]
    pub description: String,
    pub poll_ms: Option<u64>,
    pub liveness: Option<RawLiveness>,
    #[serde(default)]
    pub raw_access: bool,
    pub max_rate: Option<String>,
    pub max_burst: Option<u32>,
    pub gateways: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLiveness {
    pub max_silence_s: Option<f64>,
    pub counter: Option<RawCounter>,
    pub status_topic: Option<String>,
    pub status_json: Option<String>,
    pub online: Option<String>,
    pub offline: Option<String>,
    pub reports_after_command: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCounter {
    pub holding: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModbusTcp {
    pub address: String,
    pub unit: Option<u8>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModbusRtu {
    pub port: String,
    pub baud: Option<u32>,
    pub parity: Option<String>,
    pub unit: Option<u8>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMqtt {
    pub broker: String,
    pub client_id: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub ca_file: Option<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSimCan {
    pub bus: String,
    pub dbc: String,
    pub status: String,
    pub command: String,
    pub period_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOpcua {
    pub endpoint: String,
    pub security: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub server_cert: Option<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCan {
    pub interface: String,
    pub bitrate: Option<u32>,
    pub dbc: String,
}

/// Address and encoding keys shared by signals and register write entries.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSignal {
    pub coil: Option<u16>,
    pub discrete_input: Option<u16>,
    pub holding: Option<u16>,
    pub input: Option<u16>,
    #[serde(rename = "type")]
    pub ty: Option<ValueType>,
    pub word_order: Option<WordOrder>,
    pub byte_swap: Option<bool>,
    pub bit: Option<u8>,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub unit: Option<String>,
    pub description: Option<String>,
    pub topic: Option<String>,
    pub json: Option<String>,
    pub time_json: Option<String>,
    pub true_values: Option<Vec<String>>,
    pub false_values: Option<Vec<String>>,
    pub node: Option<String>,
    pub message: Option<RawMessage>,
    pub signal: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAction {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub params: BTreeMap<String, RawParam>,
    pub requires: Option<RawExpr>,
    #[serde(default)]
    pub write: Vec<toml::Value>,
    pub done_when: Option<RawExpr>,
    #[serde(default)]
    pub fail_when: BTreeMap<String, RawExpr>,
    pub expect_s: Option<RawExpr>,
    #[serde(default)]
    pub cancel: Vec<toml::Value>,
    pub stopped_when: Option<RawExpr>,
    pub started_when: Option<RawExpr>,
    pub hold_ms: Option<u64>,
    pub idempotent: Option<bool>,
    pub verification: Option<Verification>,
    pub confirm: Option<bool>,
    pub checklist: Option<Vec<String>>,
    pub queue: Option<bool>,
    pub timeout_factor: Option<f64>,
    pub timeout_floor_ms: Option<u64>,
    pub queue_timeout_s: Option<f64>,
    pub exclusive: Option<String>,
    pub destructive: Option<bool>,
    pub max_rate: Option<String>,
    pub max_burst: Option<u32>,
    pub keepalive_s: Option<f64>,
    /// Requests a person might make for this action; read only by `closedloop lint --examples`.
    pub examples: Option<Vec<String>>,
    pub task: Option<crate::action::TaskSupport>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawParam {
    #[serde(rename = "type")]
    pub ty: ParamType,
    #[serde(rename = "enum")]
    pub choices: Option<Vec<String>>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub unit: Option<String>,
    pub description: Option<String>,
    pub ask: Option<String>,
}

/// Every key a write or cancel entry may have; the kind is decided by which address key is set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWrite {
    pub coil: Option<u16>,
    pub discrete_input: Option<u16>,
    pub holding: Option<u16>,
    pub input: Option<u16>,
    #[serde(rename = "type")]
    pub ty: Option<ValueType>,
    pub word_order: Option<WordOrder>,
    pub byte_swap: Option<bool>,
    pub bit: Option<u8>,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub value: Option<RawExpr>,
    pub topic: Option<String>,
    pub payload: Option<String>,
    pub qos: Option<u8>,
    pub node: Option<String>,
    pub method: Option<String>,
    pub object: Option<String>,
    pub args: Option<Vec<RawExpr>>,
    pub message: Option<RawMessage>,
    pub signals: Option<BTreeMap<String, RawExpr>>,
    pub cycle_ms: Option<u64>,
}

/// An expression as written: a CEL string, or a plain TOML number or bool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawExpr(pub String);

impl<'de> Deserialize<'de> for RawExpr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawExpr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a CEL expression (a string), a number or a bool")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawExpr, E> {
                Ok(RawExpr(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawExpr, E> {
                Ok(RawExpr(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawExpr, E> {
                Ok(RawExpr(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawExpr, E> {
                Ok(RawExpr(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawExpr, E> {
                if v.is_finite() {
                    Ok(RawExpr(format!("{v:?}")))
                } else {
                    Err(E::invalid_value(
                        de::Unexpected::Float(v),
                        &"a finite number",
                    ))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A CAN message: a DBC name or a numeric id (shown as `0x1F0`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawMessage(pub String);

impl<'de> Deserialize<'de> for RawMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawMessage;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a DBC message name or a numeric CAN id")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawMessage, E> {
                Ok(RawMessage(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawMessage, E> {
                u32::try_from(v)
                    .map(|id| RawMessage(format!("0x{id:X}")))
                    .map_err(|_| {
                        E::invalid_value(de::Unexpected::Signed(v), &"a CAN id of 0 or more")
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// Types one piece of the document, reporting errors at `prefix` (e.g. `signals.position_mm`).
pub(crate) fn typed<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
) -> Result<T, (String, String)> {
    typed_keys(value, prefix, &[])
}

/// [`typed`] of a piece the caller keeps: copied only when toml must type it (a mistake in it).
pub(crate) fn typed_ref<T: serde::de::DeserializeOwned>(
    value: &toml::Value,
    prefix: &str,
) -> Result<T, (String, String)> {
    match crate::borrowed::typed(value) {
        Some(typed) => Ok(typed),
        None => by_toml(value.clone(), value, prefix, &[]),
    }
}

/// [`typed`] for a table some of whose keys were taken out and checked before: `keys` lists
/// them, in the order to show, so that an unknown key's message names every valid key.
pub(crate) fn typed_keys<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
    keys: &[&str],
) -> Result<T, (String, String)> {
    match crate::borrowed::typed(&value) {
        Some(typed) => Ok(typed),
        // Kept to find the key path of an error again, array indices included.
        None => by_toml(value.clone(), &value, prefix, keys),
    }
}

/// toml's own typing of `value`, its error worded with the key path found again in `piece`.
fn by_toml<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    piece: &toml::Value,
    prefix: &str,
    keys: &[&str],
) -> Result<T, (String, String)> {
    value
        .try_into::<T>()
        .map_err(|e| crate::serde_msg::from_serde(&e, prefix, piece, keys))
}
