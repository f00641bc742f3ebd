//! The plants tests share, as the TOML text in this folder (what each is for: `README.md`).
//!
//! A test crate takes this file in with
//! `#[path = "<up to the workspace root>/tests/plants/mod.rs"] mod plants;`. A test that needs a
//! variant edits the shared text with [`replace_line`], which fails the test when the line it
//! edits is gone, so a change to a shared plant cannot silently drop a test's variant.

#![allow(dead_code)]

/// `[[device]]` `lamp`: a simulated relay with contact feedback, switched in 20 ms.
pub const LAMP: &str = include_str!("lamp.toml");
/// `[[device]]` `slide`: a simulated stepper slide at 100 mm/s over 0–300 mm that reports a fault
/// (`MOTOR_STALL`) and can be cancelled.
pub const SLIDE: &str = include_str!("slide.toml");
/// `[[device]]` `gripper`: a simulated relay whose `close` requires the slide stopped and healthy.
pub const GRIPPER: &str = include_str!("gripper.toml");
/// A whole plant: a relay `lamp` and a stepper `slide` served over OPC UA on `127.0.0.1:0`.
pub const OPCUA_SIM: &str = include_str!("opcua_sim.toml");
/// A whole plant: one `mqtt-relay` `lamp` (prefix `lab/lamp`) on the broker at 127.0.0.1:1883.
pub const MQTT_SIM: &str = include_str!("mqtt_sim.toml");
/// [`MQTT_SIM`]'s driver line, which names its broker.
pub const MQTT_SIM_DRIVER: &str = r#"driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:1883", client_id = "closedloop-lamp" }"#;

/// `plant` with its one line `old` (a whole line, without its newline) replaced by `new`, which
/// may be several lines.
///
/// # Panics
/// When `old` is not exactly one whole line of `plant`: the variant a test asks for would
/// otherwise be silently lost.
pub fn replace_line(plant: &str, old: &str, new: &str) -> String {
    let hits = plant.lines().filter(|l| *l == old).count();
    assert_eq!(
        hits, 1,
        "the shared plant should have the line {old:?} once:\n{plant}"
    );
    let lines: Vec<&str> = plant
        .lines()
        .map(|l| if l == old { new } else { l })
        .collect();
    lines.join("\n") + "\n"
}

/// Several [`replace_line`] edits, in order.
pub fn replace_lines(plant: &str, edits: &[(&str, &str)]) -> String {
    edits.iter().fold(plant.to_string(), |p, (old, new)| {
        replace_line(&p, old, new)
    })
}

/// A `driver = { .. }` line with `, faults = [faults]` before its closing brace (unchanged for
/// no faults).
pub fn with_faults(driver: &str, faults: &str) -> String {
    match driver.strip_suffix(" }") {
        Some(open) if !faults.is_empty() => format!("{open}, faults = [{faults}] }}"),
        Some(_) => driver.to_string(),
        None => panic!("a driver line ends with ' }}': {driver:?}"),
    }
}

/// The shared slide's driver line.
pub const SLIDE_DRIVER: &str =
    r#"driver = { kind = "sim", model = "stepper", speed_mm_s = 100.0, travel_mm = [0.0, 300.0] }"#;
/// The shared slide's `expect_s`, which assumes its 100 mm/s.
const SLIDE_EXPECT: &str = r#"expect_s = "abs(params.target_mm - position_mm) / 100.0 + 0.05""#;

/// The shared slide moving at `speed_mm_s` instead of 100 mm/s, and expecting to.
pub fn slide_at(speed_mm_s: f64) -> String {
    let speed = format!("{speed_mm_s:?}");
    replace_lines(
        SLIDE,
        &[
            (SLIDE_DRIVER, &SLIDE_DRIVER.replace("100.0", &speed)),
            (SLIDE_EXPECT, &SLIDE_EXPECT.replace("100.0", &speed)),
        ],
    )
}
