//! Helpers shared by the OPC UA integration tests: simulated devices, a client with short
//! timeouts, and waits that fail with a message instead of hanging.

#![allow(dead_code)]

use std::time::Duration;

use closedloop_opcua::sim::SimServer;
use closedloop_opcua::{Link, Monitor, OpcuaClient, OpcuaConfig, Update};
use closedloop_sim::{SimConfig, SimDevice};

/// Longest any single wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(30);

/// A simulated device of `model` with the options of `cfg` (its `model` is overwritten).
pub fn device(model: &str, cfg: SimConfig) -> SimDevice {
    let cfg = SimConfig {
        model: model.to_string(),
        ..cfg
    };
    SimDevice::from_config(&cfg).expect("a valid sim table")
}

/// A relay with the default 10 ms pull-in.
pub fn relay() -> SimDevice {
    device("relay", SimConfig::default())
}

/// A stepper at 100 mm/s over 0–300 mm.
pub fn stepper() -> SimDevice {
    device("stepper", SimConfig::default())
}

/// A sim server on a free loopback port.
pub async fn serve(devices: Vec<(&str, SimDevice)>) -> SimServer {
    let devices = devices
        .into_iter()
        .map(|(id, d)| (id.to_string(), d))
        .collect();
    SimServer::start("127.0.0.1:0".parse().unwrap(), devices)
        .await
        .expect("sim server starts")
}

/// Client settings that notice a lost server within about a second.
pub fn quick(endpoint: &str) -> OpcuaConfig {
    OpcuaConfig {
        request_timeout: Duration::from_millis(800),
        keep_alive: Duration::from_millis(200),
        max_failed_keep_alives: 2,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        ..OpcuaConfig::new(endpoint)
    }
}

/// A client of `endpoint`, connected.
pub async fn connect(endpoint: &str) -> OpcuaClient {
    let client = OpcuaClient::connect(quick(endpoint)).expect("valid config");
    wait_link(&client, true).await;
    client
}

/// Waits until the link is (or is not) connected.
pub async fn wait_link(client: &OpcuaClient, connected: bool) -> Link {
    let mut link = client.link();
    match tokio::time::timeout(WAIT, link.wait_for(|l| l.is_connected() == connected)).await {
        Ok(Ok(l)) => l.clone(),
        _ => panic!(
            "link never became {} (now {:?})",
            if connected {
                "connected"
            } else {
                "disconnected"
            },
            *client.link().borrow()
        ),
    }
}

/// The first update for `node` that `pred` accepts.
pub async fn next_where(
    monitor: &mut Monitor,
    node: &str,
    pred: impl Fn(&Update) -> bool,
) -> Update {
    let wait = async {
        loop {
            match monitor.recv().await {
                Some(u) if u.node == node && pred(&u) => return u,
                Some(_) => {}
                None => panic!("monitor ended while waiting for {node}"),
            }
        }
    };
    tokio::time::timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("no matching update for {node} within {WAIT:?}"))
}

/// `ns=2;s={device}.{name}`.
pub fn node(device: &str, name: &str) -> String {
    format!("ns=2;s={device}.{name}")
}
