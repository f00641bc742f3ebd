//! 2025-era sessions over HTTP: a session belongs to the token that opened it, and a token may
//! hold only so many. Driven by hand-made HTTP requests, as another client would send them.

mod common;

use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use reqwest::StatusCode;
use serde_json::json;
use std::sync::Arc;

const A: &str = "alpha-secret-0c1d";
const B: &str = "bravo-secret-5e6f";

fn plant() -> String {
    format!(
        r#"
[server]
name = "sessions"
journal = "sqlite::memory:"
[[server.token]]
name = "alpha"
sha256 = "{}"
scopes = ["read"]
[[server.token]]
name = "bravo"
sha256 = "{}"
scopes = ["read"]

[[device]]
id = "lamp"
description = "Bench lamp"
driver = {{ kind = "sim", model = "relay" }}
[device.signals]
on = {{ discrete_input = 0 }}
"#,
        common::sha256_hex(A),
        common::sha256_hex(B)
    )
}

async fn gateway(opts: HttpOptions) -> String {
    let (engine, _sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(listener, server, opts, std::future::pending()));
    url
}

fn post(
    url: &str,
    token: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&body);
    if let Some(s) = session {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-06-18");
    }
    r
}

/// Opens a session with `token`: its id, or the refusal's status and text.
async fn open(url: &str, token: &str) -> Result<String, (StatusCode, String)> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "sessions-test", "version": "1"}}});
    let r = post(url, token, None, init).send().await.unwrap();
    let status = r.status();
    let id = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    match (status, id) {
        (StatusCode::OK, Some(id)) => {
            let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let r = post(url, token, Some(&id), done).send().await.unwrap();
            assert!(r.status().is_success(), "initialized: {}", r.status());
            Ok(id)
        }
        (status, _) => Err((status, text)),
    }
}

async fn list_tools(url: &str, token: &str, session: &str) -> (StatusCode, String) {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let r = post(url, token, Some(session), body).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_used_with_another_token_is_refused() {
    let url = gateway(HttpOptions::default()).await;
    let session = open(&url, A).await.expect("alpha opens a session");
    let (status, text) = list_tools(&url, A, &session).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = list_tools(&url, B, &session).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("opened with another token"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_holds_at_most_its_sessions_and_a_closed_one_frees_its_place() {
    let opts = HttpOptions {
        max_sessions_per_caller: 2,
        ..HttpOptions::default()
    };
    let url = gateway(opts).await;
    let first = open(&url, A).await.expect("first");
    open(&url, A).await.expect("second");
    let (status, text) = open(&url, A).await.expect_err("a third session of alpha");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert!(
        text.contains("alpha already holds as many sessions as it may (2 a token")
            && text.contains("DELETE"),
        "{text}"
    );
    open(&url, B)
        .await
        .expect("another token is not held to alpha's count");
    let r = reqwest::Client::new()
        .delete(&url)
        .bearer_auth(A)
        .header("mcp-session-id", &first)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    // 200, as the official SDKs expect (rmcp says 202, which they log as a failure).
    assert_eq!(r.status(), reqwest::StatusCode::OK, "DELETE");
    open(&url, A)
        .await
        .expect("a closed session frees its place");
}
