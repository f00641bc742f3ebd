//! The safety envelope through a real MCP client (rmcp over an in-process pipe): a retry loop
//! hits RATE_LIMITED, a standing alarm shows in list_alarms and blocks its device, a dead-man
//! jog whose caller stops asking is stopped, and `alarm://active` tells its subscribers of every
//! raise and clear. (`dead_man.rs`: `keep_alive`, and an HTTP session's end.)

mod common;

use common::{call, sc};
use rmcp::model::{
    CallToolRequestParams, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SERVER: &str = r#"
[server]
name = "envelope"
journal = "sqlite::memory:"
"#;

/// A conveyor jogged under a dead-man keepalive, and the alarm the open guard door raises.
const CONVEYOR_AND_ALARM: &str = r#"
[[device]]
id = "conveyor"
description = "Conveyor belt"
driver = { kind = "sim", model = "stepper", speed_mm_s = 50.0, travel_mm = [0.0, 1000.0] }
poll_ms = 20
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving      = { discrete_input = 0 }
fault       = { discrete_input = 1 }
[[device.action]]
name = "jog"
description = "Run the belt forward while you keep asking about it."
params = {}
write = [{ holding = 0, type = "i32", value = "100000.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - 1000.0) <= 0.2 && !moving"
expect_s = 20.0
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
keepalive_s = 0.6

[[alarm]]
name = "GUARD_DOOR_OPEN"
when = "devices.door.contact"
severity = "critical"
blocks = ["conveyor"]
description = "The guard door is open: close it before the belt may run."
"#;

/// The server, the shared lamp as the guard door (switched at most 3 times a minute), then
/// `CONVEYOR_AND_ALARM`.
fn plant() -> String {
    let door = common::plants::replace_lines(
        common::plants::LAMP,
        &[
            ("id = \"lamp\"", "id = \"door\""),
            (
                "description = \"Desk lamp\"",
                "description = \"Guard door switch\"",
            ),
            (
                "idempotent = true",
                "idempotent = true\nmax_rate = \"3/min\"",
            ),
        ],
    );
    format!("{SERVER}\n{door}{CONVEYOR_AND_ALARM}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envelope_holds_through_a_real_mcp_client() {
    let (engine, sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    let c = ().serve(io).await.unwrap();
    let tools: Vec<String> = c
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(tools.contains(&"list_alarms".to_string()), "{tools:?}");
    let jog = c
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "conveyor_jog")
        .unwrap();
    assert!(jog.description.unwrap().contains("at least every 0.6 s"));

    a_jog_nobody_asks_about_is_stopped(&c).await;
    assert!(!sims["conveyor"].peek().moving.unwrap());
    the_open_door_is_listed_and_blocks_the_belt(&c).await;
    a_retry_loop_is_rate_limited(&c).await;
    c.cancel().await.unwrap();
}

/// Dead-man: asked about for a while, then not — stopped DEADMAN.
async fn a_jog_nobody_asks_about_is_stopped(c: &common::Client) {
    let r = call(c, "conveyor_jog", json!({"wait_s": 0})).await;
    let id = sc(&r)["command_id"].as_str().unwrap().to_string();
    for _ in 0..4 {
        let s = call(
            c,
            "get_command_status",
            json!({"command_id": id, "wait_s": 0.3}),
        )
        .await;
        assert_eq!(sc(&s)["status"], "running", "{:?}", s.structured_content);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let done = call(
        c,
        "get_command_status",
        json!({"command_id": id, "wait_s": 3}),
    )
    .await;
    assert_eq!(
        (
            sc(&done)["status"].as_str(),
            sc(&done)["error_code"].as_str()
        ),
        (Some("cancelled"), Some("DEADMAN")),
        "{:?}",
        done.structured_content
    );
}

/// The door opens: the alarm is listed as active and the belt refuses to run.
async fn the_open_door_is_listed_and_blocks_the_belt(c: &common::Client) {
    let open = call(c, "door_switch", json!({"on": true})).await;
    assert_eq!(sc(&open)["status"], "completed");
    let mut listed = Value::Null;
    for _ in 0..100 {
        listed = sc(&call(c, "list_alarms", json!({})).await).clone();
        if listed["alarms"][0]["active"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(listed["alarms"][0]["active"], true, "{listed}");
    assert_eq!(listed["alarms"][0]["blocks"], json!(["conveyor"]));
    let refused = call(c, "conveyor_jog", json!({})).await;
    assert_eq!(
        (refused.is_error, sc(&refused)["error_code"].as_str()),
        (Some(true), Some("INTERLOCK"))
    );
    assert!(
        sc(&refused)["detail"]
            .as_str()
            .unwrap()
            .contains("GUARD_DOOR_OPEN")
    );
}

/// A retry loop on the door (3/min): the second and third switches go, the fourth does not.
async fn a_retry_loop_is_rate_limited(c: &common::Client) {
    for on in [false, true] {
        let r = call(c, "door_switch", json!({"on": on})).await;
        assert_eq!(sc(&r)["status"], "completed", "{:?}", r.structured_content);
    }
    let fourth = call(c, "door_switch", json!({"on": false})).await;
    assert_eq!(
        (fourth.is_error, sc(&fourth)["error_code"].as_str()),
        (Some(true), Some("RATE_LIMITED"))
    );
    let wait = sc(&fourth)["retry_after_s"].as_f64().unwrap();
    assert!(wait > 10.0 && wait <= 20.0, "{wait}");
}

/// The URIs of every `notifications/resources/updated` the client received, in order.
#[derive(Clone, Default)]
struct Updates(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(p.uri);
    }
}

impl Updates {
    fn count(&self, uri: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|u| *u == uri).count()
    }

    /// Waits (bounded, asking the server nothing) for more than `seen` updates of `uri`.
    async fn more_than(&self, uri: &str, seen: usize) -> bool {
        for _ in 0..500 {
            if self.count(uri) > seen {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

type Watching = RunningService<RoleClient, Updates>;

async fn tool(c: &Watching, name: &str, args: Value) -> (String, Value) {
    let p = CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap());
    let r = c
        .call_tool(p)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    (text, r.structured_content.expect("structured content"))
}

async fn read(c: &Watching, uri: &str) -> Value {
    let r = c
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|e| panic!("{uri}: {e}"));
    match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => serde_json::from_str(text).unwrap(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarm_active_lists_a_raised_alarm_and_tells_its_subscribers_of_the_raise_and_the_clear() {
    const URI: &str = "alarm://active";
    let (engine, _sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let updates = Updates::default();
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    let c = updates.clone().serve(io).await.unwrap();
    let listed = c.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == URI), "{listed:?}");
    assert_eq!(read(&c, URI).await, json!({"active": []}));
    #[allow(deprecated)]
    c.subscribe(SubscribeRequestParams::new(URI)).await.unwrap();

    // The door opens: the alarm is raised, the subscriber told, the resource lists it.
    let (_, open) = tool(&c, "door_switch", json!({"on": true})).await;
    assert_eq!(open["status"], "completed");
    assert!(updates.more_than(URI, 0).await, "no update on the raise");
    let active = read(&c, URI).await;
    let alarm = &active["active"][0];
    assert_eq!(
        (&alarm["name"], &alarm["severity"], &alarm["blocks"]),
        (
            &json!("GUARD_DOOR_OPEN"),
            &json!("critical"),
            &json!(["conveyor"])
        ),
        "{active}"
    );
    assert!(alarm["since"].is_string(), "{active}");
    assert!(
        alarm["why"]
            .as_str()
            .unwrap()
            .contains("devices.door.contact"),
        "{active}"
    );
    // The device it blocks says so.
    let (text, state) = tool(&c, "get_device_state", json!({"device": "conveyor"})).await;
    assert_eq!(state["alarms"], json!(["GUARD_DOOR_OPEN"]), "{state}");
    assert!(
        text.contains("Blocked by the active alarm GUARD_DOOR_OPEN"),
        "{text}"
    );

    // The door closes: cleared, told, no longer listed.
    let seen = updates.count(URI);
    let (_, closed) = tool(&c, "door_switch", json!({"on": false})).await;
    assert_eq!(closed["status"], "completed");
    assert!(updates.more_than(URI, seen).await, "no update on the clear");
    assert_eq!(read(&c, URI).await, json!({"active": []}));
    let (_, state) = tool(&c, "get_device_state", json!({"device": "conveyor"})).await;
    assert!(state.get("alarms").is_none(), "{state}");
    c.cancel().await.unwrap();
}
