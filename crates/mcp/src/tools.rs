//! The tool list: generated from the plant, then the fixed command and device tools.

use crate::schema;
use closedloop_plant::Plant;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::sync::Arc;

/// The tools every plant gets, in `tools/list` order after the action tools.
pub const FIXED_TOOLS: [&str; 5] = [
    "get_command_status",
    "cancel_command",
    "list_commands",
    "list_devices",
    "get_device_state",
];

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

/// Builds every tool: one per action (plant order), then the fixed ones.
pub fn build(plant: &Plant) -> Vec<Tool> {
    let mut tools = Vec::new();
    for (device, action) in plant.actions() {
        let mut t = Tool::new(
            action.tool_name.clone(),
            action.tool_description(device),
            object(action.input_schema()),
        )
        .with_title(format!("{} {}", device.id, action.name))
        .with_raw_output_schema(object(schema::result_object()));
        t.annotations = Some(ToolAnnotations::from_raw(
            None,
            Some(false),
            Some(action.destructive),
            Some(action.idempotent),
            Some(false),
        ));
        tools.push(t);
    }
    let read_only = || {
        Some(ToolAnnotations::from_raw(
            None,
            Some(true),
            Some(false),
            Some(true),
            Some(false),
        ))
    };
    let fixed: [(&str, &str, Value, Value); 5] = [
        (
            "get_command_status",
            "The current result of a command: status, verified, evidence, error_code, detail, hint and timeline. \
             Waits up to wait_s (default 3, max 10) for a final status. Only status \"completed\" means the device \
             confirmed the action.",
            schema::status_input(),
            schema::result_object(),
        ),
        (
            "cancel_command",
            "Cancel a command. A queued command is dropped; a running one gets its cancel plan (a stop) written. \
             A command that already ended keeps its outcome.",
            schema::cancel_input(),
            schema::result_object(),
        ),
        (
            "list_commands",
            "Recent commands, newest first, optionally for one device or one status.",
            schema::list_input(),
            schema::command_list(),
        ),
        (
            "list_devices",
            "Every device with its description, liveness (online/offline/unknown), actions and signals.",
            schema::empty_input(),
            schema::device_list(),
        ),
        (
            "get_device_state",
            "A device's liveness and its latest signal values, each with unit, read time, age and source.",
            schema::device_input(),
            schema::device_state(),
        ),
    ];
    for (name, description, input, output) in fixed {
        let mut t =
            Tool::new(name, description, object(input)).with_raw_output_schema(object(output));
        t.annotations = if name == "cancel_command" {
            Some(ToolAnnotations::from_raw(
                None,
                Some(false),
                Some(true),
                Some(true),
                Some(false),
            ))
        } else {
            read_only()
        };
        tools.push(t);
    }
    tools
}
