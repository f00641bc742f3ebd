//! The host's side of a simulated CAN bus, as the `can` driver meets it: nodes started through
//! `start_buses`, the announced pty opened with closedloop-can's slcan `CanBus`, frames decoded
//! through the DBC file. socat is a prerequisite (scripts/system-deps installs it): without it
//! these tests fail, they never skip.

#![allow(dead_code)] // each test file uses its own part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use closedloop_plant::SimCan;
use closedloop_sim::{FaultConfig, SimConfig};
use closedloop_sim_server::can::{CanBus, Dbc, Frame, Frames, Interface, decode, encode};
use closedloop_sim_server::{
    CanNode, CanNodeSpec, ControlCommand, SimBus, Simulated, link_path, start_buses,
};
use tokio::time::{Instant, timeout};

/// The example DBC: LampCmd/LampStatus, SlideCmd/SlideStatus (big-endian position).
pub fn workshop_dbc() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/can-workshop.dbc")
}

/// This test's bus: its own name per process and thread, since a bus name is also the path of
/// its pty link and tests run side by side.
pub fn bus_name() -> String {
    let thread: String = format!("{:?}", std::thread::current().id())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    format!("test-{}-{thread}", std::process::id())
}

/// A node spec on this test's bus ([`bus_name`]).
pub fn spec(
    device: &str,
    dbc: &Path,
    status: &str,
    command: &str,
    period_ms: u64,
    config: SimConfig,
) -> CanNodeSpec {
    CanNodeSpec {
        device: device.into(),
        can: SimCan {
            bus: bus_name(),
            dbc: dbc.to_path_buf(),
            status: status.into(),
            command: command.into(),
            period_ms,
        },
        config,
    }
}

/// The lamp: a relay with `pull_in_ms`, status every 20 ms.
pub fn lamp(pull_in_ms: u64, faults: Vec<FaultConfig>) -> CanNodeSpec {
    let config = SimConfig {
        model: "relay".into(),
        pull_in_ms: Some(pull_in_ms),
        faults,
        ..SimConfig::default()
    };
    spec("lamp", &workshop_dbc(), "LampStatus", "LampCmd", 20, config)
}

/// The slide: a stepper at 200 mm/s over 0–300 mm, status every 20 ms.
pub fn slide(faults: Vec<FaultConfig>) -> CanNodeSpec {
    let config = SimConfig {
        model: "stepper".into(),
        speed_mm_s: Some(200.0),
        faults,
        ..SimConfig::default()
    };
    spec(
        "slide",
        &workshop_dbc(),
        "SlideStatus",
        "SlideCmd",
        20,
        config,
    )
}

/// A fault entry as a plant file writes it.
pub fn fault(line: &str) -> FaultConfig {
    match ControlCommand::parse(&format!("fault any {line}")) {
        Ok(ControlCommand::Fault { fault, .. }) => fault,
        other => panic!("{other:?}"),
    }
}

/// A decoded status: signal → value.
pub type Values = BTreeMap<String, f64>;

/// The simulator's bus and a host on it.
pub struct Host {
    pub sim: SimBus,
    pub bus: CanBus,
    pub frames: Frames,
    pub dbc: Dbc,
}

impl Host {
    /// Starts the nodes (one bus) and opens the announced pty as an slcan adapter at 500 kbit/s.
    pub async fn start(specs: &[CanNodeSpec]) -> Host {
        let mut buses = start_buses(specs).await.expect("the nodes start");
        assert_eq!(buses.len(), 1, "one bus");
        let sim = buses.remove(0);
        assert!(sim.pty().starts_with("/dev/"), "{}", sim.pty());
        assert_eq!(
            sim.interface(),
            format!("slcan:{}", link_path(sim.name()).display()),
            "the interface is the bus's stable link to its pty"
        );
        let interface = Interface::parse(&sim.interface()).unwrap();
        let bus = timeout(Duration::from_secs(5), CanBus::open(&interface, 500_000))
            .await
            .expect("the adapter answers the handshake within 5 s")
            .expect("the adapter takes S6 and O");
        let frames = bus.frames();
        let dbc = Dbc::load(&specs[0].can.dbc).unwrap();
        Host {
            sim,
            bus,
            frames,
            dbc,
        }
    }

