//! The plant these MQTT relay tests share: one simulated `mqtt-relay` named `lamp`.

#![allow(dead_code)] // each test file uses its own part

use closedloop_plant::Plant;

#[path = "../../../../tests/plants/mod.rs"]
mod plants;

/// A plant with one `mqtt-relay` named `lamp` (prefix `lab/lamp`); `sim` adds lines to its
/// `[device.sim]` table, which names `broker` only when given one.
pub fn plant_text(broker: Option<&str>, sim: &str) -> String {
    let sim_broker = broker.map_or(String::new(), |b| format!("broker = \"{b}\""));
    plants::replace_lines(
        plants::MQTT_SIM,
        &[
            (
                plants::MQTT_SIM_DRIVER,
                &format!(
                    "{}\nliveness = {{ status_topic = \"lab/lamp/status\" }}",
                    plants::MQTT_SIM_DRIVER
                ),
            ),
            (
                r#"prefix = "lab/lamp""#,
                &format!("prefix = \"lab/lamp\"\n{sim_broker}\n{sim}"),
            ),
        ],
    )
}

pub fn plant(text: &str) -> Plant {
    closedloop_plant::parse(text, "mqtt-sim.toml", std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("a valid plant: {e}"))
}
