//! Simulated devices served over OPC UA: what `closedloop sim` runs for `[device.sim] opcua =
//! "127.0.0.1:PORT"`, so that an `opcua` driver (`endpoint = "opc.tcp://127.0.0.1:PORT/"`)
//! reads, monitors, writes and calls them as it would a PLC's OPC UA server.
//!
//! Every device naming the same address is served by one [`SimServer`] (this module's simulated
//! OPC UA server, built on async-opcua), as the devices of one PLC share its server;
//! `127.0.0.1:0` picks one free port, shared by every device that writes exactly that. The
//! endpoint URL `closedloop sim` announces ([`ServedOpcua::endpoint`]) is the one the driver
//! names. Security is None, anonymous.
//!
//! # Structure
//! - here: checking and binding a plant's `opcua` tables, and the faults OPC UA cannot carry.
//! - `server`: [`SimServer`], the OPC UA stack around the devices, sampling for subscribers.
//! - `stack`: how that stack is configured (endpoints, security, limits) and reached.
//! - `nodes`: each device's variables and methods, delegated to its register map.
//! - `gate`: the TCP front door that goes dark or freezes for `power_off` and `zombie`.
//!
//! # Nodes
//! Namespace 2 is `urn:closedloop:sim`. Each device is an object `ns=2;s={device}` under the
//! Objects folder; its variables are `ns=2;s={device}.{Name}` and its methods
//! `ns=2;s={device}.{Method}`, called on the object `ns=2;s={device}`:
//!
//! | model | variables | methods |
//! |---|---|---|
//! | relay | `Commanded` (Boolean, writable), `Contact` (Boolean; absent with `feedback = false`) | — |
//! | stepper | `TargetMm` (Double, writable; outside travel: `Bad_OutOfRange`), `PositionMm` (Double), `Moving`, `Fault` (Boolean) | `Start`, `Stop`, `Reset` (no arguments) |
//! | heater | `SetpointC` (Double, writable), `Enable` (Boolean, writable), `TemperatureC` (Double) | — |
//! | sensor | `Value` (Double) | — |
//!
//! An `mqtt-relay` has no OPC UA form: a table giving it `opcua` is refused.
//!
//! # Faults
//! Faults live in the device ([`SimDevice`]) and act through its register map, so they look on
//! OPC UA as on Modbus, status codes for exception codes:
//!
//! | fault | over OPC UA |
//! |---|---|
//! | `nak` | reads, writes and calls answer `Bad_InternalError` |
//! | `latency_ms {ms}` | every answer comes `ms` late |
//! | `drop_rate {p}` | a request is lost with probability `p`: `Bad_Timeout` after the device's `timeout_ms` |
//! | `stall`, `brownout`, `swapped_contacts` | as in-process: the variables show what the registers would |
//! | `power_off`, `reboot {down_ms}` | once every device of the server is off, the server goes dark: connections are dropped and new ones closed at once; cleared (or `down_ms` later), it answers again |
//! | `zombie` | once every device of the server is silent (and none off), connections stay open and nothing answers; when it ends, they are dropped and clients reconnect |
//! | `crc_error` | refused, in the plant file (`bind_plant`) and at the control endpoint: OPC UA runs over TCP, which drops a corrupted segment before the stack sees it |
//!
//! A silent device sharing its server with a live one cannot take the server down: its own
//! variables answer reads `Bad_Timeout` after its `timeout_ms` and turn `Bad_NoCommunication`
//! for subscribers, as a gateway's would for a device behind it that stopped answering.

mod gate;
mod nodes;
mod server;
mod stack;

pub use server::{SAMPLE_PERIOD, SIM_NAMESPACE, SimError, SimOptions, SimServer};

use crate::plant::BindError;
use closedloop_plant::DeviceSim;
use closedloop_sim::{FaultConfig, FaultKind, FaultSpec, SimConfigError, SimDevice};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// One device served by a simulated OPC UA server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedOpcua {
    /// Device id.
    pub device: String,
    /// The endpoint URL an `opcua` driver names to reach it (`opc.tcp://127.0.0.1:PORT/`).
    pub endpoint: String,
    /// The address actually bound (the real port when the file says 0).
    pub addr: SocketAddr,
}

