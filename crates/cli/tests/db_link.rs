//! One gateway's link to PostgreSQL cut (`CLOSEDLOOP_PG_URL`) by a TCP proxy the test controls,
//! the other gateway's intact: the cut-off gateway cannot renew, stops writing when its leases'
//! time runs out, and its devices go to the other, which drives them; nothing the cut-off
//! gateway is asked then reaches a device, and the journal is left with no open command.
//! Ground truth is read from the simulator's registers with Modbus requests written here.

mod common;

use common::gateways::{call, call_raw, gateway, gateway_on, owned_by, settled_owner, start_sim};
use common::pg::Database;
use common::proxy::Proxy;
use common::truth::modbus_read;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_cut_off_from_postgresql_stops_writing_and_its_devices_move() {
    let Some(db) = Database::create("link_cut").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, modbus) = start_sim(dir.path(), &db.url, 2);
    let upstream = db.url.split('@').nth(1).unwrap().split('/').next().unwrap();
    let proxy = Proxy::start(upstream).await;
    // Gateway a reaches the database through the proxy, b directly.
    let plant = std::fs::read_to_string(dir.path().join("plant.toml")).unwrap();
    let through_proxy = dir.path().join("plant_a.toml");
    std::fs::write(&through_proxy, plant.replace(upstream, &proxy.addr)).unwrap();
    // The cut-off gateway is named so that the lamp falls to it (rendezvous hashing).
    let names = ["a", "c", "d", "e", "f", "g"].map(String::from);
    let cut_off = names
        .iter()
        .find(|n| {
            let pair = [n.to_string(), "b".to_string()];
            closedloop_engine::ownership::rendezvous("lamp", &pair) == Some(*n)
        })
        .expect("one of six names wins the lamp");
    let (mut a, a_at) = gateway_on(&through_proxy, cut_off);
    let (mut b, b_at) = gateway(dir.path(), "b");
    assert_eq!(settled_owner(&a_at, &b_at, "lamp").await, *cut_off);
    proxy.cut();
    // b sees the heartbeat stop and takes the lamp once its lease expired on the database.
    owned_by(&b_at, "lamp", Some("b")).await;
    // Asked now, the cut-off gateway holds no lease and cannot even journal its refusal: the
    // call fails as a JSON-RPC internal error naming the journal, and nothing reaches the lamp.
    let on = r#"{"on":true,"wait_s":5}"#;
    let answer = call_raw(&a_at, "lamp_switch", on).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("journal database error"), "{answer}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lamp = modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1;
    assert_eq!(lamp, 0, "the cut-off gateway switched the lamp: {answer}");
    let done = call(&b_at, "lamp_switch", on).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(modbus_read(&modbus, 1, 2, 0, 1).await[0] & 1, 1);
    proxy.mend();
    common::gateways::wind_up(db, &mut [&mut a, &mut b]).await;
}
