//! MCP over Streamable HTTP against a real listener on 127.0.0.1:0: Host and Origin checks,
//! bearer tokens and their scopes, both client generations (2025 sessions, 2026-07-28
//! stateless), the body and in-flight bounds, and a dropped request that must not cancel a move.

use closedloop_engine::Engine;
use closedloop_journal::Journal;
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use reqwest::StatusCode;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

#[path = "../../../tests/plants/mod.rs"]
mod plants;

const OPS: &str = "ops-secret-7f3a";
const VIEWER: &str = "viewer-secret-91c2";

/// The server table; `{TOKENS}` is replaced by the token tables.
const SERVER: &str = r#"
[server]
name = "http"
journal = "sqlite://journal.db"
{TOKENS}
"#;

/// The shared lamp and a slow shared slide (50 mm/s, no faults) with the token tables `tokens`.
fn plant_text(tokens: &str) -> String {
    format!(
        "{}{}\n{}",
        SERVER.replace("{TOKENS}", tokens),
        plants::LAMP,
        plants::slide_at(50.0)
    )
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `ops` may act on both devices; `viewer` may only read.
fn tokens() -> String {
    format!(
        "[[server.token]]\nname = \"ops\"\nsha256 = \"{}\"\nscopes = [\"read\", \"actuate:lamp\", \"actuate:slide\"]\n\
         [[server.token]]\nname = \"viewer\"\nsha256 = \"{}\"\nscopes = [\"read\"]\n",
        sha256_hex(OPS),
        sha256_hex(VIEWER)
    )
}

/// The engine and the HTTP endpoint, in this process, on a free loopback port.
struct Gateway {
    url: String,
    engine: Arc<Engine>,
    journal_url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), http::HttpError>>>,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(tokens: &str, opts: HttpOptions) -> Gateway {
        Gateway::start_plant(&plant_text(tokens), opts).await
    }

    async fn start_plant(plant: &str, opts: HttpOptions) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plant.toml");
        std::fs::write(&path, plant).unwrap();
        let plant = closedloop_plant::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let journal_url = plant.server.journal.clone();
        let journal = Journal::open(&journal_url).await.unwrap();
        let drivers = closedloop_connect::build_drivers(&plant).unwrap();
        let links = drivers.open(&plant.devices).expect("links");
        let engine = Arc::new(
            Engine::start(Arc::new(plant), journal, links)
                .await
                .unwrap(),
        );
        // Bound before the server task starts: connections queue until it accepts them.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = Server::new(Arc::clone(&engine), "http");
        let task = tokio::spawn(http::serve(listener, server, opts, async move {
            let _ = stopped.await;
        }));
        Gateway {
            url,
            engine,
            journal_url,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    /// Stops HTTP and the engine, then reads the journal's `caller` of a command.
    async fn stop_and_caller(mut self, command_id: &str) -> Option<String> {
        self.stop.take().map(|s| s.send(()));
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
        self.engine.shutdown().await;
        let journal = Journal::open(&self.journal_url).await.unwrap();
        let row = journal.get(command_id).await.unwrap().expect("journaled");
        journal.close().await;
        row.caller
    }
}

type Client = RunningService<RoleClient, ()>;

fn transport(url: &str, token: Option<&str>) -> StreamableHttpClientTransport<reqwest::Client> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(t) = token {
        config = config.auth_header(t.to_string());
    }
    StreamableHttpClientTransport::from_config(config)
}

/// A 2025-era client: `initialize`, then a session.
async fn session_client(url: &str, token: Option<&str>) -> Client {
    ().serve(transport(url, token)).await.unwrap()
}