/// A device checked and built for its OPC UA server, not yet served.
#[derive(Debug)]
pub(crate) struct OpcuaSpec {
    /// Device id.
    pub device: String,
    /// `[device.sim] opcua`, parsed.
    pub listen: SocketAddr,
    /// The device the server will serve; a clone goes to the control endpoint.
    pub sim: SimDevice,
}

/// The running servers; they serve until dropped. Only their endpoints are shown by `Debug`
/// (the server holds the OPC UA stack, which has no useful `Debug`).
pub(crate) struct OpcuaServers(Vec<SimServer>);

impl std::fmt::Debug for OpcuaServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(SimServer::endpoint_url))
            .finish()
    }
}

/// Why a device served over OPC UA cannot suffer a fault of `kind`, or `None` when it can.
///
/// One function, so that the plant-file check and the control endpoint refuse the same kinds
/// with the same words.
pub(crate) fn refusal(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::CrcError => Some(
            "served over OPC UA it has no checksum to get wrong: OPC UA runs over TCP, which \
             drops a corrupted segment before the stack sees it; use `drop_rate` for lost \
             requests or `nak` for refused ones",
        ),
        _ => None,
    }
}

fn not_for_opcua(key: &str, kind: FaultKind, model: &str, why: &str) -> SimConfigError {
    SimConfigError::FaultNotForModel {
        key: key.to_string(),
        kind,
        model: model.to_string(),
        why: why.to_string(),
    }
}

/// Checks a fault written as in the plant file (keys prefixed `fault.`) and injects it into a
/// device served over OPC UA, refusing by key the kinds [`refusal`] names.
pub(crate) fn inject_config(device: &SimDevice, fault: &FaultConfig) -> Result<(), SimConfigError> {
    if let Ok(kind) = fault.kind.parse::<FaultKind>()
        && let Some(why) = refusal(kind)
    {
        return Err(not_for_opcua(
            "fault.kind",
            kind,
            device.model().name(),
            why,
        ));
    }
    device.inject_config(fault)
}

/// Refuses, naming `faults[i].kind`, a plant file's fault that OPC UA cannot carry.
fn check_faults(faults: &[FaultSpec], model: &str) -> Result<(), SimConfigError> {
    for (i, spec) in faults.iter().enumerate() {
        if let Some(why) = refusal(spec.fault.kind()) {
            let key = format!("faults[{i}].kind");
            return Err(not_for_opcua(&key, spec.fault.kind(), model, why));
        }
    }
    Ok(())
}

/// Checks the `[device.sim]` table of `device`, which gives `opcua = listen`, and builds its
/// device: `opcua` goes with no other way of serving it, the model must have a register map,
/// and its faults must have an OPC UA meaning.
pub(crate) fn prepare(device: &str, sim: &DeviceSim, listen: &str) -> Result<OpcuaSpec, BindError> {
    let other = [
        (sim.listen.is_some(), "listen", "Modbus TCP"),
        (sim.broker.is_some(), "broker", "MQTT"),
        (sim.can.is_some(), "can", "CAN"),
    ]
    .into_iter()
    .find(|(given, ..)| *given);
    if let Some((_, other, protocol)) = other {
        return Err(BindError::OpcuaAndOther {
            device: device.to_string(),
            other,
            protocol,
        });
    }
    let refused = |message: String| BindError::Sim {
        device: device.to_string(),
        message,
    };
    if sim.config.model == "mqtt-relay" {
        return Err(refused(
            "sim.opcua: the model `mqtt-relay` speaks MQTT and has no OPC UA form; give it \
             `broker` instead, or serve a `relay` over OPC UA"
                .into(),
        ));
    }
    let addr: SocketAddr = listen.parse().map_err(|_| BindError::OpcuaListen {
        device: device.to_string(),
        opcua: listen.to_string(),
    })?;
    let valid = sim.config.validate().map_err(|e| refused(e.to_string()))?;
    check_faults(&valid.faults, valid.model.name()).map_err(|e| refused(e.to_string()))?;
    let built = SimDevice::new(&valid).map_err(|e| refused(e.to_string()))?;
    Ok(OpcuaSpec {
        device: device.to_string(),
        listen: addr,
        sim: built,
    })
}

