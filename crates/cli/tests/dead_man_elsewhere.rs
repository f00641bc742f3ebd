//! Dead-man actions across gateways (`CLOSEDLOOP_PG_URL`): the workshop's slide move made
//! `keepalive_s = 1`, called at the gateway that does not drive the slide. It is handed to the
//! owner like any call; its caller's `get_command_status` at the gateway it called keeps it
//! going past its keepalive to the end; silence there stops it short, `cancelled` `DEADMAN`;
//! and the end of the caller's MCP session there stops it at once, saying so — or, when the
//! session ended before the owner took the call over, the owner never starts it. Ground truth
//! is the slide's position in `closedloop sim`.

mod common;

use closedloop_journal::{EventRow, Journal};
use common::gateways::{Two, add_after, call, entry, handed_call, now_ms, settled_owner, wait_for};
use common::truth::{slide_at_rest, slide_beyond, slide_mm};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use std::time::Duration;

/// Two gateways over the workshop with the slide's move a dead-man action of `keepalive_s`.
async fn two(test: &str, keepalive_s: f64) -> Option<Two> {
    Two::start(test, |plant| {
        let dead_man = format!("keepalive_s = {keepalive_s}\n");
        add_after(&plant, "stopped_when = \"!moving\"\n", &dead_man)
    })
    .await
}

fn outcome(v: &Value) -> (Option<&str>, Option<&str>) {
    (v["status"].as_str(), v["error_code"].as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_at_the_gateway_called_keeps_a_dead_man_move_going_and_silence_stops_it() {
    let Some(p) = two("dead_man_elsewhere", 1.0).await else {
        return;
    };
    let other_at = p.not_driving("slide").await.to_string();
    // Asked about every 300 ms where it was called, it runs its 2.5 s to the end.
    let moving = call(
        &other_at,
        "slide_move_to",
        r#"{"target_mm":250,"wait_s":0}"#,
    )
    .await;
    assert_eq!(moving["status"], "accepted", "{moving}");
    let id = moving["command_id"].as_str().unwrap().to_string();
    let asked = format!(r#"{{"command_id":"{id}","wait_s":0}}"#);
    let mut done = Value::Null;
    for _ in 0..40 {
        done = call(&other_at, "get_command_status", &asked).await;
        if !matches!(done["status"].as_str(), Some("accepted" | "running")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(outcome(&done), (Some("completed"), None), "{done}");
    assert!((slide_mm(&p.modbus).await - 250.0).abs() < 0.5);

    // Not asked about, it stops short once its keepalive (1 s) runs out.
    let back = call(&other_at, "slide_move_to", r#"{"target_mm":0,"wait_s":0}"#).await;
    let id = back["command_id"].as_str().unwrap().to_string();
    for _ in 0..150 {
        if slide_mm(&p.modbus).await < 240.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rest = slide_at_rest(&p.modbus).await;
    assert!(rest > 20.0 && rest < 240.0, "the slide rests at {rest} mm");
    let stopped = call(&other_at, "get_command_status", &wait_for(&id)).await;
    assert_eq!(
        outcome(&stopped),
        (Some("cancelled"), Some("DEADMAN")),
        "{stopped}"
    );
    assert!(
        entry(&stopped, "accepted")["handed_to"].is_string(),
        "{stopped}"
    );
    p.wind_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_the_session_at_the_gateway_called_stops_a_dead_man_move_at_once() {
    // A keepalive of 5 s: only the session's end can stop the 2.5 s move short.
    let Some(p) = two("dead_man_session", 5.0).await else {
        return;
    };
    let other_at = p.not_driving("slide").await.to_string();
    let url = format!("http://{other_at}/mcp");
    let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
    let args = json!({"target_mm": 250, "wait_s": 0});
    let params = CallToolRequestParams::new("slide_move_to")
        .with_arguments(args.as_object().cloned().unwrap());
    let started = client.call_tool(params).await.unwrap();
    let sc = started.structured_content.unwrap();
    assert_eq!(sc["status"], "accepted", "{sc}");
    let id = sc["command_id"].as_str().unwrap().to_string();
    slide_beyond(&p.modbus, 20.0).await;
    // The client closes its session (DELETE with its Mcp-Session-Id).
    client.cancel().await.unwrap();
    let rest = slide_at_rest(&p.modbus).await;
    assert!(rest < 240.0, "the slide went on to {rest} mm");
    let stopped = call(&other_at, "get_command_status", &wait_for(&id)).await;
    assert_eq!(
        outcome(&stopped),
        (Some("cancelled"), Some("DEADMAN")),
        "{stopped}"
    );
    let detail = stopped["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("The MCP session that started this command ended"),
        "{stopped}"
    );
    p.wind_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_man_call_whose_session_ended_before_the_owner_took_it_never_starts() {
    let Some(p) = two("dead_man_unclaimed", 5.0).await else {
        return;
    };
    let owner = settled_owner(&p.a_at, &p.b_at, "slide").await;
    let owner_at = if owner == "a" { &p.a_at } else { &p.b_at };
    // Journaled as the other gateway journals a handed call whose session then ended, before
    // the owner took it over: the call, then the `lapse_requested` entry its session's end adds.
    let journal = Journal::open(&p.db.url).await.unwrap();
    let id = "01a23970-0000-7000-8000-0000000dead0";
    let call_args = ("slide", "move_to", json!({"target_mm": 250.0}));
    let (row, mut events) = handed_call(id, call_args, now_ms(), &owner);
    let why =
        "The MCP session that started this command ended (closed by its client, or idle too long)";
    events.push(EventRow {
        at_ms: now_ms(),
        event: "lapse_requested".into(),
        data: json!({"gateway": "other", "why": why}),
    });
    journal.insert(&row, &events).await.unwrap();
    journal.close().await;
    let ended = call(owner_at, "get_command_status", &wait_for(id)).await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    assert!(
        entry(&ended, "dispatched").is_null(),
        "it was sent: {ended}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(slide_mm(&p.modbus).await < 0.5, "the slide moved");
    p.wind_up().await;
}
