//! [`SimServer`]: closedloop's simulated devices served over real OPC UA, for `closedloop sim`
//! and for tests of everything that speaks OPC UA.
//!
//! Each device becomes an object `ns=2;s={device}` with its natural variables and methods:
//!
//! | model | variables (`ns=2;s={device}.{Name}`) | methods |
//! |---|---|---|
//! | relay | `Commanded` (Boolean, writable), `Contact` (Boolean; absent when `feedback = false`) | — |
//! | stepper | `TargetMm` (Double, writable), `PositionMm`, `Moving`, `Fault` | `Start()`, `Stop()`, `Reset()` |
//! | heater | `SetpointC` (Double, writable), `Enable` (Boolean, writable), `TemperatureC` | — |
//! | sensor | `Value` (Double) | — |
//!
//! Reads, writes and calls go to the device's register map (a target outside travel is refused
//! `Bad_OutOfRange`, as exception 3 is on Modbus); subscribers see changes sampled every 20 ms.
//! Device faults act through the map (nak → `Bad_InternalError`, latency, drop_rate → no answer
//! → `Bad_Timeout`, stall, brownout, swapped contacts); when every device of the server is
//! silent, the server itself goes dark (power_off, reboot) or freezes (zombie) — see `gate`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use closedloop_sim::{Model, SimDevice};
use opcua::server::node_manager::memory::InMemoryNodeManager;
use opcua::server::{ServerHandle, SubscriptionCache};
use opcua::types::{DataValue, NodeId};
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::gate::{self, Gate};
use super::nodes::{self, SimNodes};
use super::stack::{Doors, serving, set_limits, stack_builder, url_host, with_security};

pub use super::nodes::NAMESPACE as SIM_NAMESPACE;

/// How often device values are sampled for subscribers (and faults checked for the gate).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(20);

/// Why the sim server could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// A device cannot be served: a bad or repeated id, or a model without registers.
    #[error("device \"{id}\": {why}")]
    Device {
        /// The device id.
        id: String,
        /// What is wrong.
        why: String,
    },
    /// The OPC UA stack refused its configuration or did not start.
    #[error("OPC UA server: {0}")]
    Server(String),
}

/// Options of a [`SimServer`] beyond its devices.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Whether subscriptions are offered. `false` refuses every CreateSubscription
    /// (`Bad_TooManySubscriptions`), like a small embedded server, so clients must poll.
    pub subscriptions: bool,
    /// When set, Basic256Sha256 endpoints (Sign, SignAndEncrypt) are offered beside None, with a
    /// server certificate kept in this directory (`own/cert.der`, generated on first use; see
    /// [`SimServer::server_cert`]). Any client certificate is trusted.
    pub pki_dir: Option<PathBuf>,
}

impl Default for SimOptions {
    /// Subscriptions on, security None only.
    fn default() -> SimOptions {
        SimOptions {
            subscriptions: true,
            pki_dir: None,
        }
    }
}

/// A running simulated OPC UA server. Dropping it stops the server and drops every connection.
pub struct SimServer {
    addr: SocketAddr,
    url: String,
    devices: Vec<(String, SimDevice)>,
    server_cert: Option<PathBuf>,
    handle: ServerHandle,
    tasks: Vec<AbortHandle>,
}

impl Drop for SimServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.handle.cancel();
    }
}

impl SimServer {
    /// Starts serving `devices` on `listen` (port 0 picks a free port) with [`SimOptions`]'
    /// defaults. Returns once the server accepts sessions.
    pub async fn start(
        listen: SocketAddr,
        devices: Vec<(String, SimDevice)>,
    ) -> Result<SimServer, SimError> {
        SimServer::start_with(listen, devices, SimOptions::default()).await
    }

