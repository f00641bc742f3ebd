//! Dead-man motion through a real MCP client: `keep_alive` keeps a jog going past its
//! `keepalive_s` and silence stops it; over Streamable HTTP, deleting the session that started a
//! jog stops it at once, `DEADMAN`, saying the session ended. Ground truth is the simulator's:
//! the belt no longer moves. Watching a jog on the operator page does not keep it going.

mod common;

use closedloop_engine::Engine;
use closedloop_mcp::Server;
use closedloop_mcp::http::{self, HttpOptions};
use closedloop_sim::SimDevice;
use common::{Client, call, sc};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A conveyor that runs only while its caller keeps asking, every `keepalive` seconds.
fn plant(keepalive: f64) -> String {
    format!(
        r#"
[server]
name = "dead-man"
journal = "sqlite::memory:"

[[device]]
id = "conveyor"
description = "Conveyor belt"
driver = {{ kind = "sim", model = "stepper", speed_mm_s = 50.0, travel_mm = [0.0, 1000.0] }}
poll_ms = 20
[device.signals]
position_mm = {{ holding = 2, type = "i32", scale = 0.01, unit = "mm" }}
moving      = {{ discrete_input = 0 }}
fault       = {{ discrete_input = 1 }}
[[device.action]]
name = "jog"
description = "Run the belt forward while you keep asking about it."
params = {{}}
write = [{{ holding = 0, type = "i32", value = "100000.0" }}, {{ coil = 0, value = "true" }}]
done_when = "abs(position_mm - 1000.0) <= 0.2 && !moving"
expect_s = 20.0
cancel = [{{ coil = 1, value = "true" }}]
stopped_when = "!moving"
keepalive_s = {keepalive}
"#
    )
}

/// (status, error_code) of a result.
fn outcome(v: &serde_json::Value) -> (Option<&str>, Option<&str>) {
    (v["status"].as_str(), v["error_code"].as_str())
}

