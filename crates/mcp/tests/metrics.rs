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

/// Every family a scrape shows has a `# HELP` beside its `# TYPE`, and each histogram's buckets
/// fit what it measures: the journal's writes per transaction in counts (1, 2, 4 … 512), not in
/// the seconds of the durations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_family_has_help_and_batch_writes_are_bucketed_in_counts() {
    use rmcp::ServiceExt;
    // Installed before the engine, as `closedloop serve` does: the journal's writer registers
    // its histograms when it starts.
    assert!(closedloop_mcp::metrics::install().is_some());
    let (engine, _sims) = common::engine(&plant(true), std::path::Path::new(".")).await;
    let io = common::pipe(Server::new(Arc::clone(&engine), "tester"));
    let agent = ().serve(io).await.unwrap();
    let done = common::call(&agent, "lamp_switch", serde_json::json!({"on": true})).await;
    assert_eq!(common::sc(&done)["status"], "completed", "{done:?}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}{}",
        listener.local_addr().unwrap(),
        http::METRICS_PATH
    );
    let server = Server::new(Arc::clone(&engine), "http");
    let opts = HttpOptions::default();
    tokio::spawn(http::serve(listener, server, opts, std::future::pending()));
    // The command is counted as the engine lets go of it, just after its answer.
    let mut body = String::new();
    for _ in 0..100 {
        let scrape = reqwest::Client::new().get(&url).bearer_auth(VIEWER).send();
        body = scrape.await.unwrap().text().await.unwrap();
        if body.contains("closedloop_command_time_to_truth_seconds_bucket") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let declared = |prefix: &str| -> Vec<String> {
        body.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .filter_map(|rest| rest.split(' ').next())
            .map(str::to_string)
            .collect()
    };
    let (types, helps) = (declared("# TYPE "), declared("# HELP "));
    for family in [
        "closedloop_journal_batch_writes",
        "closedloop_commands_total",
    ] {
        assert!(
            types.iter().any(|t| t == family),
            "{family} missing:\n{body}"
        );
    }
    let without: Vec<&String> = types.iter().filter(|t| !helps.contains(t)).collect();
    assert!(without.is_empty(), "no # HELP for {without:?}:\n{body}");

    // The bucket bounds of a family's first series, in order.
    let bounds = |family: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let lines = body
            .lines()
            .filter(|l| l.starts_with(&format!("{family}_bucket{{")));
        for l in lines {
            let le = l.split("le=\"").nth(1).and_then(|r| r.split('"').next());
            match le {
                Some(b) if out.iter().any(|o| o == b) => break,
                Some(b) => out.push(b.to_string()),
                None => {}
            }
        }
        out
    };
    let counts = [
        "1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "+Inf",
    ];
    assert_eq!(bounds("closedloop_journal_batch_writes"), counts, "{body}");
    let seconds = bounds("closedloop_command_time_to_truth_seconds");
    assert!(seconds.iter().any(|b| b == "0.01"), "{seconds:?}");
    assert!(seconds.iter().any(|b| b == "3600"), "{seconds:?}");
    agent.cancel().await.unwrap();
}
