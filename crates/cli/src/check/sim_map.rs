//! The simulator's register maps, and the plant-file addresses checked against them.
//!
//! `closedloop check` compares every register signal, write, cancel write and heartbeat counter
//! of a simulated device (`driver = { kind = "sim" }`, or a `[device.sim]` table beside a Modbus
//! driver) with the map of its model, so that `coil = 7` on a relay is refused when the file is
//! checked instead of answering exception 2 at every poll. For every Modbus device it also warns
//! about addresses that look 1-based (`holding = 40001`).
//!
//! The maps are written down once, here: `closedloop-sim` keeps them inside its models and does
//! not export them. The unit tests (`sim_map/tests.rs`) read and write every address of every model
//! through [`closedloop_sim::SimDevice`] (as a `Driver`) and fail if this table and the
//! simulator disagree. (The natural home of the table is `crates/sim`, next to the models.)
//!
//! The module is in four parts: the maps themselves (here), the walk over a plant that collects
//! [`Finding`]s (`findings`), the sentences those findings say (`messages`), and the tests that
//! hold the maps to the simulator (`tests`).

mod findings;
mod messages;
#[cfg(test)]
mod tests;

pub use findings::{Finding, Severity, lint};

use closedloop_contract::{Area, ValueType};
use closedloop_plant::{Device, DriverConfig};
use closedloop_sim::{Model, SimConfig};

/// One item of a model's map: a bit, or a value over one or more registers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Field {
    /// Its area.
    pub area: Area,
    /// Its first (or only) address.
    pub start: u16,
    /// Its type: `Bool` for bits, else the register type (multi-word values high word first).
    pub ty: ValueType,
    /// Whether a write is taken (coils and holding registers only).
    pub writable: bool,
    /// What it is, for messages (`the target position`).
    pub what: &'static str,
    /// Its units, for registers (`in 0.01 mm`); empty for bits.
    pub units: &'static str,
    /// How it may be used: `read/write`, `read-only`, `write true; reads false`.
    pub access: &'static str,
}

impl Field {
    const fn bit(area: Area, start: u16, access: &'static str, what: &'static str) -> Field {
        Field {
            area,
            start,
            ty: ValueType::Bool,
            writable: matches!(area, Area::Coil),
            what,
            units: "",
            access,
        }
    }

    const fn word(
        area: Area,
        start: u16,
        ty: ValueType,
        writable: bool,
        what: &'static str,
        units: &'static str,
    ) -> Field {
        Field {
            area,
            start,
            ty,
            writable,
            what,
            units,
            access: if writable { "read/write" } else { "read-only" },
        }
    }

    /// How many addresses it spans.
    pub fn words(&self) -> u16 {
        if self.area.is_bit() {
            1
        } else {
            self.ty.words()
        }
    }

    fn end(&self) -> u32 {
        u32::from(self.start) + u32::from(self.words())
    }

    fn contains(&self, area: Area, address: u16) -> bool {
        self.area == area
            && u32::from(address) >= u32::from(self.start)
            && u32::from(address) < self.end()
    }

    /// `holding 0–1`, `coil 2`.
    pub fn span(&self) -> String {
        if self.words() > 1 {
            format!(
                "{} {}–{}",
                self.area.key(),
                self.start,
                self.start + self.words() - 1
            )
        } else {
            format!("{} {}", self.area.key(), self.start)
        }
    }

    /// `holding 0–1 (the target position, i32 in 0.01 mm, read/write)`.
    pub fn describe(&self) -> String {
        if self.area.is_bit() {
            format!("{} ({}, {})", self.span(), self.what, self.access)
        } else {
            format!(
                "{} ({}, {} {}, {})",
                self.span(),
                self.what,
                self.ty,
                self.units,
                self.access
            )
        }
    }
}

const RW: &str = "read/write";
const RO: &str = "read-only";
const TRIGGER: &str = "write true; reads false";

