//! MCP over Streamable HTTP from both client generations on one endpoint — a 2025 session and a
//! 2026-07-28 stateless client (and a raw request) — and a dropped request that must not cancel
//! the move it waited on.

mod common;

use closedloop_mcp::http::HttpOptions;
use common::gateway::{
    Gateway, OPS, raw_tool, result, running_on, session_client, stateless_client, tokens,
};
use common::{call, sc};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_client_acts_and_the_journal_names_its_token() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let client = session_client(&gw.url, Some(OPS)).await;
    let info = client.peer_info().unwrap();
    assert!(info.protocol_version.has_initialize(), "{info:?}");
    let r = call(&client, "lamp_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(sc(&r)["status"], "completed", "{r:?}");
    assert_eq!(r.is_error, Some(false));
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    let listed = call(&client, "list_commands", json!({"device": "lamp"})).await;
    assert!(sc(&listed).to_string().contains(&id));
    client.cancel().await.unwrap();
    assert_eq!(gw.stop_and_caller(&id).await.as_deref(), Some("ops"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_stateless_client_acts_on_the_same_endpoint() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let client = stateless_client(&gw.url, Some(OPS)).await;
    let r = call(&client, "lamp_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(sc(&r)["status"], "completed", "{r:?}");
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    // And one raw request, to see the headers work without an SDK: plain JSON back, no session.
    let resp = raw_tool(
        &gw.url,
        Some(OPS),
        "lamp_switch",
        json!({"on": false, "wait_s": 5}),
    )
    .send()
    .await
    .unwrap();
    assert!(resp.headers().get("mcp-session-id").is_none());
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let res = result(resp).await;
    assert_eq!(res["structuredContent"]["status"], "completed", "{res}");
    client.cancel().await.unwrap();
    assert_eq!(gw.stop_and_caller(&id).await.as_deref(), Some("ops"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_does_not_cancel_the_physical_command() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    // A 2 s move, waited on by a request that goes away after half a second of it.
    let waiting = tokio::spawn(
        raw_tool(
            &gw.url,
            Some(OPS),
            "slide_move_to",
            json!({"target_mm": 100.0, "wait_s": 10}),
        )
        .send(),
    );
    let id = running_on(&gw.engine, "slide").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    let client = stateless_client(&gw.url, Some(OPS)).await;
    let r = call(
        &client,
        "get_command_status",
        json!({"command_id": id, "wait_s": 10}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "completed", "{r:?}");
    assert_eq!(sc(&r)["verified"], true);
    let timeline = sc(&r)["timeline"].to_string();
    assert!(!timeline.contains("cancel"), "{timeline}");
    // The same through a 2025 session whose client gives up waiting (it drops the call).
    let session = session_client(&gw.url, Some(OPS)).await;
    let back = call(
        &session,
        "slide_move_to",
        json!({"target_mm": 0.0, "wait_s": 10}),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), back)
            .await
            .is_err()
    );
    let back_id = running_on(&gw.engine, "slide").await;
    let r = call(
        &client,
        "get_command_status",
        json!({"command_id": back_id, "wait_s": 10}),
    )
    .await;
    assert_eq!(sc(&r)["status"], "completed", "{r:?}");
    session.cancel().await.unwrap();
    client.cancel().await.unwrap();
    assert_eq!(gw.stop_and_caller(&id).await.as_deref(), Some("ops"));
}
