//! Resources, change notifications and prompts over a real MCP session: closedloop's server and
//! rmcp's client over an in-process pipe (`tokio::io::duplex`), a simulated lamp and slide.

mod common;

use closedloop_engine::Engine;
use closedloop_mcp::Server;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, GetPromptRequestParams, GetPromptResult,
    ProtocolVersion, ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam,
    ServerNotification, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, ClientServiceExt, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// A lamp and a slide with the keys of `examples/workshop.toml`'s: the shared ones, with the
/// lamp's coil readable as `commanded` and its parameter described, and a slide that stalls at
/// 70 mm and is not idempotent.
fn plant() -> String {
    use common::plants::{self, replace_lines, with_faults};
    let lamp = replace_lines(
        plants::LAMP,
        &[
            (
                "contact = { discrete_input = 0 }",
                "commanded = { coil = 0 }\ncontact   = { discrete_input = 0 }",
            ),
            (
                r#"params = { on = { type = "bool" } }"#,
                r#"params = { on = { type = "bool", description = "true to switch on" } }"#,
            ),
        ],
    );
    let stall = r#"{ kind = "stall", at_mm = 70.0 }"#;
    let slide = replace_lines(
        plants::SLIDE,
        &[
            (
                plants::SLIDE_DRIVER,
                &with_faults(plants::SLIDE_DRIVER, stall),
            ),
            (
                "stopped_when = \"!moving\"",
                "stopped_when = \"!moving\"\nidempotent = false",
            ),
        ],
    );
    format!(
        "[server]\nname = \"resources-test\"\njournal = \"sqlite://journal.db\"\n\n{lamp}\n{slide}"
    )
}

/// Every `notifications/resources/updated` the client received: URI, monotonic and wall time.
#[derive(Clone, Default)]
struct Watcher {
    updates: Arc<Mutex<Vec<(String, Instant, i64)>>>,
}

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        self.updates
            .lock()
            .unwrap()
            .push((p.uri, Instant::now(), wall));
    }
}

impl Watcher {
    fn of(&self, uri: &str) -> Vec<(Instant, i64)> {
        let u = self.updates.lock().unwrap();
        u.iter()
            .filter(|(x, ..)| x == uri)
            .map(|(_, at, wall)| (*at, *wall))
            .collect()
    }

    /// Waits (without asking the server anything) until `uri` has more than `seen` updates.
    async fn more_than(&self, uri: &str, seen: usize, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.of(uri).len() > seen {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    /// Waits until no update for `uri` arrived for `quiet`.
    async fn settle(&self, uri: &str, quiet: Duration) {
        loop {
            let n = self.of(uri).len();
            tokio::time::sleep(quiet).await;
            if self.of(uri).len() == n {
                return;
            }
        }
    }
}

struct Rig {
    client: RunningService<RoleClient, Watcher>,
    watcher: Watcher,
    server: Server,
    _dir: tempfile::TempDir,
}

async fn engine(dir: &std::path::Path) -> Arc<Engine> {
    common::engine(&plant(), dir).await.0
}

/// Starts a server over a pipe and returns its other end.
fn serve(server: &Server) -> tokio::io::DuplexStream {
    common::pipe(server.clone())
}

/// A 2025-11-25 client (`initialize`, `resources/subscribe`).
async fn start() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(engine(dir.path()).await, "test");
    let watcher = Watcher::default();
    let client = watcher
        .clone()
        .serve(serve(&server))
        .await
        .expect("handshake");
    Rig {
        client,
        watcher,
        server,
        _dir: dir,
    }
}

async fn call(client: &RunningService<RoleClient, Watcher>, tool: &str, args: Value) -> Value {
    let p = CallToolRequestParams::new(tool.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    let r: CallToolResult = client.call_tool(p).await.expect(tool);
    r.structured_content.expect("structuredContent")
}

async fn read(
    client: &RunningService<RoleClient, Watcher>,
    uri: &str,
) -> Result<Value, ServiceError> {
    let r = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    assert_eq!(r.contents.len(), 1);
    match &r.contents[0] {
        ResourceContents::TextResourceContents {
            uri: u,
            mime_type,
            text,
            ..
        } => {
            assert_eq!(u, uri);
            assert_eq!(mime_type.as_deref(), Some("application/json"));
            Ok(serde_json::from_str(text).expect("JSON"))
        }
        other => panic!("{other:?}"),
    }
}

fn mcp_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("expected an MCP error, got {other:?}"),
    }
}

