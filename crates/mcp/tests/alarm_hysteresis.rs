//! A standing alarm with hysteresis, through a real MCP client (rmcp over an in-process pipe):
//! an oven crossing 60 °C raises OVERTEMP, which stops the slide mid-move with its cancel plan;
//! cooled back to 55 °C — below the raise threshold but above `clear_when` — the slide stays
//! blocked; below 50 °C the alarm clears and the slide moves again. Every step is checked against
//! the simulator's physical state, not only against what the server says.

mod common;

use common::{Client, call, sc};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// An oven heating at 20 °C/s and cooling at 10 °C/s, the shared slide, and the alarm.
fn plant() -> String {
    let oven = r#"
[server]
name = "hysteresis"
journal = "sqlite::memory:"

[[device]]
id = "oven"
description = "Oven"
driver = { kind = "sim", model = "heater", rate_c_per_s = 20.0, cool_c_per_s = 10.0, ambient_c = 25.0 }
poll_ms = 20
[device.signals]
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
setpoint_c    = { holding = 0, scale = 0.1 }
[[device.action]]
name = "set_temperature"
description = "Heat or cool to a setpoint."
params = { setpoint_c = { type = "number", min = 25.0, max = 100.0 } }
write = [{ holding = 0, scale = 0.1, value = "params.setpoint_c" }, { coil = 0, value = "true" }]
done_when = "abs(temperature_c - params.setpoint_c) <= 0.5"
expect_s = "abs(params.setpoint_c - temperature_c) / 10.0 + 0.5"
idempotent = true

[[alarm]]
name = "OVERTEMP"
when = "devices.oven.temperature_c > 60.0"
clear_when = "devices.oven.temperature_c < 50.0"
severity = "critical"
blocks = ["slide"]
description = "The oven is too hot for the slide to pass; wait until it has cooled."
"#;
    format!("{oven}\n{}", common::plants::SLIDE)
}

/// The alarm's row of `list_alarms`.
async fn overtemp(c: &Client) -> Value {
    sc(&call(c, "list_alarms", json!({})).await)["alarms"][0].clone()
}

/// Sets the oven and waits for it to get there.
async fn oven_to(c: &Client, setpoint_c: f64) {
    let r = call(
        c,
        "oven_set_temperature",
        json!({"setpoint_c": setpoint_c, "wait_s": 10}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_with_clear_when_stops_a_move_and_stays_until_its_clear_condition_holds() {
    let (engine, sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    let c: Client = ().serve(io).await.unwrap();
    for _ in 0..200 {
        if overtemp(&c).await["active"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(overtemp(&c).await["active"], false);
    the_heating_oven_stops_the_slide(&c, &sims).await;
    above_clear_when_the_slide_stays_blocked(&c, &sims).await;
    below_clear_when_the_slide_moves_again(&c, &sims).await;
    c.cancel().await.unwrap();
}

/// The simulated devices by id.
type Sims = std::collections::BTreeMap<String, closedloop_sim::SimDevice>;

/// The slide sets off on a 3 s move; the oven heats past 60 °C on the way: stopped OVERTEMP.
async fn the_heating_oven_stops_the_slide(c: &Client, sims: &Sims) {
    let mv = call(c, "slide_move_to", json!({"target_mm": 300.0, "wait_s": 0})).await;
    let id = sc(&mv)["command_id"].as_str().unwrap().to_string();
    oven_to(c, 65.0).await;
    let stopped = call(
        c,
        "get_command_status",
        json!({"command_id": id, "wait_s": 5}),
    )
    .await;
    let stopped = sc(&stopped);
    assert_eq!(
        (stopped["status"].as_str(), stopped["error_code"].as_str()),
        (Some("failed"), Some("OVERTEMP")),
        "{stopped}"
    );
    let slide = sims["slide"].peek();
    assert!(!slide.moving.unwrap(), "the stop was written");
    assert!(slide.position_mm.unwrap() < 299.0, "{slide:?}");
}

/// Back to 55 °C: below `when`, above `clear_when` — still active, the slide still refused.
async fn above_clear_when_the_slide_stays_blocked(c: &Client, sims: &Sims) {
    oven_to(c, 55.0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = sims["oven"].peek().temperature_c.unwrap();
    assert!((50.0..60.0).contains(&t), "the oven is at {t} °C");
    assert_eq!(overtemp(c).await["active"], true, "cleared at {t} °C");
    let refused = call(c, "slide_move_to", json!({"target_mm": 0.0})).await;
    assert_eq!(
        (refused.is_error, sc(&refused)["error_code"].as_str()),
        (Some(true), Some("INTERLOCK")),
        "{:?}",
        refused.structured_content
    );
    assert!(!sims["slide"].peek().moving.unwrap());
}

/// Down to 45 °C: the alarm clears only once the oven is below 50 °C, and the slide moves.
async fn below_clear_when_the_slide_moves_again(c: &Client, sims: &Sims) {
    let r = call(
        c,
        "oven_set_temperature",
        json!({"setpoint_c": 45.0, "wait_s": 0}),
    )
    .await;
    let status = sc(&r)["status"].as_str().unwrap();
    assert!(matches!(status, "accepted" | "running"), "{status}");
    let mut cleared_at = None;
    for _ in 0..300 {
        if overtemp(c).await["active"] == false {
            cleared_at = sims["oven"].peek().temperature_c;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cleared_at = cleared_at.expect("the alarm never cleared");
    assert!(cleared_at < 50.0, "cleared at {cleared_at} °C");
    let again = call(c, "slide_move_to", json!({"target_mm": 0.0, "wait_s": 10})).await;
    assert_eq!(
        sc(&again)["status"],
        "completed",
        "{:?}",
        again.structured_content
    );
    assert!(sims["slide"].peek().position_mm.unwrap().abs() <= 0.2);
}
