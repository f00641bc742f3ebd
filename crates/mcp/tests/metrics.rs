//! `/metrics` behind the same checks as the MCP endpoint: once the plant declares tokens a
//! scrape needs one (401 without), any token may read them, and `serve_metrics` (a stdio
//! server's `--metrics ADDR`) refuses to listen beyond loopback without a token. What the
//! series count is checked by tests/python/test_metrics.py with Prometheus's own parser.

mod common;

use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpError, HttpOptions};
use std::sync::Arc;

const VIEWER: &str = "viewer-secret-5d2e";

fn plant(tokens: bool) -> String {
    let token = format!(
        "[[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
        common::sha256_hex(VIEWER)
    );
    format!(
        "[server]\nname = \"metrics\"\njournal = \"sqlite::memory:\"\n{}\n{}",
        if tokens { token.as_str() } else { "" },
        common::plants::LAMP
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_needs_a_token_once_the_plant_declares_one() {
    let (engine, _sims) = common::engine(&plant(true), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}{}",
        listener.local_addr().unwrap(),
        http::METRICS_PATH
    );
    let server = Server::new(Arc::clone(&engine), "http");
    let opts = HttpOptions::default();
    tokio::spawn(http::serve(listener, server, opts, std::future::pending()));
    let client = reqwest::Client::new();

    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), reqwest::StatusCode::UNAUTHORIZED);
    let viewer = client.get(&url).bearer_auth(VIEWER).send().await.unwrap();
    assert_eq!(viewer.status(), reqwest::StatusCode::OK);
    let ctype = viewer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    let body = viewer.text().await.unwrap();
    assert!(
        body.contains("closedloop_device_up{device=\"lamp\"}"),
        "{body}"
    );
}

#[tokio::test]
async fn serve_metrics_beyond_loopback_without_tokens_is_refused() {
    let (engine, _sims) = common::engine(&plant(false), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = http::serve_metrics(
        listener,
        engine,
        HttpOptions::default(),
        std::future::pending(),
    )
    .await;
    assert!(
        matches!(refused, Err(HttpError::NoTokens(_))),
        "{refused:?}"
    );
}
