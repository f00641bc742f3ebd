//! The fault matrix over OPC UA: `closedloop sim` serves examples/opcua-workshop.toml's devices
//! as OPC UA variables and methods, `closedloop serve` drives them through the `opcua` driver, an
//! MCP client acts, and faults are injected at run time through `closedloop sim fault` —
//! closedloop never reports `completed` under a fault, and names the right code.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Serves the example on a free port and writes the plant `serve` uses, with the endpoint the
/// simulator announced. Returns the sim and its control address.
fn start_sim(dir: &Path) -> (Running, String) {
    let example = include_str!("../../../examples/opcua-workshop.toml");
    std::fs::write(
        dir.join("sim.toml"),
        example.replace("opcua = \"127.0.0.1:4841\"", "opcua = \"127.0.0.1:0\""),
    )
    .unwrap();
    let (sim, control, announced) = start_sim_plant(&dir.join("sim.toml"));
    let endpoints: Vec<(&str, &str)> = announced
        .iter()
        .filter(|w| w.get(1).map(String::as_str) == Some("opcua"))
        .map(|w| (w[0].as_str(), w[3].as_str()))
        .collect();
    assert_eq!(endpoints.len(), 2, "{announced:?}");
    assert_eq!(endpoints[0].1, endpoints[1].1, "one server for both");
    std::fs::write(
        dir.join("plant.toml"),
        example.replace("opc.tcp://127.0.0.1:4841/", endpoints[0].1),
    )
    .unwrap();
    (sim, control)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_over_opcua_never_completes_under_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, control) = start_sim(dir.path());
    let c = connect(dir.path()).await;
    liveness(&c, "lamp", "online").await;
    liveness(&c, "slide", "online").await;

    the_lamp_completes_and_the_bridge_tools_read_it(&c).await;
    each_lamp_fault_never_completes(&c, &control).await;

    // The slide moves (a variable write and a method call), then stalls on the way back.
    let mv = |t: f64| json!({"target_mm": t, "wait_s": 5});
    let (status, _, r) = act(&c, "slide_move_to", mv(150.0)).await;
    assert_eq!(status, "completed", "{r}");
    let pos = r["evidence"]["position_mm"]["value"].as_f64().unwrap();
    assert!((pos - 150.0).abs() <= 0.2, "{pos}");
    sim_ctl(&control, &["fault", "slide", "stall", "at_mm=100"]);
    let (status, code, r) = act(&c, "slide_move_to", mv(20.0)).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("failed", "MOTOR_STALL"),
        "{r}"
    );
    sim_ctl(&control, &["clear", "slide"]);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The lamp loses power: its nodes go dark, it is offline and refused; back when cleared.
    sim_ctl(&control, &["fault", "lamp", "power_off"]);
    liveness(&c, "lamp", "offline").await;
    let (status, code, r) = act(&c, "lamp_switch", switch(false)).await;
    assert_eq!(
        (status.as_str(), code.as_str()),
        ("rejected", "DEVICE_OFFLINE"),
        "{r}"
    );
    sim_ctl(&control, &["clear", "lamp"]);
    liveness(&c, "lamp", "online").await;
    let (status, _, r) = act(&c, "lamp_switch", switch(false)).await;
    assert_eq!(status, "completed", "{r}");
    c.cancel().await.unwrap();
}

/// The lamp's switch to `on`, waited on for 3 s.
fn switch(on: bool) -> serde_json::Value {
    json!({"on": on, "wait_s": 3})
}

/// The lamp completes on its contact node; the bridge tools browse and read the node.
async fn the_lamp_completes_and_the_bridge_tools_read_it(c: &Client) {
    let (status, _, r) = act(c, "lamp_switch", switch(true)).await;
    assert_eq!(status, "completed", "{r}");
    assert_eq!(r["verified"], json!(true));
    assert_eq!(
        r["evidence"]["contact"]["source"],
        json!("ns=2;s=lamp.Contact")
    );

    // The bridge tools.
    let b = call(
        c,
        "opcua_browse",
        json!({"device": "lamp", "node": "ns=2;s=lamp"}),
    )
    .await;
    let ids: Vec<&str> = sc(&b)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"ns=2;s=lamp.Contact"), "{ids:?}");
    let rd = call(
        c,
        "opcua_read",
        json!({"device": "lamp", "nodes": ["ns=2;s=lamp.Contact"]}),
    )
    .await;
    assert_eq!(sc(&rd)["values"][0]["value"], json!(true));
    assert_eq!(sc(&rd)["values"][0]["status"], json!("Good"));
}

/// Each device fault, at run time: the right code, never `completed`.
async fn each_lamp_fault_never_completes(c: &Client, control: &str) {
    let cases: [(&[&str], &[&str]); 5] = [
        (&["brownout"], &["FEEDBACK_MISMATCH"]),
        (&["swapped_contacts"], &["FEEDBACK_MISMATCH", "TIMEOUT"]),
        (
            &["latency_ms", "ms=1000"],
            &["FEEDBACK_MISMATCH", "TIMEOUT", "DEVICE_OFFLINE"],
        ),
        (
            &["drop_rate", "p=1.0"],
            &["FEEDBACK_MISMATCH", "DEVICE_OFFLINE"],
        ),
        (&["nak"], &["BUS_NAK"]),
    ];
    for (fault, codes) in cases {
        let (status, _, r) = act(c, "lamp_switch", switch(false)).await;
        assert_eq!(status, "completed", "{fault:?} (before): {r}");
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