/// Starts one server per distinct address of `specs`; returns every device served (in the
/// order of `specs`) and the servers, which accept sessions when this returns.
pub(crate) async fn start(
    specs: &[OpcuaSpec],
) -> Result<(Vec<ServedOpcua>, OpcuaServers), BindError> {
    let mut groups: BTreeMap<SocketAddr, Vec<(String, SimDevice)>> = BTreeMap::new();
    for spec in specs {
        groups
            .entry(spec.listen)
            .or_default()
            .push((spec.device.clone(), spec.sim.clone()));
    }
    let mut servers = Vec::with_capacity(groups.len());
    let mut bound = BTreeMap::new();
    for (listen, devices) in groups {
        let names: Vec<&str> = devices.iter().map(|(id, _)| id.as_str()).collect();
        let names = names.join(", ");
        let server = SimServer::start(listen, devices)
            .await
            .map_err(|e| match e {
                SimError::Bind { source, .. } => BindError::Bind {
                    listen,
                    devices: names.clone(),
                    source,
                },
                other => BindError::Opcua {
                    listen,
                    devices: names.clone(),
                    source: other,
                },
            })?;
        bound.insert(
            listen,
            (server.endpoint_url().to_string(), server.local_addr()),
        );
        servers.push(server);
    }
    let served = specs
        .iter()
        .filter_map(|spec| {
            let (endpoint, addr) = bound.get(&spec.listen)?;
            Some(ServedOpcua {
                device: spec.device.clone(),
                endpoint: endpoint.clone(),
                addr: *addr,
            })
        })
        .collect();
    Ok((served, OpcuaServers(servers)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_sim::{Fault, SimConfig};

    fn relay() -> SimDevice {
        SimDevice::from_config(&SimConfig {
            model: "relay".into(),
            ..SimConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn only_crc_error_is_refused() {
        for kind in FaultKind::ALL {
            assert_eq!(
                refusal(kind).is_some(),
                kind == FaultKind::CrcError,
                "{kind}"
            );
        }
    }

    #[test]
    fn an_injected_crc_error_is_refused_by_key_and_nothing_is_injected() {
        let lamp = relay();
        let fault = FaultConfig {
            kind: "crc_error".into(),
            ..FaultConfig::default()
        };
        let e = inject_config(&lamp, &fault).unwrap_err();
        assert_eq!(e.key(), "fault.kind");
        let msg = e.to_string();
        assert!(msg.contains("crc_error") && msg.contains("OPC UA"), "{msg}");
        assert!(lamp.faults().is_empty());

        let nak = FaultConfig {
            kind: "nak".into(),
            ..FaultConfig::default()
        };
        inject_config(&lamp, &nak).unwrap();
        assert_eq!(lamp.faults(), vec![FaultSpec::now(Fault::Nak)]);
    }

    fn table(model: &str) -> DeviceSim {
        DeviceSim {
            config: SimConfig {
                model: model.into(),
                ..SimConfig::default()
            },
            listen: None,
            unit: None,
            broker: None,
            can: None,
            opcua: Some("127.0.0.1:0".into()),
        }
    }

    #[test]
    fn opcua_with_can_or_an_mqtt_relay_is_refused_naming_device_and_key() {
        let mut sim = table("relay");
        sim.can = Some(closedloop_plant::SimCan {
            bus: "workshop".into(),
            dbc: "/nonexistent.dbc".into(),
            status: "LampStatus".into(),
            command: "LampCommand".into(),
            period_ms: 100,
        });
        let e = prepare("lamp", &sim, "127.0.0.1:0").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("\"lamp\"") && msg.contains("`opcua`") && msg.contains("`can`"),
            "{msg}"
        );

        let e = prepare("lamp", &table("mqtt-relay"), "127.0.0.1:0").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("\"lamp\"") && msg.contains("sim.opcua") && msg.contains("mqtt-relay"),
            "{msg}"
        );

        let e = prepare("lamp", &table("relay"), "localhost:4840").unwrap_err();
        assert!(e.to_string().contains("sim.opcua"), "{e}");
        assert!(prepare("lamp", &table("relay"), "127.0.0.1:0").is_ok());
    }

    #[test]
    fn a_plant_files_crc_error_is_refused_naming_its_index() {
        let faults = [FaultSpec::now(Fault::Nak), FaultSpec::now(Fault::CrcError)];
        let e = check_faults(&faults, "relay").unwrap_err();
        assert_eq!(e.key(), "faults[1].kind");
        assert!(check_faults(&faults[..1], "relay").is_ok());
    }
}
