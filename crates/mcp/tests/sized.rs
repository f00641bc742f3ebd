//! Results sized for a model: a long command's result and `list_commands` stay under 4 KB,
//! and the whole timeline is one paged resource away.

mod common;

use common::{Client, call};
use rmcp::ServiceExt;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};
use std::sync::Arc;

/// The shared slide at 60 mm/s, read every 10 ms: a 5 s move with hundreds of readings.
fn plant() -> String {
    let slide = common::plants::replace_line(
        &common::plants::slide_at(60.0),
        "poll_ms = 20",
        "poll_ms = 10",
    );
    format!("[server]\nname = \"sized\"\njournal = \"sqlite::memory:\"\n\n{slide}")
}

async fn read(c: &Client, uri: &str) -> Value {
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
async fn a_five_second_move_s_result_stays_under_4_kb_and_its_whole_timeline_is_paged() {
    let (engine, _sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let io = common::pipe(closedloop_mcp::Server::new(Arc::clone(&engine), "tester"));
    let c = ().serve(io).await.unwrap();
    let (id, done) = a_five_second_move(&c).await;
    let sc = done.structured_content.as_ref().unwrap();
    let omitted = the_result_keeps_the_milestones_under_4_kb(sc);

    // The resource has every reading, page after page.
    let readings = readings_on_every_page(&c, &id).await;
    assert_eq!(readings as u64, omitted + 2);

    // Many commands: list_commands stays under 4 KB and says how many it left out.
    for _ in 0..30 {
        call(&c, "slide_move_to", json!({"target_mm": 1000.0})).await;
    }
    let list = call(&c, "list_commands", json!({"limit": 100})).await;
    let body = list.structured_content.as_ref().unwrap();
    assert!(body.to_string().len() < 4096, "{}", body.to_string().len());
    assert!(body["omitted"].as_u64().unwrap() > 0, "{body:#}");
}

/// Moves the slide 300 mm (5 s at 60 mm/s) and follows it until it no longer runs: the
/// command's id and its last status.
async fn a_five_second_move(c: &Client) -> (String, rmcp::model::CallToolResult) {
    let r = call(c, "slide_move_to", json!({"target_mm": 300.0, "wait_s": 0})).await;
    let id = r.structured_content.as_ref().unwrap()["command_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut done = r;
    for _ in 0..10 {
        done = call(
            c,
            "get_command_status",
            json!({"command_id": id, "wait_s": 10}),
        )
        .await;
        if done.structured_content.as_ref().unwrap()["status"] != "running" {
            break;
        }
    }
    (id, done)
}

/// The completed move's result (`sc`) is under 4 KB, keeps every milestone and two readings,
/// and says how many readings it left out: that count.
fn the_result_keeps_the_milestones_under_4_kb(sc: &Value) -> u64 {
    assert_eq!(sc["status"], "completed", "{sc:#}");
    let size = sc.to_string().len();
    assert!(size < 4096, "{size} bytes: {sc:#}");
    let timeline = sc["timeline"].as_array().unwrap();
    let kinds: Vec<&str> = timeline
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for milestone in [
        "received",
        "accepted",
        "dispatched",
        "device_ack",
        "completed",
    ] {
        assert!(kinds.contains(&milestone), "{milestone} kept: {kinds:?}");
    }
    assert_eq!(
        kinds.iter().filter(|k| **k == "signal").count(),
        2,
        "{kinds:?}"
    );
    // One `omitted` entry per stretch of readings between milestones: together, all but two.
    let omitted: u64 = timeline
        .iter()
        .filter(|e| e["event"] == "omitted")
        .map(|e| e["omitted"].as_u64().unwrap())
        .sum();
    assert!(omitted > 50, "a 5 s move read every 10 ms: {omitted}");
    omitted
}

/// The readings on every page of command `id`'s timeline resource (at most 100 pages).
async fn readings_on_every_page(c: &Client, id: &str) -> usize {
    let mut uri = format!("command://{id}/timeline");
    let mut readings = 0;
    for _ in 0..100 {
        let page = read(c, &uri).await;
        readings += page["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "signal")
            .count();
        match page["next"].as_str() {
            Some(next) => uri = next.to_string(),
            None => break,
        }
    }
    readings
}
