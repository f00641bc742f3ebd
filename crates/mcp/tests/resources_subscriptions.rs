//! Resource change notifications over a real MCP session: closedloop's server and rmcp's client
//! over an in-process pipe (`tokio::io::duplex`), a simulated lamp and slide.

mod common;

use closedloop_mcp::Server;
use common::resources::{Rig, call, engine, mcp_error, read, serve, start};
use rmcp::ClientServiceExt;
use rmcp::model::{
    CallToolRequestParams, ErrorCode, ProtocolVersion, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use serde_json::json;
use std::time::Duration;
use tokio::time::Instant;

async fn subscribe(rig: &Rig, uri: &str) {
    #[allow(deprecated)]
    rig.client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("subscribe");
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
