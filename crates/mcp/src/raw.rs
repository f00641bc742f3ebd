//! `modbus_read` and `modbus_write`: raw register tools for devices declared `raw_access = true`
//! (commissioning, diagnosis). Reads — of every raw and bridge tool, Modbus, CAN and OPC UA
//! ([`gate`]) — need `admin` or `actuate:<device>`, writes `admin`; every write is journaled with its caller. A raw write is not a
//! command: nothing confirms its effect, and the result says so.

use crate::Server;
use closedloop_contract::{Area, Write};
use closedloop_engine::RawError;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

/// The raw tools, when some device allows raw access.
pub(crate) fn tools(plant: &closedloop_plant::Plant) -> Vec<Tool> {
    let ids: Vec<&str> = plant
        .devices
        .iter()
        .filter(|d| d.raw_access && d.driver.is_register_based())
        .map(|d| d.id.as_str())
        .collect();
    if ids.is_empty() {
        return vec![];
    }
    let obj = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut read = Tool::new(
        "modbus_read",
        "Read raw coils, discrete inputs, holding or input registers of a device that allows raw access; declared signals in the block are also shown in engineering units.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "area": {"type": "string", "enum": ["coil", "discrete_input", "holding", "input"]},
                "address": {"type": "integer", "minimum": 0, "maximum": 65535, "description": "0-based PDU address (holding 0 is 40001)."},
                "count": {"type": "integer", "minimum": 1, "maximum": 125, "default": 1}
            },
            "required": ["device", "area", "address"],
            "additionalProperties": false
        })),
    );
    read.annotations = Some(ToolAnnotations::from_raw(
        None,
        Some(true),
        Some(false),
        Some(true),
        Some(false),
    ));
    let mut write = Tool::new(
        "modbus_write",
        "Write raw coils or holding registers of a device that allows raw access and that no command holds. Only the device's acknowledgement is reported: nothing confirms the effect. Prefer the device's action tools, which do.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "area": {"type": "string", "enum": ["coil", "holding"]},
                "address": {"type": "integer", "minimum": 0, "maximum": 65535},
                "values": {"type": "array", "minItems": 1, "maxItems": 123,
                           "items": {"type": ["boolean", "integer"]},
                           "description": "Booleans for coils, 0–65535 for registers, written in one request."}
            },
            "required": ["device", "area", "address", "values"],
            "additionalProperties": false
        })),
    );
    write.annotations = Some(ToolAnnotations::from_raw(
        None,
        Some(false),
        Some(true),
        Some(true),
        Some(false),
    ));
    vec![read, write]
}

fn area_of(args: &JsonObject) -> Result<Area, McpError> {
    match args.get("area").and_then(Value::as_str) {
        Some("coil") => Ok(Area::Coil),
        Some("discrete_input") => Ok(Area::DiscreteInput),
        Some("holding") => Ok(Area::Holding),
        Some("input") => Ok(Area::Input),
        _ => Err(McpError::invalid_params(
            "area must be coil, discrete_input, holding or input",
            None,
        )),
    }
}

fn u16_of(args: &JsonObject, key: &str, default: Option<u16>) -> Result<u16, McpError> {
    match args.get(key) {
        None | Some(Value::Null) if default.is_some() => Ok(default.unwrap_or(0)),
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .ok_or_else(|| {
                McpError::invalid_params(format!("{key} must be an integer 0..=65535"), None)
            }),
        None => Err(McpError::invalid_params(format!("{key} is required"), None)),
    }
}

/// The `device` argument every raw and bridge tool takes.
pub(crate) fn device_arg(args: &JsonObject) -> Result<String, McpError> {
    args.get("device")
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params("device is required", None))
        .map(str::to_string)
}

/// The `isError` result of a raw or bridge call the engine (or the caller's scopes) refused.
pub(crate) fn refused(device: &str, e: RawError) -> CallToolResult {
    let v = json!({"device": device, "status": "rejected", "error_code": e.code.as_str(), "detail": e.detail, "hint": e.code.hint()});
    let mut r = CallToolResult::structured_error(v);
    r.content = vec![ContentBlock::text(format!(
        "Refused ({}): {}",
        e.code, e.detail
    ))];
    r
}

/// The raw and bridge tools of every protocol: Modbus registers, the CAN bus, the OPC UA address
/// space. Each goes past the plant's declared signals, so each needs more than `read`.
pub(crate) const RAW_TOOLS: [&str; 6] = [
    "modbus_read",
    "modbus_write",
    "can_signals",
    "can_decode",
    "opcua_browse",
    "opcua_read",
];

/// The one gate every raw and bridge tool call passes before anything is read or sent: the
/// refusal of a caller without the scope it needs, `None` when it has it (or `name` is no raw
/// tool). A read-only token once browsed and read any OPC UA node of any device.
pub(crate) fn gate(
    plant: &closedloop_plant::Plant,
    name: &str,
    args: &JsonObject,
    caller: &crate::Caller,
) -> Result<Option<CallToolResult>, McpError> {
    let offered = match name {
        "modbus_read" | "modbus_write" => plant.devices.iter().any(|d| d.raw_access),
        _ => crate::bridge::offered(plant, name),
    };
    if !RAW_TOOLS.contains(&name) || !offered {
        return Ok(None);
    }
    Ok(unauthorized(name, &device_arg(args)?, caller))
}

/// The refusal of a caller without the scope `name` needs on `device`. A raw write skips
/// requires, confirmation and supervision: only an administrator's token may send one. Reads
/// (registers, frames, nodes) need the device's actuate scope (or admin).
fn unauthorized(name: &str, device: &str, caller: &crate::Caller) -> Option<CallToolResult> {
    let allowed = match name {
        "modbus_write" => caller.is_admin(),
        _ => caller.may_actuate(device),
    };
    if allowed {
        return None;
    }
    let code = closedloop_engine::ErrorCode::Unauthorized;
    let need = if name == "modbus_write" {
        "admin".to_string()
    } else {
        format!("admin or actuate:{device}")
    };
    let detail = format!("{} needs {need} for {name}", caller.name);
    Some(refused(device, RawError { code, detail }))
}

