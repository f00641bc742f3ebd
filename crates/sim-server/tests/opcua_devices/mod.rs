//! Simulated devices on a simulated OPC UA server, for the tests that drive closedloop-opcua's
//! client against it; the client helpers come from `closedloop_opcua::testing`.

#![allow(dead_code)]

pub use closedloop_opcua::testing::*;
use closedloop_sim::{SimConfig, SimDevice};
use closedloop_sim_server::opcua_sim::SimServer;

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
