//! The tool list: generated from the plant, then the fixed command and device tools.

use crate::schema;
use closedloop_plant::{Action, Device, Plant, ToolMode};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::collections::HashMap;
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

/// Annotations of a tool that never opens the world (`openWorldHint` false): only whether it reads,
/// destroys and may be repeated differ from tool to tool.
fn annotations(read_only: bool, destructive: bool, idempotent: bool) -> Option<ToolAnnotations> {
    Some(ToolAnnotations::from_raw(
        None,
        Some(read_only),
        Some(destructive),
        Some(idempotent),
        Some(false),
    ))
}

/// Builds every tool: one per action (plant order), then the fixed ones.
pub fn build(plant: &Plant) -> Vec<Tool> {
    // One result schema shared by every action tool: a copy per tool was kilobytes per device
    // in a plant of thousands.
    let result = object(schema::result_object());
    // Likewise one copy of each distinct input schema: a hall of relays has one.
    let mut inputs: HashMap<String, Arc<JsonObject>> = HashMap::new();
    let mut tools = match plant.server.tools {
        ToolMode::PerAction => plant
            .actions()
            .map(|(device, action)| {
                let input = action_input(plant, action);
                let input = Arc::clone(
                    inputs
                        .entry(serde_json::to_string(&input).unwrap_or_default())
                        .or_insert_with(|| Arc::new(input)),
                );
                action_tool(device, action, input, &result, plant.server.default_wait_s)
            })
            .collect(),
        ToolMode::Generic => generic_tools(plant, &result),
    };
    tools.extend(crate::raw::tools(plant));
    tools.extend(crate::bridge::tools(plant));
    if !plant.alarms.is_empty() {
        tools.push(alarms_tool());
    }
    if has_dead_man(plant) {
        tools.push(keep_alive_tool());
    }
    tools.extend(fixed_tools(plant.server.default_wait_s));
    tools
}

/// The input schema of one action's tool (`[server] tools = "per_action"`): the action's own,
/// with the plant's default `wait_s` and, for a `confirm = true` action, the
/// `confirmation_token`.
fn action_input(plant: &Plant, action: &Action) -> JsonObject {
    let mut schema = action.input_schema(plant.server.default_wait_s);
    if action.confirm
        && let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
    {
        props.insert(
            "confirmation_token".into(),
            json!({"type": "string", "description": "From a needs_confirmation result, once the user agreed; the arguments must be the same."}),
        );
    }
    match schema {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The tool of one action, with its input schema and the shared result schema.
fn action_tool(
    device: &Device,
    action: &Action,
    input: Arc<JsonObject>,
    result: &Arc<JsonObject>,
    default_wait_s: f64,
) -> Tool {
    let mut t = Tool::new(
        action.tool_name.clone(),
        action.tool_description(device, default_wait_s),
        input,
    )
    .with_title(format!("{} {}", device.id, action.name))
    .with_raw_output_schema(Arc::clone(result));
    t.annotations = annotations(false, action.destructive, action.idempotent);
    t
}

/// `run_action` and `describe_device` (`[server] tools = "generic"`): two tools instead of one
/// per action, for plants whose tool list would be too long for a model.
fn generic_tools(plant: &Plant, result: &Arc<JsonObject>) -> Vec<Tool> {
    let ids: Vec<String> = plant.devices.iter().map(|d| d.id.clone()).collect();
    let mut run = Tool::new(
        "run_action",
        format!(
            "Run one action of one device (describe_device lists them with their parameters). {}",
            closedloop_plant::outcome_text(plant.server.default_wait_s)
        ),
        object(schema::run_action_input(&ids, plant.server.default_wait_s)),
    )
    .with_raw_output_schema(Arc::clone(result));
    run.annotations = annotations(false, true, false);
    let mut describe = Tool::new(
        "describe_device",
        "A device's description, liveness, signals and actions, each action with its input schema, verification level and whether it is idempotent, destructive or needs confirmation.",
        object(schema::device_input()),
    )
    .with_raw_output_schema(object(schema::describe_output()));
    describe.annotations = annotations(true, false, true);
    vec![run, describe]
}

/// `list_alarms`, offered only when the plant declares alarms.
fn alarms_tool() -> Tool {
    let mut t = Tool::new(
        "list_alarms",
        "The plant's standing alarms (a guard door, an over-temperature): which are active, since \
         when and why, and which devices each blocks. While an alarm is active its devices take no \
         command; do what its description says (or ask a person) before trying again.",
        object(schema::empty_input()),
    );
    t.annotations = annotations(true, false, true);
    t
}

/// Whether an action of the plant is a dead-man action (`keepalive_s`): `keep_alive` is offered
/// only then.
pub(crate) fn has_dead_man(plant: &Plant) -> bool {
    plant.actions().any(|(_, a)| a.keepalive_s.is_some())
}

/// `keep_alive`, offered only when an action has `keepalive_s`.
fn keep_alive_tool() -> Tool {
    let mut t = Tool::new(
        "keep_alive",
        "Keep a running dead-man action (one whose description says it runs only while you keep \
         asking) going: call it with the command_id at least as often as that action's keepalive \
         requires, as get_command_status would, and stop calling to let it stop (DEADMAN). It \
         answers at once with the command's current result; it never starts anything.",
        object(schema::keep_alive_input()),
    )
    .with_raw_output_schema(object(schema::result_object()));
    t.annotations = annotations(false, false, true);
    t
}

/// The [`FIXED_TOOLS`], in that order: every one but `cancel_command` and `confirm_command`
/// only reads.
fn fixed_tools(default_wait_s: f64) -> Vec<Tool> {
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
            "Devices with their description, liveness (online/offline/unknown), actions and signals, 20 a page in plant order: \
             when next_cursor is present, call again with it as cursor for the rest.",
            schema::device_page_input(),
            schema::device_list(),
        ),
        (
            "get_device_state",
            "A device's liveness and its latest signal values, each with unit, read time, age and source, and the active alarms that block it.",
            schema::device_input(),
            schema::device_state(),
        ),
        (
            "confirm_command",
            "Run an action that needed a person's confirmation, after the user agreed: pass the confirmation_token of its needs_confirmation result. Each token runs the action once, with exactly the arguments it was issued for, before it expires.",
            schema::confirm_input(default_wait_s),
            schema::result_object(),
        ),
    ];
    fixed
        .into_iter()
        .map(|(name, description, input, output)| {
            let mut t =
                Tool::new(name, description, object(input)).with_raw_output_schema(object(output));
            t.annotations = match name {
                "cancel_command" | "confirm_command" => annotations(false, true, true),
                _ => annotations(true, false, true),
            };
            t
        })
        .collect()
}
