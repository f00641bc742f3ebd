//! Under attack, round two (issue 53): the red team one step aside from `floods.rs`, against
//! `closedloop serve --http` over loopback sockets while a slide (`closedloop sim`, over Modbus
//! TCP) moves. Under each attack the operator's `cancel_command` must answer `cancelled` and the
//! slide must stand short of its target, read from the simulator's registers; the cancel's
//! latency is a figure (`.ci/run` prints them), not an assertion.
//!
//! The attacks: slow `POST /signin` heads from two addresses, which once held the permits kept
//! for acting (nothing scarce before authentication); tokenless keep-alive connections from the
//! operator's own address (a newcomer from an address at its cap evicts the address's oldest
//! unauthenticated connection); one token that may act on the lamp only holding 256 keep-alive
//! connections (a token over a quarter of the slots gives way, acting or not); three read-only
//! tokens holding sixteen event streams each (a token holding nothing still gets a request in).

mod common;

#[path = "floods/client.rs"]
mod client;

#[path = "floods/attack.rs"]
mod attack;

use attack::{OPERATOR, OPERATOR_AT, VIEWER, cancelled, cancelled_from, moving};
use client::{Gateway, LAMP_ONLY, READERS, connect_from};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection from `from` that sent `head` and keeps its body coming never; `None` when the
/// server refused or closed it at once.
async fn holding(gw: &Gateway, from: [u8; 4], head: &str) -> Option<TcpStream> {
    let mut s = connect_from(from, gw.addr).await?;
    s.write_all(head.as_bytes()).await.ok()?;
    Some(s)
}

/// Reads one whole answer head from `s` (bounded), for keep-alive requests.
async fn answer_head(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut byte)).await {
            Ok(Ok(1)) => got.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_sign_in_heads_take_nothing_kept_for_acting() {
    let gw = Gateway::start(OPERATOR, VIEWER);
    let id = moving(&gw, 300.0).await;
    let head = format!(
        "POST /signin HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\ntoken=",
        gw.addr
    );
    let mut held = Vec::new();
    for from in [[127, 0, 0, 61], [127, 0, 0, 62]] {
        for _ in 0..32 {
            held.extend(holding(&gw, from, &head).await);
        }
    }
    cancelled(&gw, &id, 300.0, "64 slow sign-in heads from two addresses").await;
    // The signed-in reader still loads what the page reads.
    let state = client::request(
        &gw,
        [127, 0, 0, 63],
        "GET",
        "/metrics",
        &[("Authorization", &format!("Bearer {VIEWER}"))],
        "",
    )
    .await;
    assert_eq!(state.status, 200, "{}", state.head);
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenless_connections_from_the_operators_own_address_never_keep_the_operator_out() {
    let gw = Gateway::start(OPERATOR, VIEWER);
    let id = moving(&gw, 300.0).await;
    // Each sends one request without a token (401) and keeps its connection open.
    let head = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", gw.addr);
    let mut held = Vec::new();
    for _ in 0..40 {
        if let Some(mut s) = holding(&gw, OPERATOR_AT, &head).await {
            let answer = answer_head(&mut s).await;
            assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
            held.push(s);
        }
    }
    let attack = "40 tokenless keep-alive connections from the operator's own address";
    cancelled_from(&gw, OPERATOR_AT, &id, 300.0, attack).await;
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_acting_token_holding_every_slot_gives_way_to_others() {
    let gw = Gateway::start(OPERATOR, VIEWER);
    let id = moving(&gw, 300.0).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {LAMP_ONLY}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{body}",
        gw.addr,
        body.len()
    );
    // Spread over addresses, as an agent behind several hosts would: no per-address cap helps.
    let mut held = Vec::new();
    for i in 0..256u32 {
        let from = [127, 0, 1, (i % 200) as u8 + 1];
        if let Some(mut s) = holding(&gw, from, &head).await {
            let answer = answer_head(&mut s).await;
            if answer.starts_with("HTTP/1.1 200") {
                held.push(s);
            }
        }
    }
    assert!(held.len() > 200, "the token got {} connections", held.len());
    let attack = "one lamp-only token holding 256 keep-alive connections";
    cancelled(&gw, &id, 300.0, attack).await;
    // Every other token still gets its connections: the hog gives way down to its quarter.
    let viewer_head = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {VIEWER}\r\n\r\n",
        gw.addr
    );
    let mut viewer = Vec::new();
    for i in 0..100u8 {
        let mut s = holding(&gw, [127, 0, 2, i + 1], &viewer_head)
            .await
            .expect("the viewer's connection is taken");
        let answer = answer_head(&mut s).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "viewer connection {i}: {answer}"
        );
        viewer.push(s);
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_readers_holding_every_general_permit_leave_the_operator_its_page() {
    let gw = Gateway::start(OPERATOR, VIEWER);
    let id = moving(&gw, 300.0).await;
    let mut streams = Vec::new();
    for (i, token) in [VIEWER, READERS[0], READERS[1]].into_iter().enumerate() {
        for _ in 0..16 {
            let mut s = connect_from([127, 0, 3, i as u8 + 1], gw.addr)
                .await
                .expect("connects");
            let auth = format!("Bearer {token}");
            let head =
                client::get_head(&mut s, &gw, "/page/events", &[("Authorization", &auth)]).await;
            match head.split(' ').nth(1) {
                Some("200") => streams.push(s),
                Some("503") => {}
                other => panic!("reader {i}: {other:?}: {head}"),
            }
        }
    }
    // Each reader held all it was let: the general permits (40 of 64) ran out first.
    assert!(
        streams.len() >= 40,
        "the readers hold {} streams",
        streams.len()
    );
    // The operator's page reads (not a call that acts: no reserved permit) still answer.
    let auth = format!("Bearer {OPERATOR}");
    for path in ["/page/state", "/page/commands"] {
        let r = client::request(
            &gw,
            OPERATOR_AT,
            "GET",
            path,
            &[("Authorization", &auth)],
            "",
        )
        .await;
        assert_eq!(r.status, 200, "{path}: {}", r.head);
    }
    cancelled(
        &gw,
        &id,
        300.0,
        "three readers holding 16 event streams each",
    )
    .await;
    drop(streams);
}
