//! [`Simulated`]: one device `closedloop sim` runs, whichever protocol carries it.
//!
//! The control endpoint injects and clears faults without caring whether the device answers as a
//! Modbus unit, talks MQTT, sits on a CAN bus or is served over OPC UA; each kind checks a fault
//! exactly as its plant-file entry is checked and refuses, by key, what it cannot honour.

use crate::can_node::CanNode;
use crate::mqtt_relay::MqttRelay;
use closedloop_sim::{FaultConfig, FaultKind, FaultSpec, SimConfigError, SimDevice};
use std::sync::Arc;

/// A device run by the simulator. Cheap to clone: clones share the device.
#[derive(Debug, Clone)]
pub enum Simulated {
    /// A register-mapped device served as a Modbus TCP unit.
    Modbus(SimDevice),
    /// An `mqtt-relay`, running as a client of its broker for as long as any clone lives.
    Mqtt(Arc<MqttRelay>),
    /// A node on a simulated CAN bus; it runs as long as its [`SimBus`](crate::SimBus) does.
    Can(CanNode),
    /// A device served as OPC UA nodes by a simulated OPC UA server, which serves it as long as
    /// the [`BoundPlant`](crate::BoundPlant) that started it runs. Faults reach the server
    /// through the shared device; `crc_error` is refused ([`crate::opcua_sim`]).
    Opcua(SimDevice),
}

impl Simulated {
    /// Checks a fault written as in the plant file (keys prefixed `fault.`) and injects it.
    pub fn inject_config(&self, fault: &FaultConfig) -> Result<(), SimConfigError> {
        match self {
            Simulated::Modbus(d) => d.inject_config(fault),
            Simulated::Mqtt(r) => r.inject_config(fault),
            Simulated::Can(n) => n.inject_config(fault),
            Simulated::Opcua(d) => crate::opcua_sim::inject_config(d, fault),
        }
    }

    /// Removes the fault of `kind`, if any; a device held off by it comes back as after a boot.
    pub fn clear(&self, kind: FaultKind) {
        match self {
            Simulated::Modbus(d) | Simulated::Opcua(d) => d.clear(kind),
            Simulated::Mqtt(r) => r.clear(kind),
            Simulated::Can(n) => n.clear(kind),
        }
    }

    /// Removes every fault.
    pub fn clear_all(&self) {
        match self {
            Simulated::Modbus(d) | Simulated::Opcua(d) => d.clear_all(),
            Simulated::Mqtt(r) => r.clear_all(),
            Simulated::Can(n) => n.clear_all(),
        }
    }

    /// The faults pending or in force.
    pub fn faults(&self) -> Vec<FaultSpec> {
        match self {
            Simulated::Modbus(d) | Simulated::Opcua(d) => d.faults(),
            Simulated::Mqtt(r) => r.faults(),
            Simulated::Can(n) => n.faults(),
        }
    }
}

impl From<SimDevice> for Simulated {
    fn from(device: SimDevice) -> Simulated {
        Simulated::Modbus(device)
    }
}

impl From<MqttRelay> for Simulated {
    fn from(relay: MqttRelay) -> Simulated {
        Simulated::Mqtt(Arc::new(relay))
    }
}

impl From<CanNode> for Simulated {
    fn from(node: CanNode) -> Simulated {
        Simulated::Can(node)
    }
}
