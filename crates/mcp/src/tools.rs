//! The tool list: generated from the plant, then the fixed command and device tools.

use crate::schema;
use closedloop_plant::{Plant, ToolMode};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tools every plant gets, in `tools/list` order after the action tools.
pub const FIXED_TOOLS: [&str; 6] = [
    "get_command_status",
    "cancel_command",
    "list_commands",
    "list_devices",
    "get_device_state",
    "confirm_command",
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
    // One result schema shared by every action tool: a copy per tool was kilobytes per device
    // in a plant of thousands.
    let result = object(schema::result_object());
    match plant.server.tools {
        ToolMode::PerAction => {
            for (device, action) in plant.actions() {
                let mut schema = action.input_schema();
                schema["properties"]["wait_s"]["default"] = json!(plant.server.default_wait_s);
                if action.confirm
                    && let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
                {
                    props.insert(
                        "confirmation_token".into(),
                        json!({"type": "string", "description": "From a needs_confirmation result, once the user agreed; the arguments must be the same."}),
                    );
                }
                let mut t = Tool::new(
                    action.tool_name.clone(),
                    action.tool_description(device),
                    object(schema),
                )
                .with_title(format!("{} {}", device.id, action.name))
                .with_raw_output_schema(Arc::clone(&result));
                t.annotations = Some(ToolAnnotations::from_raw(
                    None,
                    Some(false),
                    Some(action.destructive),
                    Some(action.idempotent),
                    Some(false),
                ));
                tools.push(t);
            }
        }
        ToolMode::Generic => {
            let ids: Vec<String> = plant.devices.iter().map(|d| d.id.clone()).collect();
            let mut run = Tool::new(
                "run_action",
                "Run one action of one device (describe_device lists them with their parameters). It returns status \"accepted\" and a command_id at once; that is not completion. Call get_command_status with the command_id (or pass wait_s) to learn whether the device confirmed it.",
                object(schema::run_action_input(&ids)),
            )
            .with_raw_output_schema(Arc::clone(&result));
            run.annotations = Some(ToolAnnotations::from_raw(
                None,
                Some(false),
                Some(true),
                Some(false),
                Some(false),
            ));
            tools.push(run);
            let mut describe = Tool::new(
                "describe_device",
                "A device's description, liveness, signals and actions, each action with its input schema, verification level and whether it is idempotent, destructive or needs confirmation.",
                object(schema::device_input()),
            )
            .with_raw_output_schema(object(schema::describe_output()));
            describe.annotations = Some(ToolAnnotations::from_raw(
                None,
                Some(true),
                Some(false),
                Some(true),
                Some(false),
            ));
            tools.push(describe);
        }
    }
    tools.extend(crate::raw::tools(plant));
    tools.extend(crate::bridge::tools(plant));
    if !plant.alarms.is_empty() {
        let mut t = Tool::new(
            "list_alarms",
            "The plant's standing alarms (a guard door, an over-temperature): which are active, since \
             when and why, and which devices each blocks. While an alarm is active its devices take no \
             command; do what its description says (or ask a person) before trying again.",
            object(schema::empty_input()),
        );
        t.annotations = Some(ToolAnnotations::from_raw(
            None,
            Some(true),
            Some(false),
            Some(true),
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
    let fixed: [(&str, &str, Value, Value); 6] = [
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
        (
            "confirm_command",
            "Run an action that needed a person's confirmation, after the user agreed: pass the confirmation_token of its needs_confirmation result. Each token runs the action once, with exactly the arguments it was issued for, before it expires.",
            schema::confirm_input(),
            schema::result_object(),
        ),
    ];
    for (name, description, input, output) in fixed {
        let mut t =
            Tool::new(name, description, object(input)).with_raw_output_schema(object(output));
        t.annotations = if name == "cancel_command" || name == "confirm_command" {
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
