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
        action.input_schema(),
        golden,
        "{}",
        serde_json::to_string_pretty(&action.input_schema()).unwrap()
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
        .input_schema();
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
        .input_schema();
    assert_eq!(close["required"], json!([]));
    assert_eq!(close["additionalProperties"], json!(false));
}

#[test]
fn descriptions_say_accepted_is_not_done() {
    let plant = plant();
    let (device, action) = plant.tool("slide_move_to").unwrap();
    let d = action.tool_description(device);
    assert!(
        d.starts_with("Move the slide to an absolute position. Device slide: Linear slide"),
        "{d}"
    );
    assert!(
        d.contains("\"accepted\" and a command_id at once; that is not completion"),
        "{d}"
    );
    assert!(d.contains("get_command_status"), "{d}");
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