/// Starts a jog and waits (bounded) until it is `running` and the simulated belt moves;
/// returns its command id.
async fn start_jog(c: &Client, sims: &BTreeMap<String, SimDevice>) -> String {
    let r = call(c, "conveyor_jog", json!({"wait_s": 0})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    for _ in 0..100 {
        let now = call(c, "keep_alive", json!({"command_id": id})).await;
        if sc(&now)["status"] == "running" && sims["conveyor"].peek().moving == Some(true) {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the belt never started: {:?}", r.structured_content);
}

/// The command's result once it is final, read without renewing it (bounded by `within`).
async fn final_result(engine: &Engine, id: &str, within: Duration) -> serde_json::Value {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let rows = engine.list(Some("conveyor"), None, 5).await.unwrap();
        if rows
            .iter()
            .any(|r| r.command_id == id && r.status.is_terminal())
        {
            let r = engine.status(id, Duration::ZERO).await.unwrap();
            return serde_json::to_value(r).unwrap();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{id} did not end within {within:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_keeps_a_jog_going_past_its_keepalive_and_silence_stops_it_deadman() {
    let (engine, sims) = common::engine(&plant(0.6), std::path::Path::new(".")).await;
    let c = ().serve(common::pipe(Server::new(Arc::clone(&engine), "tester"))).await.unwrap();
    let tools = c.list_all_tools().await.unwrap();
    let jog = tools.iter().find(|t| t.name == "conveyor_jog").unwrap();
    assert!(
        jog.description.as_deref().unwrap().contains(
            "call get_command_status or keep_alive with its command_id at least every 0.6 s"
        ),
        "{:?}",
        jog.description
    );
    assert!(tools.iter().any(|t| t.name == "keep_alive"));

    let id = start_jog(&c, &sims).await;
    let started = Instant::now();
    // Renewed every 0.2 s for well over its 0.6 s keepalive: it keeps running.
    while started.elapsed() < Duration::from_millis(1800) {
        let r = call(&c, "keep_alive", json!({"command_id": id})).await;
        assert_eq!(
            outcome(sc(&r)),
            (Some("running"), None),
            "{:?}",
            r.structured_content
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(sims["conveyor"].peek().moving, Some(true), "still running");

    // Then nobody calls: stopped DEADMAN, the stop written, the belt standing.
    let done = final_result(&engine, &id, Duration::from_secs(10)).await;
    assert_eq!(
        outcome(&done),
        (Some("cancelled"), Some("DEADMAN")),
        "{done}"
    );
    let events: Vec<&str> = done["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    assert!(events.contains(&"cancel_sent"), "{events:?}");
    assert_eq!(
        sims["conveyor"].peek().moving,
        Some(false),
        "the belt stopped"
    );

    // A finished command answers with its outcome; an unknown id is UNKNOWN_COMMAND.
    let after = call(&c, "keep_alive", json!({"command_id": id})).await;
    assert_eq!(outcome(sc(&after)), (Some("cancelled"), Some("DEADMAN")));
    let unknown = call(&c, "keep_alive", json!({"command_id": "no-such-command"})).await;
    assert_eq!(
        (unknown.is_error, sc(&unknown)["error_code"].as_str()),
        (Some(true), Some("UNKNOWN_COMMAND"))
    );
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_http_session_mid_jog_stops_the_jog_deadman_saying_the_session_ended() {
    // A keepalive of 3 s, renewed here by reads that do not count (the engine's own list):
    // only the session's end can stop it before then.
    let keepalive = 3.0;
    let (engine, sims) = common::engine(&plant(keepalive), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}{}", listener.local_addr().unwrap(), http::PATH);
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    ));
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let c = ().serve(transport).await.unwrap();
    let id = start_jog(&c, &sims).await;
    let r = call(&c, "keep_alive", json!({"command_id": id})).await;
    assert_eq!(outcome(sc(&r)), (Some("running"), None));

    // The client closes its session (DELETE with its Mcp-Session-Id).
    c.cancel().await.unwrap();
    let poll = Duration::from_millis(20);
    let done = final_result(&engine, &id, Duration::from_secs_f64(keepalive) + poll).await;
    assert_eq!(
        outcome(&done),
        (Some("cancelled"), Some("DEADMAN")),
        "{done}"
    );
    let detail = done["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("The MCP session that started this command ended")
            && detail.contains("the cancel plan (stop) was written"),
        "{detail}"
    );
    assert_eq!(
        sims["conveyor"].peek().moving,
        Some(false),
        "the belt stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_a_jog_on_the_operator_page_does_not_keep_it_going() {
    let (engine, sims) = common::engine(&plant(0.6), std::path::Path::new(".")).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = Server::new(Arc::clone(&engine), "http");
    tokio::spawn(http::serve(
        listener,
        server,
        HttpOptions::default(),
        std::future::pending(),
    ));
    let c = ().serve(common::pipe(Server::new(Arc::clone(&engine), "tester"))).await.unwrap();
    let id = start_jog(&c, &sims).await;

    // The page reads the command every 100 ms, as its chart does while a command runs (more
    // often, even): reading is not asking, so the keepalive runs out all the same.
    let page = reqwest::Client::new();
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let r = page
            .get(format!("{base}/page/commands/{id}"))
            .send()
            .await
            .unwrap();
        last = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        if last["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        outcome(&last),
        (Some("cancelled"), Some("DEADMAN")),
        "after 10 s of reads: {} {}",
        last["status"],
        last["detail"]
    );
    assert_eq!(
        sims["conveyor"].peek().moving,
        Some(false),
        "the belt stopped"
    );
    c.cancel().await.unwrap();
}

/// A motion never outlives the agent that started it: `ops` starts a jog (keepalive 0.6 s) and
/// goes silent; a read-only token polls its status, another asks to cancel it (refused: it may
/// not act), another acting token calls `keep_alive` (refused) — none of
/// them renews it. It ends `DEADMAN` within its keepalive, the belt standing (the simulator's
/// state). A status poll by any token once kept such a jog running for 17 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_requester_renews_a_jog_nobody_else_keeps_it_going() {
    use common::gateway::Gateway;
    let gw = Gateway::start_plant(&plant_with_tokens(0.6), Default::default()).await;
    let client = |i: usize| common::http_client(&gw.url, JOG_TOKENS[i].1);
    let (ops, reader, watcher, other) = (
        client(0).await,
        client(1).await,
        client(2).await,
        client(3).await,
    );
    let r = call(&ops, "conveyor_jog", json!({"wait_s": 0})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    let (last, ended_while_asked) = asked_by_everyone_else(&reader, &watcher, &other, &id).await;
    let done = final_result(&gw.engine, &id, Duration::from_secs(5)).await;
    assert_eq!(
        outcome(&done),
        (Some("cancelled"), Some("DEADMAN")),
        "{done} (last seen {last})"
    );
    assert!(ended_while_asked, "others' asking kept it going: {last}");
    the_belt_stands(&gw.engine).await;
    // Its requester's keep_alive answers with the outcome.
    let mine = call(&ops, "keep_alive", json!({"command_id": id})).await;
    assert_eq!(outcome(sc(&mine)), (Some("cancelled"), Some("DEADMAN")));
}

/// The tokens of `only_the_requester_renews_a_jog_nobody_else_keeps_it_going`: name, secret,
/// scopes.
const JOG_TOKENS: [(&str, &str, &str); 4] = [
    ("ops", "ops-secret-1", r#"["read", "actuate:conveyor"]"#),
    ("reader", "reader-secret-2", r#"["read"]"#),
    ("watcher", "watcher-secret-3", r#"["read"]"#),
    ("other", "other-secret-4", r#"["read", "actuate:*"]"#),
];

/// [`plant`] with the [`JOG_TOKENS`].
fn plant_with_tokens(keepalive: f64) -> String {
    let tables: String = JOG_TOKENS
        .iter()
        .map(|(name, secret, scopes)| {
            format!(
                "[[server.token]]\nname = \"{name}\"\nsha256 = \"{}\"\nscopes = {scopes}\n",
                common::sha256_hex(secret)
            )
        })
        .collect();
    plant(keepalive).replace(
        "journal = \"sqlite::memory:\"\n",
        &format!("journal = \"sqlite::memory:\"\n{tables}"),
    )
}

/// Asked by everyone but its requester for seven times its keepalive: `reader` polls the jog
/// `id`'s status, `watcher` (read-only) asks to cancel it and `other` calls `keep_alive`, both
/// refused. The status last seen, and whether the jog ended while they asked.
async fn asked_by_everyone_else(
    reader: &Client,
    watcher: &Client,
    other: &Client,
    id: &str,
) -> (serde_json::Value, bool) {
    let started = Instant::now();
    let mut last = json!(null);
    let mut ended_while_asked = false;
    // Had any of them renewed it, it would still be running at the end.
    while started.elapsed() < Duration::from_millis(4200) {
        let status = call(
            reader,
            "get_command_status",
            json!({"command_id": id, "wait_s": 0}),
        )
        .await;
        last = sc(&status).clone();
        if last["status"] != "accepted" && last["status"] != "running" {
            ended_while_asked = true;
            break;
        }
        let cancel = call(
            watcher,
            "cancel_command",
            json!({"command_id": id, "wait_s": 0}),
        )
        .await;
        assert_eq!(
            sc(&cancel)["error_code"],
            "UNAUTHORIZED",
            "{:?}",
            cancel.structured_content
        );
        let renew = call(other, "keep_alive", json!({"command_id": id})).await;
        assert_eq!(
            sc(&renew)["error_code"],
            "UNAUTHORIZED",
            "{:?}",
            renew.structured_content
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (last, ended_while_asked)
}

/// The conveyor's `moving` reads false (within 2 s): the belt stands.
async fn the_belt_stands(engine: &Engine) {
    let mut moving = json!(true);
    for _ in 0..100 {
        moving = engine.device_state("conveyor").unwrap().signals["moving"]
            .value
            .clone();
        if moving == json!(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        moving,
        json!(false),
        "the belt stands (its simulated register)"
    );
}
