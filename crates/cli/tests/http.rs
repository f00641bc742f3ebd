//! `closedloop serve PLANT --http ADDR` as an operator runs it: the announced address, the
//! start-up banner (devices online and offline, journal, endpoints), one
//! stateless MCP call over a plain socket, SIGTERM, and the refusal to listen beyond loopback
//! without a token. (The HTTP layer itself is tested in `crates/mcp/tests/http_*.rs`.)

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const PLANT: &str = include_str!("../../../tests/plants/faults.toml");

fn plant_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plant.toml"), PLANT).unwrap();
    dir
}

fn serve(dir: &Path, addr: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    cmd.arg("serve")
        .arg(dir.join("plant.toml"))
        .arg("--http")
        .arg(addr)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// One 2026-07-28 `tools/call` over a fresh connection, written by hand; returns the raw answer.
async fn call(host_port: &str, tool: &str, args: &str) -> String {
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
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_http_announces_its_address_serves_and_stops_on_sigterm() {
    let dir = plant_dir();
    let mut child = serve(dir.path(), "127.0.0.1:0").spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("announced in time")
            .unwrap()
            .expect("stderr open until announced");
        if let Some(url) = line.strip_prefix("closedloop: listening on ") {
            break url.to_string();
        }
    };
    let host_port = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("{url}"))
        .to_string();
    assert!(host_port.starts_with("127.0.0.1:"), "{host_port}");
    assert!(!host_port.ends_with(":0"), "{host_port}");
    // The banner, once the devices have answered or been found silent: the plant, its devices
    // (the unpowered relay among the offline ones), the journal and the endpoints.
    let mut banner = Vec::new();
    while banner.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the banner in time")
            .unwrap()
            .expect("stderr open until the banner");
        if line.starts_with("closedloop: plant ") || !banner.is_empty() {
            banner.push(line);
        }
    }
    let devices = PLANT.matches("[[device]]").count();
    assert!(
        banner[0].contains(&format!("): {devices} devices: ")),
        "{banner:?}"
    );
    let offline = banner[0].split(" offline (").nth(1).unwrap_or_default();
    assert!(
        offline.starts_with("dead") || offline.contains(" dead"),
        "{banner:?}"
    );
    assert!(
        banner[1].starts_with("closedloop: journal sqlite://"),
        "{banner:?}"
    );
    assert_eq!(banner[2], format!("closedloop: MCP {url}"));
    assert_eq!(
        banner[3],
        format!("closedloop: metrics {}", url.replace("/mcp", "/metrics"))
    );
    assert_eq!(
        banner[4],
        format!("closedloop: operator page {}", url.replace("/mcp", "/"))
    );
    // Keep reading stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let answer = call(&host_port, "lamp_switch", r#"{"on":true,"wait_s":5}"#).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""status":"completed""#), "{answer}");

    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn serve_http_beyond_loopback_without_tokens_is_refused_before_starting() {
    let dir = plant_dir();
    let out = serve(dir.path(), "0.0.0.0:0").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[[server.token]]"), "{err}");
    assert!(err.contains("127.0.0.1"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Nothing started: no journal was opened.
    assert!(!dir.path().join("journal.db").exists());
}
