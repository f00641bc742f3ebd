//! The generated tool surface: golden input schema, descriptions, and argument checking.

use closedloop_plant::{ParamValue, parse};
use serde_json::json;
use std::path::Path;

const WORKSHOP: &str = include_str!("plants/workshop.toml");

fn plant() -> closedloop_plant::Plant {
    parse(WORKSHOP, "workshop.toml", Path::new("/srv")).unwrap()
}

#[test]
fn move_to_input_schema_matches_the_golden_file() {
    let plant = plant();
    let action = plant.device("slide").unwrap().action("move_to").unwrap();
    let golden: serde_json::Value =
        serde_json::from_str(include_str!("golden/slide_move_to.schema.json")).unwrap();
    assert_eq!(
        action.input_schema(2.0),
        golden,
        "{}",
        serde_json::to_string_pretty(&action.input_schema(2.0)).unwrap()
    );
}

#[test]
fn switch_schema_carries_param_descriptions() {
    let plant = plant();
    let schema = plant
        .device("lamp")
        .unwrap()
        .action("switch")
        .unwrap()
        .input_schema(2.0);
    assert_eq!(
        schema["properties"]["on"],
        json!({"type": "boolean", "description": "true to switch on"})
    );
    assert_eq!(schema["required"], json!(["on"]));
    let close = plant
        .device("gripper")
        .unwrap()
        .action("close")
        .unwrap()
        .input_schema(2.0);
    assert_eq!(close["required"], json!([]));
    assert_eq!(close["additionalProperties"], json!(false));
}

#[test]
fn descriptions_say_accepted_is_not_done() {
    let plant = plant();
    let (device, action) = plant.tool("slide_move_to").unwrap();
    let d = action.tool_description(device, 2.0);
    assert!(
        d.starts_with("Move the slide to an absolute position. Device slide: Linear slide"),
        "{d}"
    );
    assert!(d.contains("\"accepted\" or \"running\" with a command_id is not completion"));
    assert!(d.contains("get_command_status"), "{d}");
}

/// The description and the schema say what the plant's `default_wait_s` makes a call do: a
/// text written for one default lied under another.
#[test]
fn descriptions_and_schemas_follow_the_plants_default_wait() {
    for (wait, says) in [
        (
            0.0,
            "It returns status \"accepted\" and a command_id at once",
        ),
        (
            0.5,
            "It waits up to 0.5 s (wait_s, 0 to 10) for the device to confirm",
        ),
        (
            2.0,
            "It waits up to 2 s (wait_s, 0 to 10) for the device to confirm",
        ),
    ] {
        let src = WORKSHOP.replacen("[server]", &format!("[server]\ndefault_wait_s = {wait}"), 1);
        let plant = parse(&src, "workshop.toml", Path::new("/srv")).unwrap();
        let (device, action) = plant.tool("slide_move_to").unwrap();
        let d = action.tool_description(device, plant.server.default_wait_s);
        assert!(d.contains(says), "{wait}: {d}");
        assert_eq!(d.contains("at once"), wait == 0.0, "{d}");
        let schema = action.input_schema(plant.server.default_wait_s);
        assert_eq!(
            schema["properties"]["wait_s"]["default"].as_f64(),
            Some(wait),
            "{schema}"
        );
    }
}

#[test]
fn check_params_for_move_to() {
    let plant = plant();
    let action = plant.device("slide").unwrap().action("move_to").unwrap();
    let ok = action
        .check_params(json!({"target_mm": 150}).as_object().unwrap())
        .unwrap();
    assert_eq!(ok["target_mm"], ParamValue::Number(150.0));
    let e = action
        .check_params(json!({"target_mm": 350}).as_object().unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "target_mm: 350 mm is above the maximum 300 mm; send a number from 0 to 300 mm"
    );
    let e = action
        .check_params(json!({}).as_object().unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "target_mm: missing; send a number from 0 to 300 mm"
    );
    let e = action
        .check_params(json!({"target_mm": "150"}).as_object().unwrap())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "target_mm: got \"150\"; send a number from 0 to 300 mm"
    );
}