    /// Starts serving `devices` on `listen` with `options`.
    pub async fn start_with(
        listen: SocketAddr,
        devices: Vec<(String, SimDevice)>,
        options: SimOptions,
    ) -> Result<SimServer, SimError> {
        check_devices(&devices)?;
        let doors = Doors::bind(listen).await?;
        let host = url_host(doors.addr);
        let url = format!("opc.tcp://{host}:{}/", doors.addr.port());
        let builder = stack_builder(&host, doors.addr.port(), &url, devices.clone());
        let (mut builder, server_cert) = with_security(builder, options.pki_dir.as_ref());
        set_limits(&mut builder, options.subscriptions);
        let (server, handle) = builder.build().map_err(SimError::Server)?;
        let run = tokio::spawn(server.run_with(doors.internal));
        let manager = match serving(&handle, doors.upstream, doors.addr).await {
            Ok(manager) => manager,
            Err(e) => {
                run.abort();
                return Err(e);
            }
        };
        let mut tasks = vec![run.abort_handle()];
        tasks.extend(spawn_device_tasks(
            &manager,
            &handle,
            &devices,
            doors.public,
            doors.upstream,
        ));
        tracing::info!(%url, devices = devices.len(), "sim OPC UA server listening");
        Ok(SimServer {
            addr: doors.addr,
            url,
            devices,
            server_cert,
            handle,
            tasks,
        })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL (`opc.tcp://127.0.0.1:PORT/`).
    pub fn endpoint_url(&self) -> &str {
        &self.url
    }

    /// The server certificate (DER) clients pin, when security is offered.
    pub fn server_cert(&self) -> Option<&Path> {
        self.server_cert.as_deref()
    }

    /// A served device by id (a clone shares the device: inject faults through it).
    pub fn device(&self, id: &str) -> Option<&SimDevice> {
        self.devices.iter().find(|(d, _)| d == id).map(|(_, d)| d)
    }

    /// Stops the server: every connection is dropped at once, as if the process died.
    pub fn shutdown(self) {
        drop(self);
    }
}

/// Spawns what runs beside the stack: a sampler per device, the watch that recomputes the gate
/// from the devices' faults, and the gate itself between `public` and `upstream`.
fn spawn_device_tasks(
    manager: &Arc<InMemoryNodeManager<SimNodes>>,
    handle: &ServerHandle,
    devices: &[(String, SimDevice)],
    public: TcpListener,
    upstream: SocketAddr,
) -> Vec<AbortHandle> {
    let subscriptions = handle.subscriptions().clone();
    let mut tasks = Vec::with_capacity(devices.len() + 2);
    for index in 0..devices.len() {
        let sampler = sample(manager.clone(), subscriptions.clone(), index);
        tasks.push(tokio::spawn(sampler).abort_handle());
    }
    let (gate_tx, gate_rx) = watch::channel(gate::gate_for(devices));
    tasks.push(tokio::spawn(watch_gate(devices.to_vec(), gate_tx)).abort_handle());
    tasks.push(tokio::spawn(gate::serve(public, upstream, gate_rx)).abort_handle());
    tasks
}

/// Refuses empty, malformed or repeated ids and models without a register map.
fn check_devices(devices: &[(String, SimDevice)]) -> Result<(), SimError> {
    let mut seen = std::collections::HashSet::new();
    for (id, device) in devices {
        let bad = |why: &str| SimError::Device {
            id: id.clone(),
            why: why.to_string(),
        };
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(bad("ids are [a-z0-9_]+"));
        }
        if !seen.insert(id.as_str()) {
            return Err(bad("served twice"));
        }
        if matches!(device.model(), Model::MqttRelay(_)) {
            return Err(bad("mqtt-relay speaks MQTT and has no OPC UA form"));
        }
    }
    Ok(())
}

/// How long after a change a variable is published again on every tick, changed or not.
///
/// async-opcua's server holds back a value that comes sooner than a monitored item's sampling
/// interval after the one before (stamped one interval later) and releases it only when a later
/// value reaches that item. The last change of a move — a slide's final position — would never
/// be delivered. Publishing the value again once the interval has passed releases it; the repeat
/// itself is dropped by the server as unchanged. This covers sampling intervals up to 5 s.
const REPUBLISH_FOR: Duration = Duration::from_secs(5);

/// Samples device `index` every [`SAMPLE_PERIOD`] and publishes what changed (value or status),
/// and again for [`REPUBLISH_FOR`] after each change.
/// A device with latency delays its own samples; a silent one turns `Bad_NoCommunication`.
async fn sample(
    manager: Arc<InMemoryNodeManager<SimNodes>>,
    subs: Arc<SubscriptionCache>,
    index: usize,
) {
    let vars = manager.inner().device_vars(index);
    let device = manager.inner().devices[index].1.clone();
    let mut last: Vec<Option<(DataValue, Instant)>> = vec![None; vars.len()];
    let mut tick = tokio::time::interval(SAMPLE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut publish: Vec<(NodeId, DataValue)> = Vec::new();
        for ((id, var), previous) in vars.iter().zip(last.iter_mut()) {
            let mut dv = nodes::read_var(&device, var.point).await;
            if dv.status() == opcua::types::StatusCode::BadTimeout {
                dv.status = Some(opcua::types::StatusCode::BadNoCommunication);
            }
            let now = Instant::now();
            let same = previous
                .as_ref()
                .is_some_and(|(p, _)| p.value == dv.value && p.status() == dv.status());
            if !same {
                *previous = Some((dv.clone(), now));
            }
            if previous
                .as_ref()
                .is_some_and(|(_, at)| now.duration_since(*at) < REPUBLISH_FOR)
            {
                publish.push((id.clone(), dv));
            }
        }
        if !publish.is_empty() {
            let updates = publish.iter().map(|(id, dv)| (id, None, dv.clone()));
            if let Err(status) = manager.set_values(&subs, updates) {
                tracing::warn!(%status, "sim OPC UA server: could not publish a sample");
            }
        }
    }
}

/// Recomputes the gate from the devices' faults every [`SAMPLE_PERIOD`].
async fn watch_gate(devices: Vec<(String, SimDevice)>, gate: watch::Sender<Gate>) {
    let mut tick = tokio::time::interval(SAMPLE_PERIOD);
    loop {
        tick.tick().await;
        let now = gate::gate_for(&devices);
        gate.send_if_modified(|g| {
            let changed = *g != now;
            if changed {
                tracing::info!(from = ?*g, to = ?now, "sim OPC UA server gate");
            }
            *g = now;
            changed
        });
    }
}
