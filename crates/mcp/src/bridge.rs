//! Bridge tools for devices declared `raw_access = true` (commissioning, diagnosis), all
//! read-only: `can_signals` and `can_decode` show what a CAN bus carries through the device's DBC;
//! `opcua_browse` and `opcua_read` show an OPC UA server's address space and values.

use crate::Server;
use crate::raw::{device_arg, refused};
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

/// The CAN devices the bridge tools may name.
fn can_devices(plant: &closedloop_plant::Plant) -> Vec<&str> {
    plant
        .devices
        .iter()
        .filter(|d| d.raw_access && d.driver.kind() == "can")
        .map(|d| d.id.as_str())
        .collect()
}

/// The OPC UA devices the bridge tools may name.
fn opcua_devices(plant: &closedloop_plant::Plant) -> Vec<&str> {
    plant
        .devices
        .iter()
        .filter(|d| d.raw_access && d.driver.kind() == "opcua")
        .map(|d| d.id.as_str())
        .collect()
}

/// Whether `name` is a bridge tool this plant offers.
pub(crate) fn offered(plant: &closedloop_plant::Plant, name: &str) -> bool {
    match name {
        "can_signals" | "can_decode" => !can_devices(plant).is_empty(),
        "opcua_browse" | "opcua_read" => !opcua_devices(plant).is_empty(),
        _ => false,
    }
}

/// The bridge tools of the plant's `raw_access` CAN and OPC UA devices.
pub(crate) fn tools(plant: &closedloop_plant::Plant) -> Vec<Tool> {
    let mut out = can_tools(plant);
    out.extend(opcua_tools(plant));
    out
}

fn read_only() -> Option<ToolAnnotations> {
    Some(ToolAnnotations::from_raw(
        None,
        Some(true),
        Some(false),
        Some(true),
        Some(false),
    ))
}

fn opcua_tools(plant: &closedloop_plant::Plant) -> Vec<Tool> {
    let ids = opcua_devices(plant);
    if ids.is_empty() {
        return vec![];
    }
    let obj = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut browse = Tool::new(
        "opcua_browse",
        "List the nodes of an OPC UA device's address space below a node (the Objects folder by default), with their node ids, classes and data types; 200 nodes a page, `truncated` says a next page exists. Read-only.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "node": {"type": "string", "default": "i=85", "description": "Start node id, e.g. \"ns=2;s=Pump1\"."},
                "depth": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
                "page": {"type": "integer", "minimum": 0, "maximum": 49, "default": 0, "description": "Page of 200 nodes; ask for the next while `truncated` is true."}
            },
            "required": ["device"],
            "additionalProperties": false
        })),
    );
    browse.annotations = read_only();
    let mut read = Tool::new(
        "opcua_read",
        "Read the values of OPC UA nodes of a device, each with its status (only Good values are trustworthy) and source time. Read-only.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "nodes": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 50}
            },
            "required": ["device", "nodes"],
            "additionalProperties": false
        })),
    );
    read.annotations = read_only();
    vec![browse, read]
}

fn can_tools(plant: &closedloop_plant::Plant) -> Vec<Tool> {
    let ids = can_devices(plant);
    if ids.is_empty() {
        return vec![];
    }
    let obj = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut signals = Tool::new(
        "can_signals",
        "Every signal of a CAN device's DBC file (or only the named ones) with its latest value on the bus, its unit and its age in seconds; a signal whose message has not been seen has value null, and one whose last frame carried a raw value the DBC labels not available (SNA) has value null and says so in not_available. Read-only.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "names": {"type": "array", "items": {"type": "string"}, "description": "DBC signal names; all when absent."}
            },
            "required": ["device"],
            "additionalProperties": false
        })),
    );
    signals.annotations = read_only();
    let mut decode = Tool::new(
        "can_decode",
        "Decode one CAN frame through a device's DBC file: the message its id names and each signal's physical value and unit (null, with not_available, for a raw value the DBC labels not available). Read-only; nothing is sent.",
        obj(json!({
            "type": "object",
            "properties": {
                "device": {"type": "string", "enum": ids},
                "id": {"type": "integer", "minimum": 0, "maximum": 536870911, "description": "Frame id (standard ids are tried first)."},
                "data_hex": {"type": "string", "pattern": "^([0-9A-Fa-f]{2})*$", "maxLength": 128, "description": "Payload bytes in hex, e.g. \"0102A0\"."}
            },
            "required": ["device", "id", "data_hex"],
            "additionalProperties": false
        })),
    );
    decode.annotations = read_only();
    vec![signals, decode]
}