/// The lamp's `on` asked of a person (`ask`), so the model never passes it.
fn lamp_asked(ask: &str) -> String {
    WORKSHOP.replace(
        "on = { type = \"bool\", description = \"true to switch on\" }",
        &format!("on = {{ type = \"bool\", description = \"true to switch on\", ask = {ask:?} }}"),
    )
}

#[test]
fn an_asked_param_is_left_out_of_the_input_schema_and_named_in_the_description() {
    let src = lamp_asked("Switch the desk lamp on?");
    assert_ne!(
        src, WORKSHOP,
        "the lamp's param line must be in the workshop plant"
    );
    let plant = parse(&src, "workshop.toml", Path::new("/srv")).unwrap();
    let (device, action) = plant.tool("lamp_switch").unwrap();
    let schema = action.input_schema(2.0);
    assert!(schema["properties"].get("on").is_none(), "{schema}");
    assert_eq!(schema["required"], json!([]));
    let description = action.tool_description(device, 2.0);
    assert!(
        description.contains("It asks the person for on itself; do not pass or invent it."),
        "{description}"
    );
    assert_eq!(
        action.params[0].ask.as_deref(),
        Some("Switch the desk lamp on?")
    );
}

#[test]
fn a_blank_ask_is_refused_naming_its_key() {
    let e = parse(&lamp_asked("  "), "workshop.toml", Path::new("/srv")).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("params.on.ask"), "{text}");
    assert!(
        text.contains("ask must be the question a person answers"),
        "{text}"
    );
}

#[test]
fn a_checklist_is_named_in_the_description_and_needs_confirm() {
    let with =
        |extra: &str| WORKSHOP.replacen("expect_s = 0.02", &format!("expect_s = 0.02\n{extra}"), 1);
    let src =
        with("confirm = true\nchecklist = [\" the lamp is wired \", \"nobody is on the ladder\"]");
    let plant = parse(&src, "workshop.toml", Path::new("/srv")).unwrap();
    let (device, action) = plant.tool("lamp_switch").unwrap();
    assert_eq!(
        action.checklist,
        ["the lamp is wired", "nobody is on the ladder"]
    );
    let description = action.tool_description(device, 2.0);
    assert!(
        description.contains(
            "Before confirming, the person checks: the lamp is wired; nobody is on the ladder."
        ),
        "{description}"
    );
    let e = parse(
        &with("checklist = [\"the lamp is wired\"]"),
        "workshop.toml",
        Path::new("/srv"),
    );
    let text = e.unwrap_err().to_string();
    assert!(text.contains("key action.switch.checklist: a checklist is what a person checks before confirming; add confirm = true"), "{text}");
    let e = parse(
        &with("confirm = true\nchecklist = [\"\"]"),
        "workshop.toml",
        Path::new("/srv"),
    );
    let text = e.unwrap_err().to_string();
    assert!(
        text.contains("key action.switch.checklist[0]: each checklist item must say what to check"),
        "{text}"
    );
}

/// A loaded plant keeps no spare room in its per-device lists: grown by pushes, a list of one
/// holds room for four, and a hall of 8,000 single-action relays kept 20 MB of it.
#[test]
fn a_loaded_plants_lists_hold_no_spare_room() {
    let plant = plant();
    for d in &plant.devices {
        let room = |what: &str, len: usize, capacity: usize| {
            assert_eq!(capacity, len, "{}: {what} holds spare room", d.id);
        };
        room("signals", d.signals.len(), d.signals.capacity());
        room("actions", d.actions.len(), d.actions.capacity());
        for a in &d.actions {
            room("params", a.params.len(), a.params.capacity());
            room("write", a.write.len(), a.write.capacity());
        }
    }
}
