//! Connections as an attacker would open them: many that never send a byte, more than the
//! server takes. Each is closed (idle ones after the idle timeout, one that sends no request head
//! after the handshake window, the oldest silent one when a newcomer needs its slot, a newcomer
//! at once when every slot is authenticated), and a real client is still served afterwards.

mod common;

use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PLANT: &str = r#"
[server]
name = "conns"
journal = "sqlite::memory:"

[[device]]
id = "lamp"
description = "Bench lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
on = { discrete_input = 0 }
"#;

/// Serves the plant over HTTP with `opts`; the address.
async fn gateway(opts: HttpOptions) -> SocketAddr {
    let (engine, _sims) = common::engine(PLANT, std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(listener, server, opts, std::future::pending()));
    addr
}

/// Whether the server closed `s` within `within` (a read of 0 bytes or a reset).
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(within, s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) => false,
        Err(_) => false,
    }
}

/// One complete request (`list_devices`) on a fresh connection; the whole answer.
async fn list_devices(addr: SocketAddr) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: list_devices\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut answer)).await;
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_send_a_byte_are_closed_after_the_idle_timeout() {
    let opts = HttpOptions {
        idle_timeout: Duration::from_millis(500),
        ..HttpOptions::default()
    };
    let addr = gateway(opts).await;
    let mut silent = Vec::new();
    for _ in 0..50 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    let start = Instant::now();
    for (i, s) in silent.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(5)).await,
            "silent connection {i} still open after {:?}",
            start.elapsed()
        );
    }
    // A request that stalls halfway through its headers is closed the same way.
    let mut stalled = TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    assert!(
        closed_within(&mut stalled, Duration::from_secs(5)).await,
        "a stalled header stays open"
    );
    let answer = list_devices(addr).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "a real client is no longer served: {answer}"
    );
}

/// One `list_devices` on `s`, kept open (`Connection: keep-alive`); the answer's status line.
async fn list_devices_on(s: &mut TcpStream) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_devices","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: list_devices\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Until the head and its Content-Length of body are in (bounded: 5 s).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = (text[..end].lines())
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")?
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return text.lines().next().unwrap_or_default().to_string();
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return String::from_utf8_lossy(&got).to_string(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_new_connection_evicts_the_oldest_silent_one_never_an_authenticated_one() {
    let opts = HttpOptions {
        max_connections: 4,
        idle_timeout: Duration::from_secs(30),
        ..HttpOptions::default()
    };
    let addr = gateway(opts).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr).await.unwrap());
        // Accepted in order, so the first is the oldest.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A fifth, silent too: it takes the oldest silent one's slot, not the other way round.
    let mut fifth = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut held[0], Duration::from_secs(5)).await,
        "the oldest silent connection kept its slot"
    );
    for s in held.iter_mut().skip(1) {
        assert!(
            !closed_within(s, Duration::from_millis(50)).await,
            "a newer one was closed"
        );
    }
    // The fifth and three others authenticate (the local user: it may act).
    let mut authenticated = vec![fifth];
    authenticated.extend(held.drain(1..));
    for s in &mut authenticated {
        assert_eq!(list_devices_on(s).await, "HTTP/1.1 200 OK");
    }
    // All four slots held by connections that authenticated: a newcomer can evict nothing.
    let mut late = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut late, Duration::from_secs(5)).await,
        "a connection was kept beyond a cap of four held by authenticated ones"
    );
    for s in &mut authenticated {
        assert_eq!(
            list_devices_on(s).await,
            "HTTP/1.1 200 OK",
            "an authenticated one was evicted"
        );
    }
    drop(authenticated);
    tokio::time::sleep(Duration::from_millis(200)).await;
    fifth = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        list_devices_on(&mut fifth).await,
        "HTTP/1.1 200 OK",
        "the slots never came back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_no_request_head_within_the_handshake_window_is_closed() {
    let opts = HttpOptions {
        handshake_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_secs(30),
        ..HttpOptions::default()
    };
    let addr = gateway(opts).await;
    let start = Instant::now();
    // Never quiet (a byte every 50 ms, under the idle timeout), never a whole head.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut closed = false;
    for b in b"GET / HTTP/1.1\r\nX-Slow: "
        .iter()
        .chain(std::iter::repeat(&b'a'))
        .take(100)
    {
        if s.write_all(&[*b]).await.is_err()
            || closed_within(&mut s, Duration::from_millis(50)).await
        {
            closed = true;
            break;
        }
    }
    let took = start.elapsed();
    assert!(
        closed && took >= Duration::from_millis(400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    // A connection whose head came is past the window: it stays for the idle timeout.
    let mut served = TcpStream::connect(addr).await.unwrap();
    assert_eq!(list_devices_on(&mut served).await, "HTTP/1.1 200 OK");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(list_devices_on(&mut served).await, "HTTP/1.1 200 OK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_trickled_a_byte_at_a_time_is_closed_after_the_request_timeout() {
    let opts = HttpOptions {
        idle_timeout: Duration::from_secs(30),
        request_timeout: Duration::from_millis(600),
        ..HttpOptions::default()
    };
    let addr = gateway(opts).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let start = Instant::now();
    let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let mut closed = false;
    // Never quiet for long (a byte every 50 ms), never done: bounded at 200 bytes (10 s).
    for b in head.iter().chain(std::iter::repeat(&b'a')).take(200) {
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        if closed_within(&mut s, Duration::from_millis(50)).await {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "a trickled request kept its connection for {:?}",
        start.elapsed()
    );
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "closed before the request timeout: {:?}",
        start.elapsed()
    );
    let answer = list_devices(addr).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "a real client is no longer served: {answer}"
    );
}
