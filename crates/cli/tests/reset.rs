//! A stalled slide is not the end of the session: the examples' `slide_reset` clears the driver's
//! latched fault output (the stepper's fault-reset coil), and the slide moves again — in-process
//! (`examples/workshop.toml`) and across Modbus TCP to `closedloop sim`
//! (`examples/modbus-workshop.toml`).

mod common;

use common::*;
use serde_json::json;

/// Stall at 70 mm, a second move that cannot start, the reset, then the move that passes.
async fn stall_reset_and_move_again(c: &Client) {
    let (status, code, r) = act(c, "slide_move_to", json!({"target_mm": 150.0, "wait_s": 5})).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("failed", "MOTOR_STALL"),
        "{r}"
    );
    // Stopped at the obstruction: the position read with the fault (an OPC UA subscription may
    // deliver the fault with a position sampled a moment before the axis stood still).
    let pos = r["evidence"]["position_mm"]["value"]
        .as_f64()
        .unwrap_or(f64::NAN);
    assert!((pos - 70.0).abs() <= 2.0, "{r}");

    // The fault output latches: the next move is refused before anything is written.
    let (status, code, r) = act(c, "slide_move_to", json!({"target_mm": 150.0, "wait_s": 5})).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "INTERLOCK"),
        "{r}"
    );
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains("Clear the fault first"),
        "{r}"
    );

    let (status, code, r) = act(c, "slide_reset", json!({"wait_s": 3})).await;
    assert_eq!((status.as_str(), code.as_str()), ("completed", ""), "{r}");
    assert_eq!(r["verified"], true, "{r}");
    let state = call(c, "get_device_state", json!({"device": "slide"})).await;
    assert_eq!(
        sc(&state)["signals"]["fault"]["value"],
        false,
        "{:?}",
        sc(&state)
    );

    // From 70 mm the axis is standing on the obstruction, so it passes it.
    let (status, code, r) = act(c, "slide_move_to", json!({"target_mm": 150.0, "wait_s": 5})).await;
    assert_eq!((status.as_str(), code.as_str()), ("completed", ""), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workshop_slide_is_reset_after_its_stall_and_moves_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("plant.toml"),
        include_str!("../../../examples/workshop.toml"),
    )
    .unwrap();
    let c = connect(dir.path()).await;
    stall_reset_and_move_again(&c).await;
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_modbus_workshop_slide_is_reset_after_a_stall_and_moves_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_modbus_sim(dir.path());
    sim_ctl(&control, &["fault", "slide", "stall", "at_mm=70"]);
    let c = connect(dir.path()).await;
    liveness(&c, "slide", "online").await;
    stall_reset_and_move_again(&c).await;
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opcua_workshop_slide_is_reset_through_its_reset_method() {
    let dir = tempfile::tempdir().unwrap();
    let example = include_str!("../../../examples/opcua-workshop.toml");
    std::fs::write(
        dir.path().join("sim.toml"),
        example.replace("opcua = \"127.0.0.1:4841\"", "opcua = \"127.0.0.1:0\""),
    )
    .unwrap();
    let (_sim, control, announced) = start_sim_plant(&dir.path().join("sim.toml"));
    let endpoint = announced
        .iter()
        .find(|w| w.first().map(String::as_str) == Some("slide"))
        .map(|w| w[3].clone())
        .expect("the slide announced");
    std::fs::write(
        dir.path().join("plant.toml"),
        example.replace("opc.tcp://127.0.0.1:4841/", &endpoint),
    )
    .unwrap();
    sim_ctl(&control, &["fault", "slide", "stall", "at_mm=70"]);
    let c = connect(dir.path()).await;
    liveness(&c, "slide", "online").await;
    stall_reset_and_move_again(&c).await;
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_can_workshop_slide_is_reset_through_its_command_frame() {
    let dir = tempfile::tempdir().unwrap();
    let bus = format!("reset-{}", std::process::id());
    std::fs::write(
        dir.path().join("can-workshop.dbc"),
        include_str!("../../../examples/can-workshop.dbc"),
    )
    .unwrap();
    let plant = include_str!("../../../examples/can-workshop.toml")
        .replace("bus = \"workshop\"", &format!("bus = \"{bus}\""))
        .replace(
            "slcan:/tmp/closedloop-can-workshop",
            &format!(
                "slcan:{}",
                std::env::temp_dir()
                    .join(format!("closedloop-can-{bus}"))
                    .display()
            ),
        );
    std::fs::write(dir.path().join("plant.toml"), plant).unwrap();
    let (_sim, control, _) = start_sim_plant(&dir.path().join("plant.toml"));
    sim_ctl(&control, &["fault", "slide", "stall", "at_mm=70"]);
    let c = connect(dir.path()).await;
    liveness(&c, "slide", "online").await;
    stall_reset_and_move_again(&c).await;
    c.cancel().await.unwrap();
}
