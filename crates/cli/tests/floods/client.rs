//! The attacked gateway and an HTTP client written here over plain sockets, for `floods.rs`:
//! `closedloop sim` serving the Modbus workshop (its slide slowed to 40 mm/s), `closedloop serve
//! --http` with an operator's and a viewer's token, and requests sent from a chosen loopback
//! source address (127.0.0.0/8 all reaches this host), as hosts on a network would send them.

#![allow(dead_code)] // shared by floods.rs and floods_round_two.rs, which use different parts

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A third token, which may act on the lamp only: an agent that holds connections.
pub const LAMP_ONLY: &str = "lamp-only-secret-3c9d";
/// Two more tokens that may only read, beside the viewer's.
pub const READERS: [&str; 2] = ["reader-two-secret-71aa", "reader-three-secret-0e42"];

/// The simulator and the gateway, killed when dropped.
pub struct Gateway {
    pub addr: SocketAddr,
    pub modbus: String,
    sim: Child,
    serve: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        for c in [&mut self.sim, &mut self.serve] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn sha256_hex(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first stdout (or stderr) line of `child` that `pick` takes, bounded by the child's life.
fn announced(
    lines: &mut dyn Iterator<Item = std::io::Result<String>>,
    pick: impl Fn(&str) -> Option<String>,
) -> String {
    for line in lines {
        if let Some(got) = pick(&line.expect("a line")) {
            return got;
        }
    }
    panic!("the process ended before announcing itself");
}

impl Gateway {
    /// The simulator and the gateway on free ports, with tokens `operator` (acts on every
    /// device) and `viewer` (reads).
    pub fn start(operator: &str, viewer: &str) -> Gateway {
        Gateway::start_with(operator, viewer, &[])
    }

    /// [`Gateway::start`] with more `serve` arguments (`--trusted-proxy 127.0.0.2`).
    pub fn start_with(operator: &str, viewer: &str, serve_args: &[&str]) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let example = include_str!("../../../../examples/modbus-workshop.toml")
            .replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"")
            .replace("speed_mm_s = 100.0", "speed_mm_s = 40.0");
        std::fs::write(dir.path().join("sim.toml"), &example).unwrap();
        let mut sim = Command::new(env!("CARGO_BIN_EXE_closedloop"))
            .arg("sim")
            .arg(dir.path().join("sim.toml"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(sim.stdout.take().unwrap()).lines();
        let modbus = announced(&mut out, |l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["closedloop", "sim:", "slide", "unit", _, "on", addr] => Some(addr.to_string()),
                _ => None,
            }
        });
        announced(&mut out, |l| {
            l.starts_with("closedloop sim: control on")
                .then(String::new)
        });
        let tokens = format!(
            "\n[[server.token]]\nname = \"operator\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:*\"]\n\
             [[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n\
             [[server.token]]\nname = \"lamp_only\"\nsha256 = \"{}\"\nscopes = [\"actuate:lamp\"]\n\
             [[server.token]]\nname = \"reader_two\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n\
             [[server.token]]\nname = \"reader_three\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
            sha256_hex(operator),
            sha256_hex(viewer),
            sha256_hex(LAMP_ONLY),
            sha256_hex(READERS[0]),
            sha256_hex(READERS[1])
        );
        let plant = example
            .replace(
                "address = \"127.0.0.1:1502\"",
                &format!("address = \"{modbus}\""),
            )
            .replace(
                "journal = \"sqlite://modbus-workshop.db\"",
                &format!("journal = \"sqlite://floods.db\"{tokens}"),
            );
        std::fs::write(dir.path().join("plant.toml"), plant).unwrap();
        let mut serve = Command::new(env!("CARGO_BIN_EXE_closedloop"))
            .arg("serve")
            .arg(dir.path().join("plant.toml"))
            .args(["--http", "127.0.0.1:0"])
            .args(serve_args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(serve.stderr.take().unwrap()).lines();
        let addr = announced(&mut err, |l| {
            let url = l.strip_prefix("closedloop: listening on http://")?;
            Some(url.trim_end_matches("/mcp").to_string())
        });
        // Keep draining stderr so the gateway never blocks on a full pipe.
        std::thread::spawn(move || for _ in err {});
        Gateway {
            addr: addr.parse().unwrap(),
            modbus,
            sim,
            serve,
            _dir: dir,
        }
    }
}

/// A connection from `from` to `to`; `None` when the server refused it at once.
pub async fn connect_from(from: [u8; 4], to: SocketAddr) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((from, 0))).ok()?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(to))
        .await
        .ok()?
        .ok()
}

/// One answer: status, head, body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// A header's value (name in lower case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// One request from `from` on a fresh connection (`Connection: close`); the whole answer (status
/// 0 when the connection was refused or reset).
pub async fn request(
    gw: &Gateway,
    from: [u8; 4],
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let Some(mut s) = connect_from(from, gw.addr).await else {
        return Answer {
            status: 0,
            head: "refused".into(),
            body: String::new(),
        };
    };
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    if s.write_all(text.as_bytes()).await.is_err() {
        return Answer {
            status: 0,
            head: "reset".into(),
            body: String::new(),
        };
    }
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got).to_string();
    let (head, body) = got.split_once("\r\n\r\n").unwrap_or((&got, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A stateless MCP `tools/call` from `from` with bearer `token`.
pub async fn mcp(gw: &Gateway, from: [u8; 4], token: &str, tool: &str, args: &str) -> Answer {
    mcp_with(gw, from, token, tool, args, &[]).await
}

/// [`mcp`] with more headers (`X-Forwarded-For`).
pub async fn mcp_with(
    gw: &Gateway,
    from: [u8; 4],
    token: &str,
    tool: &str,
    args: &str,
    more: &[(&str, &str)],
) -> Answer {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    let headers: Vec<(&str, &str)> = headers.iter().chain(more).copied().collect();
    request(gw, from, "POST", "/mcp", &headers, &body).await
}

/// [`mcp`]'s structured content, which must be there.
pub async fn call_as(gw: &Gateway, from: [u8; 4], token: &str, tool: &str, args: &str) -> Value {
    let a = mcp(gw, from, token, tool, args).await;
    let v: Value = serde_json::from_str(&a.body)
        .unwrap_or_else(|e| panic!("{tool}: {e}: {} {}", a.head, a.body));
    v["result"]["structuredContent"].clone()
}

/// Sends a GET on `s` and reads its answer's head, leaving the connection open (an event
/// stream's body goes on).
pub async fn get_head(
    s: &mut TcpStream,
    gw: &Gateway,
    path: &str,
    headers: &[(&str, &str)],
) -> String {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let text = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n", gw.addr);
    s.write_all(text.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut byte)).await {
            Ok(Ok(1)) => got.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).to_string()
}