async fn subscribe(rig: &Rig, uri: &str) {
    #[allow(deprecated)]
    rig.client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("subscribe");
}

async fn prompt(
    client: &RunningService<RoleClient, Watcher>,
    name: &str,
    args: Value,
) -> Result<GetPromptResult, ServiceError> {
    let p = GetPromptRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap());
    client.get_prompt(p).await
}

fn prompt_text(r: &GetPromptResult) -> String {
    r.messages
        .iter()
        .filter_map(|m| m.content.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_listed_read_and_templated() {
    let rig = start().await;
    let c = &rig.client;

    let list = c.list_all_resources().await.unwrap();
    let uris: Vec<&str> = list.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "device://lamp/state",
            "device://lamp/config",
            "device://slide/state",
            "device://slide/config"
        ]
    );
    assert!(
        list.iter()
            .all(|r| r.mime_type.as_deref() == Some("application/json"))
    );
    let templates = c.list_all_resource_templates().await.unwrap();
    let t: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        t,
        [
            "device://{id}/state",
            "device://{id}/config",
            "command://{id}/timeline{?page}",
            "command://{id}"
        ]
    );

    // State: the same object as get_device_state.
    let done = call(c, "lamp_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(done["status"], "completed");
    let state = read(c, "device://lamp/state").await.unwrap();
    assert_eq!(state["device"], "lamp");
    assert_eq!(state["liveness"], "online");
    assert_eq!(state["signals"]["contact"]["value"], true);
    assert_eq!(state["signals"]["contact"]["source"], "discrete_input:0");
    let tool = call(c, "get_device_state", json!({"device": "lamp"})).await;
    assert_eq!(
        tool.as_object().unwrap().keys().collect::<Vec<_>>(),
        state.as_object().unwrap().keys().collect::<Vec<_>>()
    );

    // Config: the declaration, actions with their criteria.
    let config = read(c, "device://slide/config").await.unwrap();
    assert_eq!(config["driver"]["kind"], "sim");
    assert_eq!(config["poll_ms"], 20);
    assert_eq!(config["signals"]["position_mm"]["unit"], "mm");
    assert_eq!(config["signals"]["position_mm"]["source"], "holding:2");
    let action = &config["actions"][0];
    assert_eq!(action["name"], "move_to");
    assert_eq!(action["tool"], "slide_move_to");
    assert_eq!(action["fail_when"]["MOTOR_STALL"], "fault");
    assert_eq!(action["params"]["target_mm"]["max"], 300.0);
    assert_eq!(action["verification"], "feedback");
    assert_eq!(action["cancel"], json!(["coil:1"]));

    // Command: the result object.
    let id = done["command_id"].as_str().unwrap();
    let cmd = read(c, &format!("command://{id}")).await.unwrap();
    assert_eq!(cmd["command_id"], id);
    assert_eq!(cmd["status"], "completed");
    assert_eq!(cmd["verified"], true);
    assert!(cmd["timeline"].as_array().is_some_and(|t| !t.is_empty()));

    // Unknown URIs name themselves.
    for uri in [
        "device://nope/state",
        "device://lamp/other",
        "command://0193f0c2-0000-7000-8000-000000000000",
        "file:///etc/passwd",
    ] {
        let e = mcp_error(read(c, uri).await.unwrap_err());
        assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{uri}");
        assert!(e.message.contains(uri), "{}", e.message);
    }
    let _ = rig.client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_notifies_the_state_subscriber_and_an_idle_device_does_not() {
    let rig = start().await;
    let uri = "device://lamp/state";
    // Let the lamp come online first: liveness is part of the state.
    call(
        &rig.client,
        "lamp_switch",
        json!({"on": false, "wait_s": 5}),
    )
    .await;
    subscribe(&rig, uri).await;
    subscribe(&rig, uri).await; // twice is once
    assert_eq!(rig.server.subscription_count(), 1);

    // Polled every 20 ms, unchanged: nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rig.watcher.of(uri).len(), 0);

    let r = call(&rig.client, "lamp_switch", json!({"on": true, "wait_s": 5})).await;
    assert_eq!(r["status"], "completed");
    assert!(rig.watcher.more_than(uri, 0, Duration::from_secs(2)).await);
    let _ = rig.client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_subscriber_hears_every_change_up_to_the_last() {
    let rig = start().await;
    let c = &rig.client;
    // The first move holds the slide; the second queues behind it, still "accepted".
    let first = call(c, "slide_move_to", json!({"target_mm": 40.0, "wait_s": 0})).await;
    let second = call(c, "slide_move_to", json!({"target_mm": 10.0, "wait_s": 0})).await;
    assert_eq!(second["status"], "accepted");
    let id = second["command_id"].as_str().unwrap();
    let uri = format!("command://{id}");
    subscribe(&rig, &uri).await;
    let started = Instant::now();

    let end = call(
        c,
        "get_command_status",
        json!({"command_id": id, "wait_s": 10}),
    )
    .await;
    assert_eq!(end["status"], "completed", "{end}");
    rig.watcher.settle(&uri, Duration::from_millis(300)).await;
    let got = rig.watcher.of(&uri);
    // Running, signal readings while it moves, then the end: several, throttled.
    assert!(got.len() >= 2, "{} notifications", got.len());
    let span = got.last().unwrap().0 - started;
    assert!(
        got.len() as u128 <= 2 + span.as_millis() / 100,
        "{} notifications in {span:?}",
        got.len()
    );
    // The last change (the terminal status) was notified, and reading now shows it.
    let terminal = end["updated_at"].as_str().unwrap();
    let last_wall = got.last().unwrap().1;
    assert!(
        closedloop_engine::clock::rfc3339(last_wall + 5).as_str() >= terminal,
        "last notification {} before the terminal change {terminal}",
        closedloop_engine::clock::rfc3339(last_wall)
    );
    assert_eq!(read(c, &uri).await.unwrap()["status"], "completed");
    let _ = first;
    let _ = rig.client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_changes_are_throttled_and_unsubscribe_stops_them() {
    let rig = start().await;
    let uri = "device://lamp/state";
    call(
        &rig.client,
        "lamp_switch",
        json!({"on": false, "wait_s": 5}),
    )
    .await;
    subscribe(&rig, uri).await;
    let started = Instant::now();
    let mut on = true;
    for _ in 0..8 {
        let r = call(&rig.client, "lamp_switch", json!({"on": on, "wait_s": 5})).await;
        assert_eq!(r["status"], "completed");
        on = !on;
    }
    let toggled = started.elapsed();
    rig.watcher.settle(uri, Duration::from_millis(300)).await;
    let got = rig.watcher.of(uri);
    // 8 switches are 16 value changes (coil, then contact); at most one notification per 100 ms.
    assert!(!got.is_empty());
    assert!(
        got.len() as u128 <= 2 + toggled.as_millis() / 100,
        "{} notifications in {toggled:?}",
        got.len()
    );
    // The state a reader sees after the last notification is the final one.
    let state = read(&rig.client, uri).await.unwrap();
    assert_eq!(state["signals"]["contact"]["value"], json!(!on));

    #[allow(deprecated)]
    rig.client
        .unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .unwrap();
    assert_eq!(rig.server.subscription_count(), 0);
    let before = rig.watcher.of(uri).len();
    call(&rig.client, "lamp_switch", json!({"on": on, "wait_s": 5})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rig.watcher.of(uri).len(), before);
    let _ = rig.client.cancel().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_end_with_their_client_and_unknown_uris_are_refused() {
    let rig = start().await;
    #[allow(deprecated)]
    let e = rig
        .client
        .subscribe(SubscribeRequestParams::new("device://nope/state"))
        .await
        .unwrap_err();
    let e = mcp_error(e);
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert!(e.message.contains("device://nope/state"), "{}", e.message);

    subscribe(&rig, "device://lamp/state").await;
    subscribe(&rig, "device://slide/config").await;
    assert_eq!(rig.server.subscription_count(), 2);
    let _ = rig.client.cancel().await;
    let until = Instant::now() + Duration::from_secs(5);
    while rig.server.subscription_count() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rig.server.subscription_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_embed_the_device_and_validate_their_arguments() {
    let rig = start().await;
    let c = &rig.client;
    let prompts = c.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["diagnose_device", "act_and_confirm"]);
    for p in &prompts {
        assert!(
            p.arguments
                .as_ref()
                .unwrap()
                .iter()
                .all(|a| a.required == Some(true))
        );
    }

    // A stalled move, then a diagnosis that quotes the values and the failure.
    let r = call(c, "slide_move_to", json!({"target_mm": 150.0, "wait_s": 5})).await;
    assert_eq!(r["error_code"], "MOTOR_STALL");
    let state = call(c, "get_device_state", json!({"device": "slide"})).await;
    let position = &state["signals"]["position_mm"]["value"];
    let d = prompt(c, "diagnose_device", json!({"device": "slide"}))
        .await
        .unwrap();
    let text = prompt_text(&d);
    for needle in [
        format!("position_mm = {position} mm"),
        "fault = true".into(),
        "MOTOR_STALL".into(),
        r["command_id"].as_str().unwrap().into(),
        "closedloop trace".into(),
        "get_device_state".into(),
        "wiring and supply".into(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from:\n{text}");
    }

    let a = prompt(
        c,
        "act_and_confirm",
        json!({"device": "lamp", "action": "switch"}),
    )
    .await
    .unwrap();
    let text = prompt_text(&a);
    for needle in [
        "lamp_switch",
        "get_command_status",
        "\"completed\"",
        "verified",
        "evidence",
        "contact equals the requested on",
        "FEEDBACK_MISMATCH",
        "DEVICE_OFFLINE",
        "about 0.02 s",
        "contact = ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }

    // Unknown or missing arguments name the valid ones.
    let e = mcp_error(
        prompt(c, "diagnose_device", json!({"device": "nope"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(
        e.message.contains("lamp") && e.message.contains("slide"),
        "{}",
        e.message
    );
    let e = mcp_error(
        prompt(
            c,
            "act_and_confirm",
            json!({"device": "lamp", "action": "fly"}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("switch"), "{}", e.message);
    let e = mcp_error(
        prompt(c, "act_and_confirm", json!({"device": "lamp"}))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("action"), "{}", e.message);
    let _ = rig.client.cancel().await;
}

/// A 2026-07-28 client has no `resources/subscribe`: it opens `subscriptions/listen`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_listens_for_resource_updates() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(engine(dir.path()).await, "test");
    let client = ()
        .serve_with_lifecycle(
            serve(&server),
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover");
    let args = |on: bool| json!({"on": on, "wait_s": 5}).as_object().cloned().unwrap();
    let switch = |on| CallToolRequestParams::new("lamp_switch").with_arguments(args(on));
    client.call_tool(switch(false)).await.unwrap();

    let filter = SubscriptionFilter::builder()
        .resource_subscription("device://lamp/state")
        .resource_subscription("device://nope/state")
        .tools_list_changed()
        .build();
    let mut sub = client.listen(filter).await.expect("listen");
    assert_eq!(
        sub.acknowledged(),
        &SubscriptionFilter::builder()
            .resource_subscription("device://lamp/state")
            .build()
    );
    // rmcp acknowledges before the server starts watching: the first notification covers
    // whatever changed in between.
    let next = async |sub: &mut rmcp::service::Subscription| {
        let n = tokio::time::timeout(Duration::from_secs(3), sub.next())
            .await
            .expect("an update within 3 s")
            .expect("subscription open")
            .expect("a notification");
        match n {
            ServerNotification::ResourceUpdatedNotification(u) => u.params.uri,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(next(&mut sub).await, "device://lamp/state");
    assert_eq!(server.subscription_count(), 1);

    let r = client.call_tool(switch(true)).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["status"], "completed");
    assert_eq!(next(&mut sub).await, "device://lamp/state");

    sub.cancel().await.unwrap();
    let until = Instant::now() + Duration::from_secs(3);
    while server.subscription_count() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.subscription_count(), 0);
    let _ = client.cancel().await;
}