/// The `values` of `modbus_write` as one write request to `area` (coils or holding registers).
fn write_of(args: &JsonObject, area: Area, address: u16) -> Result<Write, McpError> {
    let values = args
        .get("values")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| McpError::invalid_params("values must be a non-empty array", None))?;
    Ok(match area {
        Area::Coil => Write::Coils {
            start: address,
            values: values
                .iter()
                .map(|v| {
                    v.as_bool().ok_or_else(|| {
                        McpError::invalid_params("coil values must be booleans", None)
                    })
                })
                .collect::<Result<_, _>>()?,
        },
        Area::Holding => Write::Registers {
            start: address,
            values: values
                .iter()
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                        .ok_or_else(|| {
                            McpError::invalid_params(
                                "register values must be integers 0..=65535",
                                None,
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
        },
        _ => {
            return Err(McpError::invalid_params(
                "only coil and holding can be written",
                None,
            ));
        }
    })
}

impl Server {
    /// `modbus_read` and `modbus_write`.
    pub(crate) async fn raw_tool(
        &self,
        name: &str,
        args: &JsonObject,
        caller: &crate::Caller,
    ) -> Result<CallToolResult, McpError> {
        let device = device_arg(args)?;
        let area = area_of(args)?;
        let address = u16_of(args, "address", None)?;
        if name == "modbus_read" {
            let count = u16_of(args, "count", Some(1))?;
            return Ok(self.raw_read(&device, area, address, count).await);
        }
        let write = write_of(args, area, address)?;
        Ok(self.raw_write(&device, write, caller).await)
    }

    /// `modbus_read` once its arguments are valid: the raw values, and declared signals.
    async fn raw_read(&self, device: &str, area: Area, address: u16, count: u16) -> CallToolResult {
        match self.engine.raw_read(device, area, address, count).await {
            Ok(r) => {
                let text = format!("{device} {area}:{address} ×{count} = {}", r.values);
                let mut out =
                    CallToolResult::structured(serde_json::to_value(&r).unwrap_or_default());
                out.content = vec![ContentBlock::text(text)];
                out
            }
            Err(e) => refused(device, e),
        }
    }

    /// `modbus_write` once its arguments are valid: acknowledged at best, never verified.
    async fn raw_write(
        &self,
        device: &str,
        write: Write,
        caller: &crate::Caller,
    ) -> CallToolResult {
        match self
            .engine
            .raw_write(device, write.clone(), Some(caller.name.clone()))
            .await
        {
            Ok(()) => {
                let v = json!({"device": device, "written": write.to_string(), "acknowledged": true, "verified": false,
                           "hint": "The device acknowledged the write; nothing confirms its effect. Read it back or use an action tool."});
                let mut out = CallToolResult::structured(v);
                out.content = vec![ContentBlock::text(format!(
                    "Acknowledged, not verified: {device} {write}. Nothing confirms the effect."
                ))];
                out
            }
            Err(e) => refused(device, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_plant::TokenScope;

    fn plant() -> closedloop_plant::Plant {
        closedloop_plant::parse(
            r#"
[[device]]
id = "press"
description = "an OPC UA press"
driver = { kind = "opcua", endpoint = "opc.tcp://127.0.0.1:4841/", security = "none" }
raw_access = true
[device.signals]
running = { node = "ns=2;s=Running", type = "bool" }

[[device]]
id = "lamp"
description = "a Modbus lamp"
driver = { kind = "sim", model = "relay" }
raw_access = true
[device.signals]
contact = { discrete_input = 0 }
"#,
            "t.toml",
            std::path::Path::new("."),
        )
        .expect("plant parses")
    }

    fn caller(scopes: Vec<TokenScope>) -> crate::Caller {
        crate::Caller {
            name: "t".into(),
            scopes,
        }
    }

    fn args(device: &str) -> JsonObject {
        json!({"device": device, "node": "ns=0;i=85", "nodes": ["ns=2;s=Running"]})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    /// A read-only token once browsed and read any OPC UA node of any device: every raw and
    /// bridge tool needs admin or the device's scope, whichever protocol it speaks.
    #[test]
    fn every_raw_tool_needs_admin_or_the_devices_scope() {
        let plant = plant();
        let reader = caller(vec![TokenScope::Read]);
        let press = caller(vec![TokenScope::Read, TokenScope::Actuate("press".into())]);
        let admin = caller(vec![TokenScope::Admin]);
        let refused = |name: &str, device: &str, who: &crate::Caller| {
            gate(&plant, name, &args(device), who)
                .expect("valid arguments")
                .is_some()
        };
        for name in ["opcua_browse", "opcua_read"] {
            assert!(refused(name, "press", &reader), "{name} by a reader");
            assert!(
                !refused(name, "press", &press),
                "{name} by the press's scope"
            );
            assert!(!refused(name, "press", &admin), "{name} by admin");
        }
        assert!(refused("modbus_read", "lamp", &reader));
        assert!(
            refused("modbus_read", "lamp", &press),
            "another device's scope"
        );
        assert!(refused("modbus_write", "lamp", &press), "writes need admin");
        assert!(!refused("modbus_write", "lamp", &admin));
        assert!(!refused("list_devices", "lamp", &reader), "not a raw tool");
        // A bridge tool the plant does not offer (no CAN device) is left to the dispatcher.
        assert!(!refused("can_signals", "press", &reader));
    }
}
