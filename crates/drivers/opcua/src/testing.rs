//! Helpers for the tests of every crate that speaks OPC UA (this crate's, the simulator's): a
//! client with short timeouts and waits that fail with a message instead of hanging.
//!
//! Behind the `testing` feature so that the client tests here (against a foreign server) and the
//! simulated server's tests in closedloop-sim-server drive the client the same way instead of
//! each keeping a copy. They panic on a wait that runs out: they are for tests only.

use std::time::Duration;

use crate::{Monitor, OpcuaClient, OpcuaConfig, SessionState, Update};

/// Longest any single wait in these tests may take.
pub const WAIT: Duration = Duration::from_secs(30);

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
    wait_session(&client, true).await;
    client
}

/// Waits until the session is (or is not) connected.
pub async fn wait_session(client: &OpcuaClient, connected: bool) -> SessionState {
    let mut state = client.session_state();
    match tokio::time::timeout(WAIT, state.wait_for(|s| s.is_connected() == connected)).await {
        Ok(Ok(s)) => s.clone(),
        _ => panic!(
            "the session never became {} (now {:?})",
            if connected {
                "connected"
            } else {
                "disconnected"
            },
            *client.session_state().borrow()
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
