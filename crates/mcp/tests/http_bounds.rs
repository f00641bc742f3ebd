//! MCP over Streamable HTTP under load: a body over the limit is 413, a deeply nested one is
//! refused, requests beyond the
//! in-flight bound get 503 at once, and readers cannot take the capacity kept for acting and
//! cancelling.

mod common;

use closedloop_mcp::http::HttpOptions;
use common::gateway::{Gateway, OPS, VIEWER, raw, raw_tool, result, running_on, tokens};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

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
async fn a_deeply_nested_body_is_refused_and_the_server_goes_on() {
    let gw = Gateway::start(&tokens(), HttpOptions::default()).await;
    let depth = 100_000;
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":{}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .body(nested)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    // Refused as a bad request or a JSON-RPC parse error, never served, never a crash.
    assert!(
        status.is_client_error() || body.contains("\"error\""),
        "{status}: {body}"
    );
    assert!(!body.contains("\"tools\""), "{body}");
    let resp = raw(&gw.url, Some(OPS), "tools/list", json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "the server goes on");
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

/// Readers holding every general permit (long waits here; event streams alike) never keep an
/// agent from acting or from stopping an axis: a quarter of the permits is kept for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_cannot_take_the_capacity_kept_for_acting_and_cancelling() {
    let opts = HttpOptions {
        max_in_flight: 4,
        ..HttpOptions::default()
    };
    let gw = Gateway::start(&tokens(), opts).await;
    let (id, moving) = start_a_long_move(&gw.url).await;
    // The move must be under way for the readers to wait on it (bounded: a loaded machine).
    let status = status_once_accepted(&gw.url, &id).await;
    assert_eq!(status, "running", "the move is not under way: {moving}");
    let waiting = three_readers_wait_on(&gw.url, &id);
    let waiting = the_general_permits_are_taken(&gw.url, waiting).await;
    acting_and_cancelling_get_through(&gw.url, &id).await;
    for w in waiting {
        let _ = w.await;
    }
    gw.stop_and_caller_none().await;
}

/// A reader's wait, on a task of its own: the answer it finally got.
type Waiting = tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>;

/// Starts a 6 s move without waiting: its command id, and the whole result.
async fn start_a_long_move(url: &str) -> (String, Value) {
    let moving = result(
        raw_tool(
            url,
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
    (id, moving)
}

/// Command `id`'s status once it is no longer `accepted` (or after 5 s of polling).
async fn status_once_accepted(url: &str, id: &str) -> Value {
    let mut status = Value::Null;
    for _ in 0..250 {
        let r = result(
            raw_tool(
                url,
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
    status
}

/// Three readers wait on the 6 s move: the three general permits are taken. A reader that
/// arrives while the poll above still holds its permit (it is given back as its answer
/// ends) is refused 503: it tries again, as a client told `Retry-After` would.
fn three_readers_wait_on(url: &str, id: &str) -> Vec<Waiting> {
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let url = url.to_string();
        let id = id.to_string();
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
    waiting
}

/// Waits (at most 5 s) until one more reader is refused 503: the readers hold every general
/// permit. Hands the readers back.
async fn the_general_permits_are_taken(url: &str, waiting: Vec<Waiting>) -> Vec<Waiting> {
    let mut refused = false;
    for _ in 0..250 {
        let r = raw(url, Some(VIEWER), "tools/list", json!({}))
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
    waiting
}

/// Acting and cancelling still get through, on the reserve.
async fn acting_and_cancelling_get_through(url: &str, id: &str) {
    let lamp = result(
        raw_tool(
            url,
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
        raw_tool(url, Some(OPS), "cancel_command", json!({"command_id": id}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        cancel["structuredContent"]["status"], "cancelled",
        "{cancel}"
    );
}
