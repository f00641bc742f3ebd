//! The engine's scenario list again, end to end: `closedloop serve` as a child process driven by
//! rmcp's MCP client over stdio, on the fault-matrix plant (`tests/plants/faults.toml`): relays
//! confirmed, unconfirmable and refused; a motion stall, an interlock, offline and rebooting
//! drives, a cancel; a read-back, parameter and queue errors; `REGISTER_INVALID` and
//! `DEVICE_BUSY`.

mod common;

use common::stdio::{act, code, plant_dir, status, text};
use common::{call, connect, sc, settle};
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmed_unconfirmable_and_refused_relays() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "lamp_switch", json!({"on": true})).await;
    assert_eq!(
        (status(&r).as_str(), sc(&r)["verified"].as_bool()),
        ("completed", Some(true)),
        "{:?}",
        r.structured_content
    );
    assert_eq!(r.is_error, Some(false));
    assert_eq!(sc(&r)["evidence"]["contact"]["value"], json!(true));
    assert!(!text(&r).is_empty());

    let r = act(&c, "brown_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "FEEDBACK_MISMATCH")
    );
    assert_eq!(r.is_error, Some(true));
    let r = act(&c, "swapped_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("timeout", "TIMEOUT")
    );
    let r = act(&c, "dead_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "DEVICE_OFFLINE")
    );
    let r = act(&c, "zombie_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "DEVICE_OFFLINE");
    // Its reads are refused as well: the contact cannot be read, so nothing is written.
    let r = act(&c, "nak_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "BUS_NAK")
    );
    let r = act(&c, "noisy_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "CRC_MISMATCH");
    let r = act(&c, "lossy_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(code(&r), "DEVICE_OFFLINE");
    let r = act(&c, "slow_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(
        status(&r),
        "completed",
        "a device not yet polled is waited for: {:?}",
        r.structured_content
    );
    let r = act(&c, "buzzer_switch", json!({"on": true, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), sc(&r)["verified"].as_bool()),
        ("sent", Some(false))
    );
    assert!(
        sc(&r)["hint"]
            .as_str()
            .unwrap()
            .contains("could not be confirmed")
    );
    assert_eq!(r.is_error, Some(false));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn motion_stall_interlock_offline_reboot_and_cancel() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(
        &c,
        "slide_move_to",
        json!({"target_mm": 150.0, "wait_s": 5}),
    )
    .await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "MOTOR_STALL")
    );
    let pos = sc(&r)["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 70.0).abs() <= 0.5, "{pos}");
    let events: Vec<&str> = sc(&r)["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"cancel_sent"), "{events:?}");
    // Causal order: the reading that showed the fault stands before the stop it caused.
    let timeline = sc(&r)["timeline"].as_array().unwrap().clone();
    let fault_read = timeline
        .iter()
        .position(|e| e["event"] == "signal" && e["values"]["fault"] == true);
    let stop = events.iter().position(|e| *e == "cancel_sent");
    assert!(fault_read.is_some() && fault_read < stop, "{timeline:?}");
    let g = act(&c, "gripper_close", json!({})).await;
    assert_eq!(
        (status(&g).as_str(), code(&g).as_str()),
        ("rejected", "INTERLOCK")
    );

    let r = act(&c, "unplugged_move_to", json!({"target_mm": 250.0})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "DEVICE_OFFLINE")
    );
    let r = act(&c, "rebooting_move_to", json!({"target_mm": 250.0})).await;
    assert_ne!(status(&r), "completed");

    let r = call(&c, "axis_move_to", json!({"target_mm": 250.0})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let x = call(&c, "cancel_command", json!({"command_id": id})).await;
    assert_eq!(
        (status(&x).as_str(), code(&x).as_str()),
        ("cancelled", "CANCELLED")
    );
    assert_eq!(x.is_error, Some(false));
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heater_readback_params_queue_and_errors() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "oven_set_temperature", json!({"setpoint_c": 40.0})).await;
    assert_eq!(status(&r), "completed", "{:?}", r.structured_content);
    let r = act(
        &c,
        "oven_store_setpoint",
        json!({"setpoint_c": 60.0, "wait_s": 3}),
    )
    .await;
    assert_eq!(
        (
            status(&r).as_str(),
            sc(&r)["verified"].as_bool(),
            sc(&r)["readback_matched"].as_bool()
        ),
        ("completed", Some(false), Some(true))
    );

    let r = call(&c, "axis_move_to", json!({"target_mm": 999.0})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("rejected", "INVALID_PARAMS")
    );
    assert_eq!(r.is_error, Some(true));

    // One after the other; the second's queue wait (0.3 s) runs out while the first moves.
    let a = call(&c, "axis_move_to", json!({"target_mm": 100.0, "wait_s": 0})).await;
    let b = act(&c, "axis_move_to", json!({"target_mm": 5.0})).await;
    assert_eq!(
        (status(&b).as_str(), code(&b).as_str()),
        ("timeout", "TIMEOUT")
    );
    assert_eq!(status(&settle(&c, a).await), "completed");

    let u = call(
        &c,
        "get_command_status",
        json!({"command_id": "0193f0c2-7c1e-7a51-9c1f-3f0f4c1b2a77"}),
    )
    .await;
    assert_eq!(
        (u.is_error, code(&u).as_str()),
        (Some(true), "UNKNOWN_COMMAND")
    );
    let e = c
        .call_tool(CallToolRequestParams::new("no_such_tool").with_arguments(Default::default()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, rmcp::ServiceError::McpError(_)),
        "an unknown tool is a JSON-RPC error: {e:?}"
    );
    let e = c
        .call_tool(
            CallToolRequestParams::new("lamp_switch").with_arguments(
                json!({"on": true, "wait_s": 99})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, rmcp::ServiceError::McpError(_)), "{e:?}");
    let key = json!({"on": false, "idempotency_key": "same", "wait_s": 2});
    let x = call(&c, "lamp_switch", key.clone()).await;
    let y = call(&c, "lamp_switch", key).await;
    assert_eq!(sc(&x)["command_id"], sc(&y)["command_id"]);
    let list = call(&c, "list_commands", json!({"device": "lamp"})).await;
    assert_eq!(sc(&list)["commands"].as_array().unwrap().len(), 1);
    let state = call(&c, "get_device_state", json!({"device": "oven"})).await;
    assert_eq!(sc(&state)["signals"]["temperature_c"]["unit"], json!("°C"));
    assert_eq!(sc(&state)["liveness"], json!("online"));
    let devices = call(&c, "list_devices", json!({})).await;
    assert!(sc(&devices)["devices"].as_array().unwrap().len() >= 10);
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_invalid_and_device_busy_through_mcp() {
    let dir = plant_dir();
    let c = connect(dir.path()).await;
    let r = act(&c, "wide_move_to", json!({"target_mm": 350.0, "wait_s": 3})).await;
    assert_eq!(
        (status(&r).as_str(), code(&r).as_str()),
        ("failed", "REGISTER_INVALID"),
        "{:?}",
        r.structured_content
    );
    assert!(
        sc(&r)["detail"]
            .as_str()
            .unwrap()
            .contains("Illegal Data Value")
    );
    let a = call(&c, "wide_move_to", json!({"target_mm": 250.0})).await;
    let b = call(&c, "wide_move_to", json!({"target_mm": 10.0})).await;
    assert_eq!(
        (status(&b).as_str(), code(&b).as_str()),
        ("rejected", "DEVICE_BUSY"),
        "{:?}",
        b.structured_content
    );
    let _ = call(
        &c,
        "cancel_command",
        json!({"command_id": sc(&a)["command_id"]}),
    )
    .await;
    c.cancel().await.unwrap();
}
