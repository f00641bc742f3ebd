//! `list_devices` in pages: a hall of devices is walked with `next_cursor` in plant order, each
//! page costing what it holds; a bad cursor or limit is refused with what to pass instead.

mod common;

use common::{call, sc};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::sync::Arc;

const RELAYS: usize = 45;

fn plant() -> String {
    let mut s = String::from("[server]\nname = \"paging\"\njournal = \"sqlite::memory:\"\n");
    for i in 0..RELAYS {
        s.push_str(&format!(
            r#"
[[device]]
id = "relay{i:02}"
description = "Relay {i}."
driver = {{ kind = "sim", model = "relay" }}
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch relay {i} and confirm it on its contact."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
"#
        ));
    }
    s
}

fn ids(page: &Value) -> Vec<String> {
    page["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["device"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_twenty_walk_every_device_once_in_plant_order() {
    let (engine, _sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let c = ()
        .serve(common::pipe(closedloop_mcp::Server::new(
            Arc::clone(&engine),
            "t",
        )))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut args = json!({});
    for _ in 0..10 {
        let r = call(&c, "list_devices", args.clone()).await;
        let page = sc(&r);
        assert_eq!(page["total"], json!(RELAYS));
        sizes.push(ids(page).len());
        seen.extend(ids(page));
        match page.get("next_cursor") {
            Some(cursor) => {
                let text = format!("{:?}", r.content[0]);
                assert!(
                    text.contains(&format!("cursor \\\"{}\\\"", cursor.as_str().unwrap())),
                    "{text}"
                );
                args = json!({"cursor": cursor});
            }
            None => break,
        }
    }
    assert_eq!(sizes, [20, 20, 5]);
    let expected: Vec<String> = (0..RELAYS).map(|i| format!("relay{i:02}")).collect();
    assert_eq!(seen, expected);
    let all = call(&c, "list_devices", json!({"limit": 1000})).await;
    assert_eq!(ids(sc(&all)).len(), RELAYS);
    assert!(sc(&all).get("next_cursor").is_none());
    let end = call(&c, "list_devices", json!({"cursor": RELAYS.to_string()})).await;
    assert!(ids(sc(&end)).is_empty());
    c.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_or_limit_list_devices_never_gave_is_refused_with_what_to_pass() {
    let (engine, _sims) = common::engine(&plant(), std::path::Path::new(".")).await;
    let c = ()
        .serve(common::pipe(closedloop_mcp::Server::new(
            Arc::clone(&engine),
            "t",
        )))
        .await
        .unwrap();
    let refused = |args: Value| {
        let c = &c;
        async move {
            let p = CallToolRequestParams::new("list_devices")
                .with_arguments(args.as_object().cloned().unwrap());
            c.call_tool(p).await.expect_err("refused").to_string()
        }
    };
    let e = refused(json!({"cursor": "relay07"})).await;
    assert!(
        e.contains("\"relay07\" is not one list_devices returned") && e.contains("next_cursor"),
        "{e}"
    );
    let e = refused(json!({"cursor": (RELAYS + 1).to_string()})).await;
    assert!(e.contains("is not one list_devices returned"), "{e}");
    for limit in [json!(0), json!(1001), json!("ten")] {
        let e = refused(json!({"limit": limit})).await;
        assert!(
            e.contains("limit must be an integer from 1 to 1000"),
            "{limit}: {e}"
        );
    }
    c.cancel().await.unwrap();
}
