//! A tool call's arguments (`Action::check_params`, what every action tool runs on the JSON a
//! client sends): arbitrary JSON must be accepted as typed parameters or refused with a problem
//! per parameter, never panic.
//!
//! Input: JSON text (non-JSON input is skipped: the MCP layer refuses it before this). The
//! action is the slide's `move_to` of a fixed plant, with a bounded number (`target_mm`, 0 to
//! 300 mm), an integer, an enum and a bool.
//!
//! Properties: no panic; accepted parameters hold exactly the declared names, numbers finite and
//! in range; a refusal names at least one problem.

#![no_main]

use closedloop_plant::ParamValue;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::OnceLock;

const PLANT: &str = r#"
[[device]]
id = "slide"
description = "Linear slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving = { discrete_input = 0 }
[[device.action]]
name = "move_to"
description = "Move the slide to an absolute position."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" }, steps = { type = "integer", min = 1, max = 10 }, speed = { type = "string", enum = ["fast", "slow"] }, gentle = { type = "bool" } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving"
"#;

fn action() -> &'static closedloop_plant::Action {
    static PLANT_ONCE: OnceLock<closedloop_plant::Plant> = OnceLock::new();
    let plant = PLANT_ONCE.get_or_init(|| {
        closedloop_plant::parse(PLANT, "fuzz.toml", Path::new("/")).expect("the fuzz plant loads")
    });
    plant.devices[0].action("move_to").expect("move_to")
}

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(args)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    match action().check_params(&args) {
        Ok(params) => {
            for (name, value) in &params {
                assert!(args.contains_key(name), "{name} was not given");
                if let ParamValue::Number(n) = value {
                    assert!(n.is_finite(), "{name} = {n}");
                }
            }
            if let Some(ParamValue::Number(t)) = params.get("target_mm") {
                assert!((0.0..=300.0).contains(t), "target_mm = {t} out of range");
            } else {
                panic!("target_mm is required: {params:?}");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "a refusal without words"),
    }
});
