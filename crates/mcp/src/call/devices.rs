//! The device tools: `list_devices`, `get_device_state`, `list_alarms` and, with
//! `[server] tools = "generic"`, `describe_device`.

use super::{opt_str, structured, unknown_device};
use crate::Server;
use closedloop_engine::DeviceInfo;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{Value, json};

impl Server {
    /// `list_devices(cursor?, limit?)`: one page of devices in plant order with their
    /// liveness, one line each in the text; `next_cursor` continues when more follow.
    pub(super) fn list_devices(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
        let total = self.engine.plant().devices.len();
        let limit = page_limit(args)?;
        let from = page_start(args, total)?;
        let devices = self.engine.devices(from, limit);
        let next = from + devices.len();
        let mut text = list_text(&devices);
        // Built by moving, not with `json!`: that would serialise the page into a copy.
        let devices = devices.into_iter().map(DeviceInfo::into_json).collect();
        let mut v = serde_json::Map::new();
        v.insert("devices".into(), Value::Array(devices));
        v.insert("total".into(), total.into());
        if next < total {
            v.insert("next_cursor".into(), next.to_string().into());
            text.push_str(&format!(
                "\n{} more of {total}: call list_devices with cursor \"{next}\".",
                total - next
            ));
        }
        Ok(structured(Value::Object(v), false, text))
    }

    /// `list_alarms`: every declared alarm; the text names the active ones.
    pub(super) fn list_alarms(&self) -> CallToolResult {
        let alarms = self.engine.alarms();
        let active: Vec<&str> = alarms
            .iter()
            .filter(|a| a.active)
            .map(|a| a.name.as_str())
            .collect();
        let text = match active.is_empty() {
            true => format!("No alarm is active ({} declared).", alarms.len()),
            false => format!("Active: {}.", active.join(", ")),
        };
        structured(json!({"alarms": alarms}), false, text)
    }

    /// `describe_device(device)`: what `tools/list` would have said about its actions.
    pub(super) fn describe_device(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
        let id = opt_str(args, "device")?
            .ok_or_else(|| McpError::invalid_params("device is required", None))?;
        let Some(device) = self.engine.plant().device(&id) else {
            return Ok(unknown_device(&self.engine, &id));
        };
        let liveness = self.engine.device_state(&id).map(|s| s.liveness);
        let wait_s = self.engine.plant().server.default_wait_s;
        let v = json!({
            "device": device.id,
            "description": device.description,
            "liveness": liveness,
            "signals": device.signals.iter().map(|s| json!({"name": s.name, "source": s.source.describe(), "unit": s.unit})).collect::<Vec<_>>(),
            "actions": device.actions.iter().map(|a| json!({
                "name": a.name,
                "description": a.tool_description(device, wait_s),
                "input_schema": a.input_schema(wait_s),
                "verification": a.effective_verification().as_str(),
                "idempotent": a.idempotent,
                "destructive": a.destructive,
                "confirm": a.confirm,
            })).collect::<Vec<_>>(),
        });
        let text = format!(
            "{}: {}. Actions: {}.",
            device.id,
            device.description,
            device
                .actions
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(structured(v, false, text))
    }

    pub(super) fn get_device_state(&self, args: &JsonObject) -> Result<CallToolResult, McpError> {
        let device = opt_str(args, "device")?
            .ok_or_else(|| McpError::invalid_params("device is required", None))?;
        let Some(state) = self.engine.device_state(&device) else {
            return Ok(unknown_device(&self.engine, &device));
        };
        let values: Vec<String> = state
            .signals
            .iter()
            .map(|(k, s)| {
                let unit = (s.unit.as_deref())
                    .map(|u| format!(" {u}"))
                    .unwrap_or_default();
                match (s.age_ms, s.retained) {
                    (Some(age), false) => format!("{k} = {}{unit} ({age} ms old)", s.value),
                    (Some(age), true) => {
                        format!("{k} = {}{unit} (retained, {age} ms old)", s.value)
                    }
                    (None, _) => format!("{k} = {}{unit} (retained, age unknown)", s.value),
                }
            })
            .collect();
        let mut text = format!("{device} is {}.", state.liveness.as_str());
        if !values.is_empty() {
            text.push_str(&format!(" {}.", values.join(", ")));
        }
        if let Some(d) = &state.detail {
            text.push_str(&format!(" {d}"));
        }
        if !state.alarms.is_empty() {
            text.push_str(&format!(
                " Blocked by the active alarm {}: it takes no command until the alarm clears (list_alarms says why).",
                state.alarms.join(", ")
            ));
        }
        Ok(structured(
            serde_json::to_value(&state).unwrap_or_default(),
            false,
            text,
        ))
    }
}

/// Devices on one page of `list_devices` unless the call asks for another size.
const PAGE: u64 = 20;
/// The largest page a call may ask for.
const PAGE_MAX: u64 = 1000;

/// `limit`: 1 to [`PAGE_MAX`], [`PAGE`] when absent.
fn page_limit(args: &JsonObject) -> Result<usize, McpError> {
    match args.get("limit") {
        None | Some(Value::Null) => Ok(PAGE as usize),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=PAGE_MAX).contains(&n) => Ok(n as usize),
            _ => Err(McpError::invalid_params(
                format!("limit must be an integer from 1 to {PAGE_MAX}, got {v}"),
                None,
            )),
        },
    }
}

/// `cursor`: where a page starts, as an earlier page's `next_cursor` said (0 when absent).
fn page_start(args: &JsonObject, total: usize) -> Result<usize, McpError> {
    let Some(cursor) = opt_str(args, "cursor")? else {
        return Ok(0);
    };
    match cursor.parse::<usize>() {
        Ok(n) if n <= total => Ok(n),
        _ => Err(McpError::invalid_params(
            format!(
                "cursor {cursor:?} is not one list_devices returned; pass an earlier page's next_cursor, or none for the first page"
            ),
            None,
        )),
    }
}

fn list_text(devices: &[DeviceInfo]) -> String {
    let mut text = String::with_capacity(devices.len() * 80);
    for (i, d) in devices.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        for part in [
            d.device.as_str(),
            " (",
            d.liveness.as_str(),
            "): ",
            &d.description,
        ] {
            text.push_str(part);
        }
    }
    text
}