    pub fn node(&self, device: &str) -> &CanNode {
        self.sim.node(device).expect("a node of that name")
    }

    /// The control endpoint's view: every node by device id.
    pub fn devices(&self) -> BTreeMap<String, Simulated> {
        self.sim
            .nodes()
            .iter()
            .map(|n| (n.device().to_string(), n.clone().into()))
            .collect()
    }

    /// Runs a control request (`fault lamp power_off`) as the control endpoint would.
    pub fn control(&self, line: &str) -> Result<(), String> {
        ControlCommand::parse(line)?.execute(&self.devices())
    }

    /// Sends `message` with these signal values (the others 0); returns once the adapter acked.
    pub async fn send(&self, message: &str, values: &[(&str, f64)]) {
        let m = self.dbc.message(message).unwrap();
        let mut all: BTreeMap<String, f64> =
            m.signals().iter().map(|s| (s.name.clone(), 0.0)).collect();
        for (k, v) in values {
            all.insert((*k).to_string(), *v);
        }
        let data = encode(m, &all).unwrap();
        timeout(
            Duration::from_secs(5),
            self.bus.send(Frame::data(m.id(), m.extended(), data)),
        )
        .await
        .expect("acked within 5 s")
        .expect("the adapter acks a frame on an open channel");
    }

    /// Forgets every frame the adapter reported before now: it reports frames in order, so
    /// once it acked a frame sent now, the frames written before that ack have been received
    /// (and are forgotten with the old receiver).
    pub async fn sync(&mut self) {
        // An id no node takes, so the frame changes nothing.
        timeout(
            Duration::from_secs(5),
            self.bus.send(Frame::data(0x7FF, false, [])),
        )
        .await
        .expect("acked within 5 s")
        .expect("the adapter acks a frame on an open channel");
        self.frames = self.bus.frames();
    }

    /// The next frame of `message` within `within`, with its arrival instant and raw payload.
    pub async fn next_raw(
        &mut self,
        message: &str,
        within: Duration,
    ) -> Option<(Instant, Vec<u8>)> {
        let m = self.dbc.message(message).unwrap().clone();
        let deadline = Instant::now() + within;
        loop {
            let f = match tokio::time::timeout_at(deadline, self.frames.next()).await {
                Err(_) => return None,
                Ok(f) => f.expect("the bus stays up"),
            };
            if f.id == m.id() && f.extended == m.extended() {
                return Some((Instant::now(), f.data));
            }
        }
    }

    /// The next status of `message` within `within`, decoded.
    pub async fn next_in(&mut self, message: &str, within: Duration) -> Option<(Instant, Values)> {
        let (at, data) = self.next_raw(message, within).await?;
        let m = self.dbc.message(message).unwrap();
        let values = decode(m, &data)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        Some((at, values))
    }

    /// The next status of `message`; it must come within 2 s.
    pub async fn next(&mut self, message: &str) -> Values {
        match self.next_in(message, Duration::from_secs(2)).await {
            Some((_, v)) => v,
            None => panic!("no {message} within 2 s"),
        }
    }

    /// The first status of `message` that satisfies `ok`, within `within`; with when it came.
    pub async fn until(
        &mut self,
        message: &str,
        within: Duration,
        ok: impl Fn(&Values) -> bool,
    ) -> (Instant, Values) {
        let deadline = Instant::now() + within;
        let mut last = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_in(message, left).await {
                Some((at, v)) if ok(&v) => return (at, v),
                Some((_, v)) => last = Some(v),
                None => panic!("no {message} as expected within {within:?}; the last was {last:?}"),
            }
        }
    }

    /// The frames of `message` that arrive during `window` from now.
    pub async fn during(&mut self, message: &str, window: Duration) -> Vec<Values> {
        let deadline = Instant::now() + window;
        let mut seen = Vec::new();
        while let Some((_, v)) = self
            .next_in(message, deadline.saturating_duration_since(Instant::now()))
            .await
        {
            seen.push(v);
        }
        seen
    }
}

/// `(name, value)` pairs as a map, for comparing decoded statuses.
pub fn values(pairs: &[(&str, f64)]) -> Values {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}
