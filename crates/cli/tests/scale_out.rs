//! Two gateways on one PostgreSQL journal (`CLOSEDLOOP_PG_URL`), driving the Modbus workshop that
//! `closedloop sim` serves as its own process: each device has one owner; a call to the other
//! gateway is refused and writes nothing; the owner's `kill -9` hands its devices to the survivor
//! within the lease; and an owner paused past its lease (SIGSTOP) writes nothing once resumed.
//! Ground truth is read from the simulator's registers with Modbus requests written here.

mod common;

use common::Running;
use common::pg::Database;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `closedloop sim` of the Modbus workshop on a free port; the plant `serve` uses, journaled to
/// `journal` with 2-second leases. Returns the sim and the Modbus address.
fn start_sim(dir: &Path, journal: &str) -> (Running, String) {
    let example = include_str!("../../../examples/modbus-workshop.toml");
    let sim_plant = example.replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"");
    std::fs::write(dir.join("sim.toml"), &sim_plant).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("sim")
        .arg(dir.join("sim.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut port = String::new();
    loop {
        let line = lines.next().expect("sim announces").unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["closedloop", "sim:", "control", "on", _] => break,
            ["closedloop", "sim:", _, "unit", _, "on", addr] => port = addr.to_string(),
            _ => {}
        }
    }
    let plant = example
        .replace(
            "address = \"127.0.0.1:1502\"",
            &format!("address = \"{port}\""),
        )
        .replace(
            "journal = \"sqlite://modbus-workshop.db\"",
            &format!("journal = \"{journal}\"\nlease_s = 2"),
        );
    std::fs::write(dir.join("plant.toml"), plant).unwrap();
    (Running(child), port)
}