/// A 2026-07-28 client: `server/discover`, then self-contained stateless requests.
async fn stateless_client(url: &str, token: Option<&str>) -> Client {
    ().serve_with_lifecycle(
        transport(url, token),
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap()
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    client
        .call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn sc(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structuredContent")
}

/// A raw 2026-07-28 JSON-RPC request (headers and `_meta` as the revision wants them).
fn raw(url: &str, token: Option<&str>, method: &str, params: Value) -> reqwest::RequestBuilder {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        req = req.header("mcp-name", name);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
}

fn raw_tool(url: &str, token: Option<&str>, tool: &str, args: Value) -> reqwest::RequestBuilder {
    raw(
        url,
        token,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    )
}

/// The `result` of a JSON answer.
async fn result(resp: reqwest::Response) -> Value {
    assert_eq!(resp.status(), StatusCode::OK);
    let v: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
    v["result"].clone()
}

/// Waits (bounded) until the engine reports a `running` command on `device`, and returns it.
async fn running_on(engine: &Engine, device: &str) -> String {
    for _ in 0..200 {
        let list = engine.list(Some(device), Some("running"), 1).await.unwrap();
        if let Some(c) = list.first() {
            return serde_json::to_value(c).unwrap()["command_id"]
                .as_str()
                .unwrap()
                .to_string();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no running command on {device}");
}

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
async fn a_missing_or_bad_token_is_401_with_a_bearer_challenge() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    // Declared tokens are required on loopback too.
    let resp = raw(&gw.url, None, "tools/list", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    for bad in ["wrong", "OPS-SECRET-7F3A", &sha256_hex(OPS)] {
        let resp = raw(&gw.url, Some(bad), "tools/list", json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED, "{bad}");
        let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("invalid_token"), "{challenge}");
    }
    let basic = raw(&gw.url, None, "tools/list", json!({})).header("authorization", "Basic b3Bz");
    assert_eq!(
        basic.send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    // The rmcp client sees the refusal as a failed connection, not as a session.
    let t = transport(&gw.url, Some("wrong"));
    assert!(().serve(t).await.is_err());
    gw.stop_and_caller_none().await;
}

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
async fn an_under_scoped_token_is_refused_and_journaled_as_rejected() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let viewer = session_client(&gw.url, Some(VIEWER)).await;
    // Reading is allowed.
    let devices = call(&viewer, "list_devices", json!({})).await;
    assert_eq!(devices.is_error, Some(false));
    // Acting is a rejected command, journaled under the token's name.
    let r = call(&viewer, "lamp_switch", json!({"on": true})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(sc(&r)["status"], "rejected", "{r:?}");
    assert_eq!(sc(&r)["error_code"], "UNAUTHORIZED");
    let rejected = sc(&r)["command_id"].as_str().unwrap().to_string();
    let status = call(
        &viewer,
        "get_command_status",
        json!({"command_id": rejected, "wait_s": 0}),
    )
    .await;
    assert_eq!(sc(&status)["status"], "rejected");
    // Cancelling someone else's move without the scope is refused, and the move goes on.
    let ops = stateless_client(&gw.url, Some(OPS)).await;
    let moving = call(&ops, "slide_move_to", json!({"target_mm": 30.0})).await;
    let move_id = sc(&moving)["command_id"].as_str().unwrap().to_string();
    let refused = call(&viewer, "cancel_command", json!({"command_id": move_id})).await;
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(sc(&refused)["error_code"], "UNAUTHORIZED", "{refused:?}");
    let done = call(
        &ops,
        "get_command_status",
        json!({"command_id": move_id, "wait_s": 10}),
    )
    .await;
    assert_eq!(sc(&done)["status"], "completed", "{done:?}");
    viewer.cancel().await.unwrap();
    ops.cancel().await.unwrap();
    assert_eq!(
        gw.stop_and_caller(&rejected).await.as_deref(),
        Some("viewer")
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let pad = "x".repeat(1024 * 1024 + 1);
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({"pad": pad}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Under the limit, the same request is served.
    let resp = raw(
        &gw.url,
        Some(OPS),
        "tools/list",
        json!({"pad": "x".repeat(1000)}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    gw.stop_and_caller_none().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_in_flight_bound_get_503_at_once() {
    let opts = HttpOptions {
        max_in_flight: 1,
        ..HttpOptions::default()
    };
    let gw = Gateway::start(&tokens(), opts).await;
    // A 1 s move, waited on: holds the only permit.
    let slow = tokio::spawn(
        raw_tool(
            &gw.url,
            Some(OPS),
            "slide_move_to",
            json!({"target_mm": 50.0, "wait_s": 10}),
        )
        .send(),
    );
    running_on(&gw.engine, "slide").await;
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let res = result(slow.await.unwrap().unwrap()).await;
    assert_eq!(res["structuredContent"]["status"], "completed", "{res}");
    // The permit came back with the answer.
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    gw.stop_and_caller_none().await;
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

impl Gateway {
    /// Stops everything when the test journaled nothing worth reading back.
    async fn stop_and_caller_none(mut self) {
        self.stop.take().map(|s| s.send(()));
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
        self.engine.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_shows_a_token_only_the_action_tools_it_may_call() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };
    let viewer = session_client(&gw.url, Some(VIEWER)).await;
    let seen = names(viewer.list_all_tools().await.unwrap());
    assert!(
        !seen
            .iter()
            .any(|n| n == "lamp_switch" || n == "slide_move_to"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|n| n == "get_device_state"), "{seen:?}");
    let ops = session_client(&gw.url, Some(OPS)).await;
    let seen = names(ops.list_all_tools().await.unwrap());
    assert!(seen.iter().any(|n| n == "lamp_switch") && seen.iter().any(|n| n == "slide_move_to"));
    // An unknown device is an error result a model can recover from, not a protocol error.
    let r = call(&viewer, "get_device_state", json!({"device": "lamb"})).await;
    assert_eq!(
        (r.is_error, sc(&r)["error_code"].as_str()),
        (Some(true), Some("UNKNOWN_DEVICE"))
    );
    assert!(
        sc(&r)["detail"].as_str().unwrap().contains("lamp, slide"),
        "{r:?}"
    );
    let r = call(&viewer, "list_commands", json!({"device": "lamb"})).await;
    assert_eq!(sc(&r)["error_code"], "UNKNOWN_DEVICE");
    let r = call(&viewer, "list_commands", json!({"status": "done"})).await;
    assert_eq!(
        (r.is_error, sc(&r)["error_code"].as_str()),
        (Some(true), Some("INVALID_PARAMS"))
    );
    viewer.cancel().await.unwrap();
    ops.cancel().await.unwrap();
    gw.stop_and_caller_none().await;
}

/// The README's reverse-proxy set-up without tokens: the proxy connects from 127.0.0.1, but the
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

/// A raw register write skips `requires`, confirmation and supervision: a token that may
/// switch the lamp may not write its registers raw; an admin may, and the journal names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_writes_need_admin_and_are_journaled_with_their_caller() {
    const ADMIN: &str = "admin-secret-55aa";
    let tokens = format!(
        "{}[[server.token]]\nname = \"root\"\nsha256 = \"{}\"\nscopes = [\"admin\"]\n",
        tokens(),
        sha256_hex(ADMIN)
    );
    let plant = plant_text(&tokens).replace("id = \"lamp\"", "id = \"lamp\"\nraw_access = true");
    let gw = Gateway::start_plant(&plant, HttpOptions::default()).await;
    let write = json!({"device": "lamp", "area": "coil", "address": 0, "values": [true]});
    let ops = session_client(&gw.url, Some(OPS)).await;
    let r = call(&ops, "modbus_write", write.clone()).await;
    assert_eq!(
        (r.is_error, sc(&r)["error_code"].as_str()),
        (Some(true), Some("UNAUTHORIZED")),
        "{r:?}"
    );
    let root = session_client(&gw.url, Some(ADMIN)).await;
    let r = call(&root, "modbus_write", write).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let listed = gw.engine.list(Some("lamp"), None, 10).await.unwrap();
    let raw = listed
        .iter()
        .find(|c| c.action == "raw_write")
        .expect("journaled");
    assert_eq!(raw.status.as_str(), "sent");
    ops.cancel().await.unwrap();
    root.cancel().await.unwrap();
    assert_eq!(
        gw.stop_and_caller(&raw.command_id).await.as_deref(),
        Some("root")
    );
}

/// Readers holding every general permit (long waits here; event streams alike) never keep an
/// agent from acting or from stopping an axis: a quarter of the permits is kept for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_cannot_take_the_capacity_kept_for_acting_and_cancelling() {
    let opts = HttpOptions {
        max_in_flight: 4,
        ..HttpOptions::default()
    };
    let gw = Gateway::start(&tokens(), opts).await;
    let moving = result(
        raw_tool(
            &gw.url,
            Some(OPS),
            "slide_move_to",
            json!({"target_mm": 300.0, "wait_s": 0}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    let id = moving["structuredContent"]["command_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The move must be under way for the readers to wait on it (bounded: a loaded machine).
    let mut status = Value::Null;
    for _ in 0..250 {
        let r = result(
            raw_tool(
                &gw.url,
                Some(VIEWER),
                "get_command_status",
                json!({"command_id": id, "wait_s": 0}),
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
        status = r["structuredContent"]["status"].clone();
        if status != "accepted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "running", "the move is not under way: {moving}");
    // Three readers wait on the 6 s move: the three general permits are taken. A reader that
    // arrives while the poll above still holds its permit (it is given back as its answer
    // ends) is refused 503: it tries again, as a client told `Retry-After` would.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let url = gw.url.clone();
        let id = id.clone();
        waiting.push(tokio::spawn(async move {
            loop {
                let req = raw_tool(
                    &url,
                    Some(VIEWER),
                    "get_command_status",
                    json!({"command_id": id, "wait_s": 10}),
                );
                let r = req.send().await;
                match &r {
                    Ok(a) if a.status() == StatusCode::SERVICE_UNAVAILABLE => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    _ => return r,
                }
            }
        }));
    }
    let mut refused = false;
    for _ in 0..250 {
        let r = raw(&gw.url, Some(VIEWER), "tools/list", json!({}))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::SERVICE_UNAVAILABLE {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !refused {
        // Say what the readers got: a wait that ended early explains an unfilled permit pool.
        let mut answers = Vec::new();
        for w in waiting {
            let r = w.await.unwrap().unwrap();
            answers.push(format!("{} {}", r.status(), r.text().await.unwrap()));
        }
        panic!("the readers never filled the general permits; they got: {answers:#?}");
    }
    // Acting and cancelling still get through, on the reserve.
    let lamp = result(
        raw_tool(
            &gw.url,
            Some(OPS),
            "lamp_switch",
            json!({"on": true, "wait_s": 2}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(lamp["structuredContent"]["status"], "completed", "{lamp}");
    let cancel = result(
        raw_tool(
            &gw.url,
            Some(OPS),
            "cancel_command",
            json!({"command_id": id}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        cancel["structuredContent"]["status"], "cancelled",
        "{cancel}"
    );
    for w in waiting {
        let _ = w.await;
    }
    gw.stop_and_caller_none().await;
}