/// Parses `"0102A0"` into bytes.
fn hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return Err(format!(
            "data_hex {s:?} has an odd number of digits; give two per byte"
        ));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
                .ok_or_else(|| format!("data_hex {s:?} is not hex"))
        })
        .collect()
}

impl Server {
    /// `opcua_browse` and `opcua_read`.
    pub(crate) async fn opcua_tool(
        &self,
        name: &str,
        args: &JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let device = device_arg(args)?;
        if name == "opcua_browse" {
            let node = args.get("node").and_then(Value::as_str).unwrap_or("i=85");
            let depth = bounded(args, "depth", 1, 1..=5, "depth must be 1 to 5")? as u32;
            let page = bounded(args, "page", 0, 0..=49, "page must be 0 to 49")? as usize;
            return Ok(self.opcua_browse(&device, node, depth, page).await);
        }
        let nodes: Vec<String> = args
            .get("nodes")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect())
            .ok_or_else(|| McpError::invalid_params("nodes must be an array of node ids", None))?;
        Ok(self.opcua_read(&device, &nodes).await)
    }

    /// `opcua_browse` once its arguments are valid: one page of nodes, indented by depth.
    async fn opcua_browse(
        &self,
        device: &str,
        node: &str,
        depth: u32,
        page: usize,
    ) -> CallToolResult {
        let browsed = match self.bridge_link(device) {
            Ok((link, _)) => {
                closedloop_connect::bridge::opcua_browse(&*link, node, depth, page).await
            }
            Err(e) => Err(e),
        };
        let b = match browsed {
            Ok(b) => b,
            Err(e) => return refused(device, e),
        };
        let entries: Vec<Value> = b
            .entries
            .iter()
            .map(|e| json!({"node_id": e.node_id, "browse_name": e.browse_name, "display_name": e.display_name,
                            "node_class": e.node_class, "data_type": e.data_type, "depth": e.depth}))
            .collect();
        let text = b
            .entries
            .iter()
            .map(|e| {
                format!(
                    "{}{} {} ({})",
                    "  ".repeat(e.depth.saturating_sub(1) as usize),
                    e.node_id,
                    e.display_name,
                    e.node_class
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = CallToolResult::structured(
            json!({"device": device, "node": node, "page": page, "entries": entries, "truncated": b.truncated}),
        );
        out.content = vec![ContentBlock::text(text)];
        out
    }

    /// `opcua_read` once its arguments are valid: each node's value and status.
    async fn opcua_read(&self, device: &str, nodes: &[String]) -> CallToolResult {
        let read = match self.bridge_link(device) {
            Ok((link, _)) => closedloop_connect::bridge::opcua_read(&*link, nodes).await,
            Err(e) => Err(e),
        };
        let values = match read {
            Ok(values) => values,
            Err(e) => return refused(device, e),
        };
        let text = values
            .iter()
            .map(|v| {
                format!(
                    "{} = {} ({})",
                    v.node,
                    v.value.clone().unwrap_or(Value::Null),
                    v.status
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = CallToolResult::structured(json!({"device": device, "values": values}));
        out.content = vec![ContentBlock::text(text)];
        out
    }

    /// `can_signals` and `can_decode`.
    pub(crate) fn bridge_tool(
        &self,
        name: &str,
        args: &JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let device = device_arg(args)?;
        if name == "can_signals" {
            let names = signal_names(args)?;
            return Ok(self.can_signals(&device, names.as_deref()));
        }
        let id = args
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n < (1 << 29))
            .ok_or_else(|| McpError::invalid_params("id must be an integer below 2^29", None))?;
        let data = args
            .get("data_hex")
            .and_then(Value::as_str)
            .ok_or_else(|| McpError::invalid_params("data_hex is required", None))
            .and_then(|s| hex_bytes(s).map_err(|m| McpError::invalid_params(m, None)))?;
        Ok(self.can_decode(&device, id, &data))
    }

    /// `can_signals` once its arguments are valid: each signal's latest value and age.
    fn can_signals(&self, device: &str, names: Option<&[String]>) -> CallToolResult {
        let list = match self
            .bridge_link(device)
            .and_then(|(link, now)| closedloop_connect::bridge::can_signals(&*link, now, names))
        {
            Ok(list) => list,
            Err(e) => return refused(device, e),
        };
        let text = list
            .iter()
            .map(|s| match (s.value, &s.not_available, s.age_s) {
                (Some(v), _, Some(age)) => format!("{} = {v} {} ({age:.1} s ago)", s.name, s.unit),
                (None, Some(na), Some(age)) => {
                    format!("{} = not available: {na} ({age:.1} s ago)", s.name)
                }
                _ => format!("{} = (not seen yet)", s.name),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = CallToolResult::structured(json!({"device": device, "signals": list}));
        out.content = vec![ContentBlock::text(text)];
        out
    }

    /// `can_decode` once its arguments are valid: the frame's message and signals.
    fn can_decode(&self, device: &str, id: u32, data: &[u8]) -> CallToolResult {
        let d = match self
            .bridge_link(device)
            .and_then(|(link, _)| closedloop_connect::bridge::can_decode(&*link, id, data))
        {
            Ok(d) => d,
            Err(e) => return refused(device, e),
        };
        let text = (d.signals.iter())
            .map(|s| match (s.value, &s.not_available) {
                (Some(v), _) => format!("{} = {v} {}", s.name, s.unit),
                (None, na) => format!(
                    "{} = not available: {}",
                    s.name,
                    na.as_deref().unwrap_or("")
                ),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut out = CallToolResult::structured(json!({
            "device": device, "message": d.message, "id": d.id, "extended": d.extended, "signals": d.signals
        }));
        out.content = vec![ContentBlock::text(format!("{}: {text}", d.message))];
        out
    }
}

/// An optional integer argument within `range` (`default` when absent or null), else `msg`.
fn bounded(
    args: &JsonObject,
    key: &str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
    msg: &'static str,
) -> Result<u64, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_u64()
            .filter(|n| range.contains(n))
            .ok_or_else(|| McpError::invalid_params(msg, None)),
    }
}

impl Server {
    /// The link of a `raw_access` device for a bridge tool, and the engine's time now.
    fn bridge_link(
        &self,
        device: &str,
    ) -> Result<(Arc<dyn closedloop_engine::Link>, i64), closedloop_engine::RawError> {
        self.engine.raw_access_link(device)
    }
}

/// The optional `names` of `can_signals`: every signal when absent.
fn signal_names(args: &JsonObject) -> Result<Option<Vec<String>>, McpError> {
    match args.get("names") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .map(Some)
            .ok_or_else(|| McpError::invalid_params("names must be strings", None)),
        Some(_) => Err(McpError::invalid_params(
            "names must be an array of signal names",
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_payloads() {
        assert_eq!(hex_bytes("0102a0"), Ok(vec![1, 2, 0xA0]));
        assert_eq!(hex_bytes(""), Ok(vec![]));
        assert!(hex_bytes("012").unwrap_err().contains("odd"));
        assert!(hex_bytes("zz").unwrap_err().contains("not hex"));
    }
}
