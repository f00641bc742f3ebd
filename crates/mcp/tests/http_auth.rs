//! MCP over Streamable HTTP, bearer tokens and their scopes: a missing or bad token is 401 with
//! a challenge, an under-scoped one is refused and journaled, `tools/list` shows a token only the
//! action tools it may call, and raw register writes need `admin`.

mod common;

use closedloop_mcp::http::HttpOptions;
use common::gateway::{
    Gateway, OPS, VIEWER, plant_text, raw, session_client, stateless_client, tokens, transport,
};
use common::{call, sc, sha256_hex};
use reqwest::StatusCode;
use rmcp::ServiceExt;
use serde_json::json;

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
