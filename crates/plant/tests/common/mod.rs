//! Shared by the error tests: a small valid plant and assertions on refusals.
#![allow(dead_code)]

use closedloop_plant::{PlantError, parse_with_env};
use std::path::Path;

/// A small valid plant; tests replace parts of it.
pub const BASE: &str = r#"
[server]
name = "workshop"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
commanded = { coil = 0 }
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Turn the lamp on or off."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02

[[device]]
id = "slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01 }
moving = { discrete_input = 0 }
fault = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0, max = 300 } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = { MOTOR_STALL = "fault" }
expect_s = "abs(params.target_mm - position_mm) / 100 + 0.05"
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
"#;

pub fn env(name: &str) -> Option<String> {
    (name == "SET").then(|| "value".to_string())
}

pub fn errors(src: &str) -> Vec<PlantError> {
    match parse_with_env(src, "workshop.toml", Path::new("/srv"), &env) {
        Ok(_) => panic!("the plant was accepted:\n{src}"),
        Err(e) => e.0,
    }
}

/// `BASE` with `from` replaced by `to` (which must occur).
pub fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

/// Asserts that exactly one error is reported, at `device`/`key`, with `needle` in its message,
/// and that its Display names file, device and key.
#[track_caller]
pub fn expect_one(src: &str, device: Option<&str>, key: &str, needle: &str) -> PlantError {
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = errs.into_iter().next().unwrap();
    assert_eq!(e.device.as_deref(), device, "{e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(needle), "{e}");
    let shown = e.to_string();
    assert!(shown.starts_with("workshop.toml"), "{shown}");
    if let Some(d) = device {
        assert!(shown.contains(&format!("device \"{d}\"")), "{shown}");
    }
    assert!(shown.contains(&format!("key {key}")), "{shown}");
    e
}
