//! Connections as an attacker would open them: many that never send a byte, more than the
//! server takes. Each is closed (idle ones after the idle timeout, those beyond the cap at
//! once), and a real client is still served afterwards.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_the_cap_is_closed_at_once_and_its_slot_comes_back() {
    let opts = HttpOptions {
        max_connections: 4,
        idle_timeout: Duration::from_secs(30),
        ..HttpOptions::default()
    };
    let addr = gateway(opts).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    // Give the server the time to accept the four (it accepts in order).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut fifth = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut fifth, Duration::from_secs(5)).await,
        "a fifth connection was kept beyond a cap of four"
    );
    for s in &mut held {
        assert!(
            !closed_within(s, Duration::from_millis(50)).await,
            "a held connection was closed"
        );
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = list_devices(addr).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the slots never came back: {answer}"
    );
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