const RELAY: &[Field] = &[
    Field::bit(Area::Coil, 0, RW, "the commanded coil state"),
    Field::bit(Area::DiscreteInput, 0, RO, "the contact"),
];
const RELAY_NO_FEEDBACK: &[Field] = &[Field::bit(Area::Coil, 0, RW, "the commanded coil state")];
const STEPPER: &[Field] = &[
    Field::word(
        Area::Holding,
        0,
        ValueType::I32,
        true,
        "the target position",
        "in 0.01 mm",
    ),
    Field::word(
        Area::Holding,
        2,
        ValueType::I32,
        false,
        "the encoder position",
        "in 0.01 mm",
    ),
    Field::bit(Area::Coil, 0, TRIGGER, "start"),
    Field::bit(Area::Coil, 1, TRIGGER, "stop"),
    Field::bit(Area::Coil, 2, TRIGGER, "fault reset"),
    Field::bit(Area::DiscreteInput, 0, RO, "moving"),
    Field::bit(Area::DiscreteInput, 1, RO, "fault"),
];
const HEATER: &[Field] = &[
    Field::bit(Area::Coil, 0, RW, "enable"),
    Field::word(
        Area::Holding,
        0,
        ValueType::I16,
        true,
        "the setpoint",
        "in 0.1 °C",
    ),
    Field::word(
        Area::Input,
        0,
        ValueType::I16,
        false,
        "the temperature",
        "in 0.1 °C",
    ),
];
const SENSOR: &[Field] = &[Field::word(
    Area::Input,
    0,
    ValueType::I16,
    false,
    "the value",
    "in tenths",
)];

/// The register map of a model; `None` for `mqtt-relay`, which has none.
pub fn map(model: &Model) -> Option<&'static [Field]> {
    Some(match model {
        Model::Relay(o) if o.feedback => RELAY,
        Model::Relay(_) => RELAY_NO_FEEDBACK,
        Model::Stepper(_) => STEPPER,
        Model::Heater(_) => HEATER,
        Model::Sensor(_) => SENSOR,
        Model::MqttRelay(_) => return None,
    })
}

/// The model a device's register addresses must match, and how to name it in messages.
struct Sim {
    fields: &'static [Field],
    /// `the simulated stepper` or `the simulated stepper of [device.sim]`.
    name: String,
    /// The relay's `feedback = false`, for the message about its missing contact.
    no_feedback: bool,
}

fn sim_of(device: &Device) -> Option<Sim> {
    let (cfg, whose): (&SimConfig, &str) = match (&device.driver, &device.sim) {
        (DriverConfig::Sim(cfg), _) => (cfg, ""),
        (DriverConfig::ModbusTcp { .. } | DriverConfig::ModbusRtu { .. }, Some(sim))
            if sim.can.is_none() && sim.opcua.is_none() =>
        {
            (&sim.config, " of [device.sim]")
        }
        _ => return None,
    };
    let model = cfg.validate().ok()?.model;
    Some(Sim {
        fields: map(&model)?,
        name: format!("the simulated {}{whose}", model.name()),
        no_feedback: matches!(&model, Model::Relay(o) if !o.feedback),
    })
}

/// The field of `fields` that covers `address` of `area`, if one does.
fn field_at(fields: &[Field], area: Area, address: u16) -> Option<&Field> {
    fields.iter().find(|f| f.contains(area, address))
}

/// `did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0`, for an
/// address that looks like a 1-based register number of its own area.
pub fn one_based_hint(area: Area, address: u16) -> Option<String> {
    let base: u16 = match area {
        Area::Holding => 40001,
        Area::Input => 30001,
        Area::DiscreteInput => 10001,
        Area::Coil => return None,
    };
    (address >= base).then(|| {
        format!(
            "did you mean {key} = {}? Addresses are 0-based PDU addresses; {base} is {key} = 0",
            address - base,
            key = area.key()
        )
    })
}
