//! MCP over Streamable HTTP, before any token is looked at: the Host and Origin checks (and
//! their configured allowances), and who counts as the local user when the plant declares no
//! tokens — a loopback request is, a request through a reverse proxy is not, and a listener
//! beyond loopback is refused.

mod common;

use closedloop_mcp::http::{self, HttpOptions};
use common::gateway::{Gateway, OPS, plant_text, raw, raw_tool, result, tokens};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_origin_are_refused_before_auth() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let list = |r: reqwest::RequestBuilder| async move { r.send().await.unwrap().status() };
    // A rebinding page reaches us under its own name: 403 even with a good token.
    let evil_host = raw(&gw.url, Some(OPS), "tools/list", json!({})).header("host", "evil.example");
    assert_eq!(list(evil_host).await, StatusCode::FORBIDDEN);
    let evil_host_port =
        raw(&gw.url, Some(OPS), "tools/list", json!({})).header("host", "evil.example:80");
    assert_eq!(list(evil_host_port).await, StatusCode::FORBIDDEN);
    // A foreign web page: 403, with or without a token.
    for token in [None, Some(OPS)] {
        let r =
            raw(&gw.url, token, "tools/list", json!({})).header("origin", "https://evil.example");
        assert_eq!(list(r).await, StatusCode::FORBIDDEN);
    }
    // Loopback names and origins pass the guard (then need the token).
    let ok = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .header("host", "localhost")
        .header("origin", "http://localhost:3000");
    assert_eq!(list(ok).await, StatusCode::OK);
    gw.stop_and_caller_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_and_origins_are_configurable() {
    let mut opts = HttpOptions::default();
    opts.allowed_hosts.push("gateway.lan".into());
    opts.allowed_origins
        .push("https://console.example.com".into());
    let gw = Gateway::start(&tokens(), opts).await;
    let r = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .header("host", "gateway.lan:8080")
        .header("origin", "https://console.example.com");
    assert_eq!(r.send().await.unwrap().status(), StatusCode::OK);
    let r = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .header("origin", "https://console.example.com:8443");
    assert_eq!(r.send().await.unwrap().status(), StatusCode::FORBIDDEN);
    gw.stop_and_caller_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_a_loopback_request_is_the_local_user() {
    let gw = Gateway::start("", HttpOptions::default()).await;
    let resp = raw_tool(
        &gw.url,
        None,
        "lamp_switch",
        json!({"on": true, "wait_s": 5}),
    )
    .send()
    .await
    .unwrap();
    let res = result(resp).await;
    assert_eq!(res["structuredContent"]["status"], "completed", "{res}");
    let id = res["structuredContent"]["command_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A token the plant does not declare is still a bad token.
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(gw.stop_and_caller(&id).await.as_deref(), Some("http"));
}

/// The reverse-proxy set-up of docs/http.md without tokens: the proxy connects from 127.0.0.1, but the
/// people behind it are not the local user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_through_a_reverse_proxy_is_not_the_local_user() {
    let opts = HttpOptions {
        allowed_hosts: vec!["127.0.0.1".into(), "localhost".into(), "gw.example".into()],
        ..HttpOptions::default()
    };
    let gw = Gateway::start("", opts).await;
    let proxied = [("host", "gw.example"), ("x-forwarded-for", "203.0.113.9")];
    for (i, header) in [
        proxied.to_vec(),
        vec![proxied[1]],
        vec![("forwarded", "for=203.0.113.9")],
    ]
    .into_iter()
    .enumerate()
    {
        let mut req = raw_tool(&gw.url, None, "lamp_switch", json!({"on": true}));
        for (k, v) in header {
            req = req.header(k, v);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "case {i}");
    }
    assert!(
        !gw.engine.device_state("lamp").unwrap().signals["contact"]
            .value
            .as_bool()
            .unwrap_or(false)
    );
    // And serve refuses such a set-up before it starts.
    let plant =
        closedloop_plant::parse(&plant_text(""), "plant.toml", std::path::Path::new(".")).unwrap();
    let e = http::check_allowed_hosts(&["gw.example".into()], &plant).unwrap_err();
    assert!(e.to_string().contains("--allow-host gw.example"), "{e}");
    assert!(http::check_allowed_hosts(&["localhost:8080".into()], &plant).is_ok());
    gw.stop_and_caller_none().await;
}

#[tokio::test]
async fn a_non_loopback_listener_without_tokens_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plant.toml");
    std::fs::write(&path, plant_text("")).unwrap();
    let plant = closedloop_plant::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let err = http::check_listen("0.0.0.0:8080".parse().unwrap(), &plant).unwrap_err();
    assert!(err.to_string().contains("[[server.token]]"), "{err}");
    assert!(http::check_listen("127.0.0.1:8080".parse().unwrap(), &plant).is_ok());
    assert!(http::check_listen("[::1]:8080".parse().unwrap(), &plant).is_ok());
    std::fs::write(&path, plant_text(&tokens())).unwrap();
    let plant = closedloop_plant::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(http::check_listen("0.0.0.0:8080".parse().unwrap(), &plant).is_ok());
}
