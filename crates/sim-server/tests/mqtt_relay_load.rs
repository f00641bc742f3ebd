//! A plant file's `mqtt-relay` refused or skipped at load, before any broker is met: faults
//! without an MQTT meaning, a relay without a broker, a broker address that is no MQTT URL.

use closedloop_sim_server::bind_plant;

mod mqtt_lamp;

use mqtt_lamp::{plant, plant_text};

#[tokio::test]
async fn faults_without_mqtt_meaning_are_refused_by_the_plant_load() {
    // The plant loader itself refuses them (so `closedloop check` does too), naming file,
    // device and key.
    let text = plant_text(
        Some("mqtt://127.0.0.1:1"),
        "faults = [{ kind = \"zombie\" }, { kind = \"nak\" }]",
    );
    let Err(e) = closedloop_plant::parse(&text, "mqtt-sim.toml", std::path::Path::new(".")) else {
        panic!("nak accepted")
    };
    let msg = e.to_string();
    assert!(
        msg.contains("mqtt-sim.toml")
            && msg.contains("\"lamp\"")
            && msg.contains("faults[1].kind")
            && msg.contains("nak"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_relay_without_a_broker_is_skipped_with_the_reason() {
    let bound = bind_plant(&plant(&plant_text(None, "")))
        .await
        .expect("binds");
    assert!(bound.relays.is_empty() && bound.devices.is_empty());
    assert_eq!(bound.skipped.len(), 1);
    assert_eq!(bound.skipped[0].device, "lamp");
    assert!(
        bound.skipped[0].reason.contains("broker"),
        "{:?}",
        bound.skipped
    );
}

#[tokio::test]
async fn a_malformed_broker_url_is_refused_by_key() {
    let text = plant_text(Some("http://127.0.0.1:1883"), "");
    let bound = bind_plant(&plant(&text)).await;
    let Err(e) = bound else {
        panic!("http:// accepted: {bound:?}")
    };
    let msg = e.to_string();
    assert!(msg.contains("lamp") && msg.contains("sim.broker"), "{msg}");
}
