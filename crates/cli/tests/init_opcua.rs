//! `closedloop init --opcua` through the binary: `closedloop sim` serves
//! examples/opcua-workshop.toml's lamp and slide as OPC UA objects, and the plant surveyed from
//! them has a device per object with its variables, and loads; every wrong turn gets a message
//! naming it — an endpoint nobody answers, a start node the server does not know, two start
//! nodes, a start with nothing below it. An asyncua pump skid, a server closedloop did not
//! write, is surveyed, written and called in `tests/python/test_init_opcua.py`.

mod common;

use common::*;
use std::path::Path;

/// The workshop's OPC UA server on a free port; its endpoint.
fn workshop(dir: &Path) -> (Running, String) {
    let example = include_str!("../../../examples/opcua-workshop.toml");
    let plant = dir.join("sim.toml");
    std::fs::write(
        &plant,
        example.replace("opcua = \"127.0.0.1:4841\"", "opcua = \"127.0.0.1:0\""),
    )
    .unwrap();
    let (sim, _control, announced) = start_sim_plant(&plant);
    let endpoint = announced
        .iter()
        .find(|w| w.get(1).map(String::as_str) == Some("opcua"))
        .map(|w| w[3].clone())
        .expect("an OPC UA endpoint announced");
    (sim, endpoint)
}

#[test]
fn the_workshops_objects_become_devices_with_their_variables() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, endpoint) = workshop(dir.path());
    let out = init(&["--opcua", &endpoint, "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "id = \"lamp\"",
        "id = \"slide\"",
        "node = \"ns=2;s=lamp.Contact\", type = \"bool\"",
        &format!("driver = {{ kind = \"opcua\", endpoint = \"{endpoint}\", security = \"none\" }}"),
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert!(
        !text.contains("ns=0") && !text.contains("i=2253"),
        "no standard nodes: {text}"
    );
    let err = stderr(&out);
    assert!(err.starts_with("printed the plant: 2 devices, "), "{err}");
    let plant = dir.path().join("surveyed.toml");
    std::fs::write(&plant, text.as_bytes()).unwrap();
    let checked = closedloop().arg("check").arg(&plant).output().unwrap();
    assert!(checked.status.success(), "{}", stderr(&checked));

    // Started at an object, that object is the device.
    let lamp = init(&["--opcua", &endpoint, "--node", "ns=2;s=lamp", "--dry-run"]);
    assert!(lamp.status.success(), "{}", stderr(&lamp));
    let text = String::from_utf8_lossy(&lamp.stdout);
    assert!(
        text.contains("id = \"lamp\"") && !text.contains("id = \"slide\""),
        "{text}"
    );
    assert!(
        stderr(&lamp).starts_with("printed the plant: 1 devices, "),
        "{}",
        stderr(&lamp)
    );

    let unknown = init(&["--opcua", &endpoint, "--node", "ns=2;s=nothing"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(
        stderr(&unknown).contains("ns=2;s=nothing")
            && stderr(&unknown).contains("Bad_NodeIdUnknown"),
        "{}",
        stderr(&unknown)
    );
    let leaf = init(&["--opcua", &endpoint, "--node", "ns=2;s=lamp.Contact"]);
    assert_eq!(leaf.status.code(), Some(1));
    assert!(
        stderr(&leaf).contains("no object below ns=2;s=lamp.Contact holds variables or methods"),
        "{}",
        stderr(&leaf)
    );
}

#[test]
fn an_endpoint_nobody_answers_and_two_start_nodes_are_refused_with_what_to_do() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("opc.tcp://{}/", closed.local_addr().unwrap());
    drop(closed);
    let out = init(&["--opcua", &endpoint]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("{endpoint}: no session (")),
        "{err}"
    );
    assert!(
        err.contains("check the endpoint, --security and --server-cert"),
        "{err}"
    );
    let two = init(&["--opcua", &endpoint, "--node", "i=85", "--node", "i=86"]);
    assert_eq!(two.status.code(), Some(2));
    assert!(
        stderr(&two).contains("give one --node to start from, not 2"),
        "{}",
        stderr(&two)
    );
    let bad = init(&["--opcua", "http://plc:4840"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("is not an OPC UA endpoint; write e.g. \"opc.tcp://host:4840/path\""),
        "{}",
        stderr(&bad)
    );
}
