//! The fault matrix over CAN: `closedloop sim` runs the nodes of examples/can-workshop.toml on a
//! simulated slcan adapter (a pty), `closedloop serve` drives them through the `can` driver and
//! the DBC file, an MCP client acts, and faults are injected at run time through `closedloop sim
//! fault` — closedloop never reports `completed` under a fault, and names the right code.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Copies the example plant and DBC into `dir` with a bus of this process's own (its pty link is
/// a path other processes could share), starts `closedloop sim` and waits for both nodes.
/// Returns the sim and its control address.
fn start_sim(dir: &Path) -> (Running, String) {
    let bus = format!("workshop-{}", std::process::id());
    std::fs::write(
        dir.join("can-workshop.dbc"),
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
    std::fs::write(dir.join("plant.toml"), plant).unwrap();
    let (sim, control, announced) = start_sim_plant(&dir.join("plant.toml"));
    let mut nodes: Vec<&str> = announced
        .iter()
        .filter(|w| w.get(1).map(String::as_str) == Some("can-node"))
        .map(|w| w[0].as_str())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["lamp", "slide"]);
    (sim, control)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_over_can_never_completes_under_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_sim(dir.path());
    let c = connect(dir.path()).await;
    liveness(&c, "lamp", "online").await;
    liveness(&c, "slide", "online").await;

    the_lamp_completes_and_the_bridge_tools_read_it(&c).await;
    each_relay_fault_never_completes(&c, &control).await;
    a_node_without_power_is_offline_until_it_returns(&c, &control).await;
    the_slide_moves_and_a_stall_latches_its_fault(&c, &control).await;
    a_node_dying_mid_move_is_offline(&c, &control).await;
    a_reboot_after_the_command_is_offline(&c, &control).await;

    // Faults with no CAN meaning are refused by the control endpoint, by name.
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["sim", "fault", "--control", &control, "lamp", "nak"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nak"));
    c.cancel().await.unwrap();
}

/// The lamp's switch, its `on` argument (`on`), waited on for 3 s.
fn switch(on: bool) -> serde_json::Value {
    json!({"on": on, "wait_s": 3})
}

/// The lamp completes on its CAN contact; the bridge tools list every DBC signal with its age
/// and decode a frame.
async fn the_lamp_completes_and_the_bridge_tools_read_it(c: &Client) {
    let (status, _, r) = act(c, "lamp_switch", switch(true)).await;
    assert_eq!(status, "completed", "{r}");
    assert_eq!(r["verified"], json!(true));
    assert_eq!(r["evidence"]["contact"]["value"], json!(true));
    assert_eq!(
        r["evidence"]["contact"]["source"],
        json!("CAN LampStatus Contact")
    );

    // The bridge tools: every DBC signal with its age, and a frame decoded.
    let s = call(
        c,
        "can_signals",
        json!({"device": "lamp", "names": ["Contact"]}),
    )
    .await;
    let contact = &sc(&s)["signals"][0];
    assert_eq!(
        (contact["name"].clone(), contact["value"].clone()),
        (json!("Contact"), json!(1.0))
    );
    assert!(contact["age_s"].as_f64().unwrap() < 1.0, "{contact}");
    let d = call(
        c,
        "can_decode",
        json!({"device": "lamp", "id": 257, "data_hex": "02"}),
    )
    .await;
    assert_eq!(sc(&d)["message"], "LampStatus");
}

/// Each relay fault, at run time: the right code, never `completed`.
async fn each_relay_fault_never_completes(c: &Client, control: &str) {
    let cases: [(&[&str], &[&str]); 4] = [
        (&["brownout"], &["FEEDBACK_MISMATCH"]),
        (&["swapped_contacts"], &["FEEDBACK_MISMATCH", "TIMEOUT"]),
        (
            &["latency_ms", "ms=1000"],
            &["FEEDBACK_MISMATCH", "TIMEOUT"],
        ),
        (&["drop_rate", "p=1.0"], &["FEEDBACK_MISMATCH"]),
    ];
    for (fault, codes) in cases {
        let (status, _, r) = act(c, "lamp_switch", switch(false)).await;
        assert_eq!(status, "completed", "{r}");
        let mut words = vec!["fault", "lamp"];
        words.extend_from_slice(fault);
        sim_ctl(control, &words);
        let (status, code, r) = act(c, "lamp_switch", switch(true)).await;
        assert_ne!(status, "completed", "{fault:?}: {r}");
        assert!(codes.contains(&code.as_str()), "{fault:?}: {code} {r}");
        sim_ctl(control, &["clear", "lamp"]);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
}

/// A node that loses power goes silent: offline, refused; back when power returns.
async fn a_node_without_power_is_offline_until_it_returns(c: &Client, control: &str) {
    sim_ctl(control, &["fault", "lamp", "power_off"]);
    liveness(c, "lamp", "offline").await;
    let (status, code, r) = act(c, "lamp_switch", switch(true)).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "DEVICE_OFFLINE"),
        "{r}"
    );
    sim_ctl(control, &["clear", "lamp"]);
    liveness(c, "lamp", "online").await;
    let (status, _, r) = act(c, "lamp_switch", switch(true)).await;
    assert_eq!(status, "completed", "{r}");
}

