//! The device tools: `list_devices`, `get_device_state`, `list_alarms` and, with
//! `[server] tools = "generic"`, `describe_device`.

use super::{opt_str, structured, unknown_device};
use crate::Server;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::json;

impl Server {
    /// `list_devices`: every device with its liveness, one line each in the text.
    pub(super) fn list_devices(&self) -> CallToolResult {
        structured(
            json!({"devices": self.engine.devices()}),
            false,
            list_text(&self.engine),
        )
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
        let v = json!({
            "device": device.id,
            "description": device.description,
            "liveness": liveness,
            "signals": device.signals.iter().map(|s| json!({"name": s.name, "source": s.source.describe(), "unit": s.unit})).collect::<Vec<_>>(),
            "actions": device.actions.iter().map(|a| json!({
                "name": a.name,
                "description": a.tool_description(device),
                "input_schema": a.input_schema(),
                "verification": a.verification.as_str(),
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
                format!(
                    "{k} = {}{} ({} ms old)",
                    s.value,
                    s.unit
                        .as_deref()
                        .map(|u| format!(" {u}"))
                        .unwrap_or_default(),
                    s.age_ms
                )
            })
            .collect();
        let liveness = serde_json::to_value(state.liveness).unwrap_or_default();
        let mut text = format!("{device} is {}.", liveness.as_str().unwrap_or(""));
        if !values.is_empty() {
            text.push_str(&format!(" {}.", values.join(", ")));
        }
        if let Some(d) = &state.detail {
            text.push_str(&format!(" {d}"));
        }
        Ok(structured(
            serde_json::to_value(&state).unwrap_or_default(),
            false,
            text,
        ))
    }
}

fn list_text(engine: &closedloop_engine::Engine) -> String {
    engine
        .devices()
        .iter()
        .map(|d| {
            format!(
                "{} ({}): {}",
                d.device,
                serde_json::to_value(d.liveness)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or(""),
                d.description
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
