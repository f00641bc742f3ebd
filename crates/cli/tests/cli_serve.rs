//! `closedloop serve` as it starts: it refuses a journal that would lose commands and connection
//! limits that would refuse every client, explains at a terminal that it speaks MCP, and with
//! `--http 0.0.0.0:0` prints URLs that work.

mod common;

use common::{Running, closedloop, repo};
use std::process::Command;

#[test]
fn serve_refuses_an_in_memory_journal_that_would_lose_accepted_commands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plant.toml");
    let plant = std::fs::read_to_string(repo("examples/workshop.toml")).unwrap();
    let plant = match plant.find("journal = ") {
        Some(_) => plant
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("journal = ") {
                    "journal = \"sqlite::memory:\"".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => plant.replacen("[server]", "[server]\njournal = \"sqlite::memory:\"", 1),
    };
    std::fs::write(&path, plant).unwrap();
    let out = closedloop()
        .arg("serve")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keeps nothing"), "{err}");
    assert!(err.contains("sqlite://closedloop.db"), "{err}");
}

/// Lines of `r`, delivered on a channel so a test can wait for them with a deadline.
fn lines_of(r: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim_end_matches('\r').to_string()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Collects lines until one contains `last` (at most 30 s).
fn lines_until(rx: &std::sync::mpsc::Receiver<String>, last: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(last);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(e) => panic!("no line with {last:?} ({e}); got {seen:#?}"),
        }
    }
}

/// Task: `serve` at a terminal says what it is for, and goes on serving; the client
/// configuration it shows has the `env` block the plant's `${env:…}` needs.
#[test]
fn serve_at_a_terminal_explains_that_it_speaks_mcp_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("workshop.toml");
    let text = include_str!("../../../examples/workshop.toml").replace(
        "journal = \"sqlite://workshop.db\"",
        "journal = \"sqlite://${env:WORKSHOP_DB}\"",
    );
    std::fs::write(&plant, text).unwrap();
    let plant = std::fs::canonicalize(&plant).unwrap();
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_closedloop")).unwrap();
    // util-linux `script` runs the command with a pty as its stdin, as a terminal would.
    let mut child = Command::new("script")
        .args(["-q", "-f", "-e", "-c"])
        .arg(format!("{} serve {}", exe.display(), plant.display()))
        .arg("/dev/null")
        .env("WORKSHOP_DB", "workshop.db")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("util-linux `script` runs the server on a pty");
    let out = lines_of(child.stdout.take().unwrap());
    let mut child = Running(child);
    let seen = lines_until(&out, "Serving on stdio");
    let want = [
        "closedloop serve speaks MCP (JSON-RPC) on stdin and stdout: an MCP client starts it and talks to it; typing here does nothing useful.".to_string(),
        "  Claude Desktop (claude_desktop_config.json) or Cursor (.cursor/mcp.json):".into(),
        format!(
            "    {{ \"mcpServers\": {{ \"workshop\": {{ \"command\": \"{}\", \"args\": [\"serve\", \"{}\"], \"env\": {{ \"WORKSHOP_DB\": \"…\" }} }} }} }}",
            exe.display(),
            plant.display()
        ),
        format!(
            "  Over HTTP instead: closedloop serve {} --http 127.0.0.1:8080  (then the URL http://127.0.0.1:8080/mcp)",
            plant.display()
        ),
        "  To watch it work without a client: closedloop demo".into(),
        "Serving on stdio until the client closes it or Ctrl-C.".into(),
    ];
    assert_eq!(seen[seen.len() - want.len()..], want, "{seen:#?}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the server keeps serving"
    );

    // Started by a client (stdin a pipe), it says nothing of the kind.
    let out = closedloop()
        .arg("serve")
        .arg(&plant)
        .env("WORKSHOP_DB", "workshop.db")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("speaks MCP"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One HTTP request by hand with this `Host`; returns the status line.
fn http_status(addr: std::net::SocketAddr, host: &str, token: &str) -> String {
    use std::io::{Read, Write};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: list_devices\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or("").to_string()
}

/// Task: `--http 0.0.0.0:0` prints URLs a client can use, and those URLs work.
#[test]
fn serve_http_on_every_interface_prints_reachable_urls() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("lan.toml");
    std::fs::write(
        &plant,
        r#"
[[server.token]]
name = "ops"
sha256 = "c61ccd29905e57d595497d0db43a95e8c9200d54c5fec8122aac6580658ad5c3"
scopes = ["read"]

[[device]]
id = "probe"
description = "Room probe"
driver = { kind = "sim", model = "sensor", value = 21.5 }
[device.signals]
room_c = { input = 0, type = "i16", scale = 0.1 }
"#,
    )
    .unwrap();
    let mut child = closedloop()
        .arg("serve")
        .arg(&plant)
        .args(["--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = lines_of(child.stderr.take().unwrap());
    let _child = Running(child);
    let seen = lines_until(&err, "is every interface");
    assert!(
        !seen.iter().any(|l| l.contains("http://0.0.0.0")),
        "{seen:#?}"
    );
    let url = |l: &str, prefix: &str| -> Option<std::net::SocketAddr> {
        l.strip_prefix(prefix)?.strip_suffix("/mcp")?.parse().ok()
    };
    // Plain HTTP where other machines can reach it is said first, as a warning.
    assert!(
        seen[0].starts_with("closedloop: WARNING: plain HTTP on 0.0.0.0:"),
        "{seen:#?}"
    );
    let first = seen
        .iter()
        .find_map(|l| url(l, "closedloop: listening on http://"))
        .unwrap_or_else(|| panic!("no listening line: {seen:#?}"));
    assert!(first.ip().is_loopback(), "{seen:#?}");
    let port = first.port();
    assert_eq!(
        seen.last().unwrap(),
        &format!(
            "closedloop: 0.0.0.0 is every interface of this host: its other addresses answer on port {port} too; under a DNS name, add --allow-host NAME"
        )
    );
    let others: Vec<std::net::SocketAddr> = seen
        .iter()
        .filter_map(|l| url(l, "closedloop: also on http://"))
        .collect();
    for addr in std::iter::once(first).chain(others) {
        assert_eq!(addr.port(), port);
        let status = http_status(addr, &addr.to_string(), "newcomer-secret");
        assert!(status.contains(" 200 "), "{addr}: {status}");
    }
    let refused = http_status(first, "evil.example", "newcomer-secret");
    assert!(refused.contains(" 403 "), "{refused}");
}

/// `--max-connections 0` and `--idle-timeout 0` would refuse or drop every client: refused at
/// start, naming the flag and what to give.
#[test]
fn serve_http_refuses_connection_limits_that_would_refuse_every_client() {
    for (flag, value, says) in [
        (
            "--max-connections",
            "0",
            "--max-connections 0 would refuse every client",
        ),
        (
            "--idle-timeout",
            "0",
            "--idle-timeout 0: give a number of seconds above zero",
        ),
        (
            "--idle-timeout=-3",
            "",
            "--idle-timeout -3: give a number of seconds above zero",
        ),
    ] {
        let out = closedloop()
            .arg("serve")
            .arg(repo("examples/workshop.toml"))
            .args(["--http", "127.0.0.1:0", flag])
            .args((!value.is_empty()).then_some(value))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {err}");
        assert!(err.contains(says), "{flag} {value}: {err}");
    }
}