/// A move to the slide's target `t`, waited on for 5 s.
fn move_to(t: f64) -> serde_json::Value {
    json!({"target_mm": t, "wait_s": 5})
}

/// The slide moves, with evidence from the big-endian position; a stall on the way back
/// latches the drive's fault until the node is power-cycled.
async fn the_slide_moves_and_a_stall_latches_its_fault(c: &Client, control: &str) {
    let (status, _, r) = act(c, "slide_move_to", move_to(150.0)).await;
    assert_eq!(status, "completed", "{r}");
    let pos = r["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 150.0).abs() <= 0.2, "{pos}");

    // A stall on the way back: MOTOR_STALL near the obstruction, and the stop is sent.
    sim_ctl(control, &["fault", "slide", "stall", "at_mm=100"]);
    let (status, code, r) = act(c, "slide_move_to", move_to(20.0)).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("failed", "MOTOR_STALL"),
        "{r}"
    );
    let pos = r["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 100.0).abs() <= 0.5, "{pos}");
    sim_ctl(control, &["clear", "slide"]);
    // The stop written after the stall holds the slide until a fresh frame shows it stopped
    // (the safe state); let that frame come before the node is cut off below, or the hold would
    // wait out its bound and the next command would expire in the queue.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The drive's fault is latched: a move is refused before anything is sent, naming it.
    let (status, code, r) = act(c, "slide_move_to", move_to(280.0)).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "INTERLOCK"),
        "{r}"
    );
    assert!(r["detail"].as_str().unwrap().contains("MOTOR_STALL"), "{r}");
    // Power-cycling the node resets its drive.
    sim_ctl(control, &["fault", "slide", "power_off"]);
    liveness(c, "slide", "offline").await;
    sim_ctl(control, &["clear", "slide"]);
    liveness(c, "slide", "online").await;
}

/// The slide's node dies mid-move: DEVICE_OFFLINE, never `completed`.
async fn a_node_dying_mid_move_is_offline(c: &Client, control: &str) {
    let r = call(c, "slide_move_to", json!({"target_mm": 280.0, "wait_s": 0})).await;
    sim_ctl(control, &["fault", "slide", "power_off"]);
    let r = settle(c, r).await;
    assert_ne!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    assert_eq!(
        outcome(&r).1,
        "DEVICE_OFFLINE",
        "{:?}",
        r.structured_content
    );
    sim_ctl(control, &["clear", "slide"]);
}

/// A reboot right after the command arrives: the output comes back off.
async fn a_reboot_after_the_command_is_offline(c: &Client, control: &str) {
    let (status, _, r) = act(c, "lamp_switch", switch(false)).await;
    assert_eq!(status, "completed", "{r}");
    sim_ctl(
        control,
        &["fault", "lamp", "reboot", "down_ms=1000", "after_ms=0"],
    );
    let (status, code, r) = act(c, "lamp_switch", switch(true)).await;
    // Silent for 1 s from the frame on: no fresh state frame before the deadline.
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("failed", "DEVICE_OFFLINE"),
        "{r}"
    );
}
