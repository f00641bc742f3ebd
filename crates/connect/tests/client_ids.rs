//! Gateways sharing a journal serve one plant file: each connects to an MQTT broker under its own
//! client id (`<client_id>-<instance>`), or they would close each other's connections in turn.

use closedloop_connect::{Connection, build_drivers};

#[test]
fn each_gateway_of_a_shared_journal_gets_its_own_mqtt_client_id() {
    let src = r#"
[[device]]
id = "plug"
description = "A plug"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:1883", client_id = "closedloop-shop" }
[device.signals]
relay = { topic = "shop/plug/state", type = "bool" }
"#;
    let plant = closedloop_plant::parse(src, "p.toml", std::path::Path::new("/srv")).unwrap();
    let id = |d: &closedloop_connect::Drivers| match &d.map["plug"] {
        Connection::Mqtt(config) => config.client_id.clone(),
        _ => panic!("an MQTT connection"),
    };
    let single = build_drivers(&plant).unwrap();
    assert_eq!(id(&single), "closedloop-shop");
    let mut a = build_drivers(&plant).unwrap();
    a.per_instance_client_ids("gw-a");
    let mut b = build_drivers(&plant).unwrap();
    b.per_instance_client_ids("gw-b");
    assert_eq!(
        (id(&a), id(&b)),
        ("closedloop-shop-gw-a".into(), "closedloop-shop-gw-b".into())
    );
}