/// `closedloop serve --instance NAME --http 127.0.0.1:0`: the process and its host:port.
fn gateway(dir: &Path, name: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .arg("serve")
        .arg(dir.join("plant.toml"))
        .args(["--instance", name, "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let host_port = loop {
        let line = lines.next().expect("serve announces").unwrap();
        if let Some(url) = line.strip_prefix("closedloop: listening on http://") {
            break url.trim_end_matches("/mcp").to_string();
        }
    };
    // Keep draining stderr so the gateway never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, host_port)
}

/// One stateless `tools/call` over a fresh connection: the result's structured content.
async fn call(host_port: &str, tool: &str, args: &str) -> Value {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(host_port).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let json = &answer[answer.find("\r\n\r\n").expect("a body") + 4..];
    let reply: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {answer}"));
    reply["result"]["structuredContent"].clone()
}

/// The owner `host_port` reports for `device`, once it reports one.
async fn owner(host_port: &str, device: &str) -> Option<String> {
    let state = call(
        host_port,
        "get_device_state",
        &format!(r#"{{"device":"{device}"}}"#),
    )
    .await;
    state["owner"].as_str().map(str::to_string)
}

/// Waits (at most 20 s) until `host_port` reports `want` (or any owner, for `None`) for
/// `device`; the owner it reports.
async fn owned_by(host_port: &str, device: &str, want: Option<&str>) -> String {
    for _ in 0..200 {
        if let Some(o) = owner(host_port, device).await
            && want.is_none_or(|w| w == o)
        {
            return o;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{device} never owned by {want:?} as {host_port} sees it");
}

/// The owner of `device` once both gateways report the same one twice, a second apart: the
/// first gateway up holds every device until the second is live, then hands over (between
/// commands, a round later) the ones that fall to the second.
async fn settled_owner(a_at: &str, b_at: &str, device: &str) -> String {
    for _ in 0..20 {
        let first = (owner(a_at, device).await, owner(b_at, device).await);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let then = (owner(a_at, device).await, owner(b_at, device).await);
        if let (Some(x), Some(y)) = &first
            && x == y
            && first == then
        {
            return x.clone();
        }
    }
    panic!("the owner of {device} never settled");
}

/// Reads `count` registers of `unit` from the simulator with Modbus function `function`
/// (2 discrete inputs, 3 holding registers), written byte by byte here.
async fn modbus_read(addr: &str, unit: u8, function: u8, start: u16, count: u16) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let [sh, sl] = start.to_be_bytes();
    let [ch, cl] = count.to_be_bytes();
    s.write_all(&[0, 7, 0, 0, 0, 6, unit, function, sh, sl, ch, cl])
        .await
        .unwrap();
    let mut head = [0u8; 9];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[7], function, "a Modbus exception: {head:?}");
    let mut data = vec![0u8; head[8] as usize];
    s.read_exact(&mut data).await.unwrap();
    data
}

/// The slide's position in mm, from holding registers 2–3 (i32, 0.01 mm).
async fn slide_mm(addr: &str) -> f64 {
    let d = modbus_read(addr, 2, 3, 2, 2).await;
    f64::from(i32::from_be_bytes([d[0], d[1], d[2], d[3]])) * 0.01
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_per_device_and_the_survivor_takes_over_after_kill_9() {
    let Some(db) = Database::create("two_gateways").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let lamp_owner = settled_owner(&a_at, &b_at, "lamp").await;
    let (owner_at, other_at, owner_child, survivor, mut other_child) = if lamp_owner == "a" {
        (&a_at, &b_at, &mut a, "b", b)
    } else {
        (&b_at, &a_at, &mut b, "a", a)
    };
    // The gateway that does not own the lamp refuses, naming the owner, and writes nothing.
    let refused = call(other_at, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(refused["status"], "rejected", "{refused}");
    assert_eq!(refused["error_code"], "DEVICE_BUSY", "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains(&lamp_owner),
        "{refused}"
    );
    assert_eq!(
        modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1,
        0,
        "the contact moved"
    );
    let done = call(owner_at, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1,
        1,
        "the contact did not move"
    );

    // The owner dies; after its lease the survivor holds the lamp and switches it.
    signal(owner_child, "-KILL");
    let _ = owner_child.wait();
    owned_by(other_at, "lamp", Some(survivor)).await;
    let done = call(other_at, "lamp_switch", r#"{"on":false,"wait_s":5}"#).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1, 0);
    let _ = other_child.kill();
    let _ = other_child.wait();
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_paused_past_its_lease_writes_nothing_once_resumed() {
    let Some(db) = Database::create("paused_owner").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let slide_owner = settled_owner(&a_at, &b_at, "slide").await;
    let (paused, paused_at, survivor, survivor_at) = if slide_owner == "a" {
        (&mut a, &a_at, "b", &b_at)
    } else {
        (&mut b, &b_at, "a", &a_at)
    };
    signal(paused, "-STOP");
    owned_by(survivor_at, "slide", Some(survivor)).await;
    let moved = call(
        survivor_at,
        "slide_move_to",
        r#"{"target_mm":50,"wait_s":5}"#,
    )
    .await;
    assert_eq!(moved["status"], "completed", "{moved}");
    // A call waits in the paused gateway's socket; resumed, it checks its lease before anything
    // else and refuses: it writes nothing under the lease it lost.
    let paused_at = paused_at.clone();
    let pending = tokio::spawn(async move {
        call(
            &paused_at,
            "slide_move_to",
            r#"{"target_mm":250,"wait_s":5}"#,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    signal(paused, "-CONT");
    let refused = pending.await.unwrap();
    assert_eq!(refused["status"], "rejected", "{refused}");
    assert_eq!(refused["error_code"], "DEVICE_BUSY", "{refused}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let at = slide_mm(&modbus).await;
    assert!((at - 50.0).abs() < 0.5, "the slide is at {at} mm, not 50");
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_whose_owner_is_killed_mid_way_completes_under_the_survivor() {
    let Some(db) = Database::create("failover_mid_move").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url);
    let (mut a, a_at) = gateway(dir.path(), "a");
    let (mut b, b_at) = gateway(dir.path(), "b");
    let slide_owner = settled_owner(&a_at, &b_at, "slide").await;
    let (doomed, doomed_at, survivor, survivor_at) = if slide_owner == "a" {
        (&mut a, &a_at, "b", &b_at)
    } else {
        (&mut b, &b_at, "a", &a_at)
    };
    // 0 → 250 mm at 100 mm/s: about 2.5 s, acknowledged and running when the owner dies.
    let started = call(
        doomed_at,
        "slide_move_to",
        r#"{"target_mm":250,"wait_s":0}"#,
    )
    .await;
    let id = started["command_id"].as_str().unwrap().to_string();
    for _ in 0..100 {
        if slide_mm(&modbus).await > 20.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(doomed, "-KILL");
    let _ = doomed.wait();
    owned_by(survivor_at, "slide", Some(survivor)).await;
    // The survivor recovered the command on taking the lease and supervises it to its end.
    let mut end = Value::Null;
    for _ in 0..10 {
        let args = format!(r#"{{"command_id":"{id}","wait_s":5}}"#);
        end = call(survivor_at, "get_command_status", &args).await;
        if end["status"] != "running" && end["status"] != "accepted" {
            break;
        }
    }
    assert_eq!(end["status"], "completed", "{end}");
    let events: Vec<&str> = end["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(events.contains(&"recovered"), "{events:?}");
    let at = slide_mm(&modbus).await;
    assert!((at - 250.0).abs() < 0.5, "the slide is at {at} mm");
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    db.drop().await;
}
