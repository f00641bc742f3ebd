//! The simulator's register maps, and the plant-file addresses checked against them.
//!
//! `closedloop check` compares every register signal, write, cancel write and heartbeat counter
//! of a simulated device (`driver = { kind = "sim" }`, or a `[device.sim]` table beside a Modbus
//! driver) with the map of its model, so that `coil = 7` on a relay is refused when the file is
//! checked instead of answering exception 2 at every poll. For every Modbus device it also warns
//! about addresses that look 1-based (`holding = 40001`).
//!
//! The maps are written down once, here: `closedloop-sim` keeps them inside its models and does
//! not export them. The unit tests at the bottom read and write every address of every model
//! through [`closedloop_sim::SimDevice`] (as a `Driver`) and fail if this table and the
//! simulator disagree. (The natural home of the table is `crates/sim`, next to the models.)

use closedloop_driver::{Area, Value, ValueType, WordOrder};
use closedloop_plant::{
    Device, DriverConfig, ParamType, ParamValue, Params, Plant, PlantError, Scope, Source,
    WriteEntry,
};
use closedloop_sim::{Model, SimConfig};
use std::collections::BTreeMap;

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

/// Whether a finding refuses the file or only warns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// `check` exits 1.
    Error,
    /// Printed with `warning: `; `check` still exits 0.
    Warning,
}

/// One problem found, with the file, device and key it is at.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Where and what.
    pub error: PlantError,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.severity {
            Severity::Error => write!(f, "{}", self.error),
            Severity::Warning => write!(f, "warning: {}", self.error),
        }
    }
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

/// Every finding for `plant`, in file order. `file` is the label errors carry (as the loader's).
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for device in &plant.devices {
        if !device.driver.is_register_based() {
            continue;
        }
        let mut l = Linter {
            file,
            device,
            sim: sim_of(device),
            out: &mut out,
        };
        for s in &device.signals {
            if let Source::Register {
                area,
                address,
                encoding,
            } = &s.source
            {
                let key = format!("signals.{}", s.name);
                l.read(&key, *area, *address, encoding);
            }
        }
        if let Some(counter) = device.liveness.counter {
            l.read(
                "liveness.counter",
                Area::Holding,
                counter,
                &closedloop_driver::Encoding::default(),
            );
        }
        for a in &device.actions {
            for (plan, entries) in [("write", &a.write), ("cancel", &a.cancel)] {
                for (i, w) in entries.iter().enumerate() {
                    if let WriteEntry::Register {
                        area,
                        address,
                        encoding,
                        value,
                    } = w
                    {
                        let key = format!("action.{}.{plan}[{i}]", a.name);
                        l.write(plant, &key, *area, *address, encoding, value);
                    }
                }
            }
        }
    }
    out
}

struct Linter<'a> {
    file: &'a str,
    device: &'a Device,
    sim: Option<Sim>,
    out: &'a mut Vec<Finding>,
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

impl Linter<'_> {
    fn push(&mut self, severity: Severity, key: String, message: String) {
        self.out.push(Finding {
            severity,
            error: PlantError {
                file: self.file.to_string(),
                device: Some(self.device.id.clone()),
                key: Some(key),
                line: None,
                message,
            },
        });
    }

    /// A signal (or the heartbeat counter) read from `address`.
    fn read(
        &mut self,
        key: &str,
        area: Area,
        address: u16,
        encoding: &closedloop_driver::Encoding,
    ) {
        let hint = one_based_hint(area, address);
        let Some(sim) = self.sim.as_ref() else {
            if let Some(h) = hint {
                let m = format!(
                    "{} = {address} looks like a 1-based register number: {h}",
                    area.key()
                );
                self.push(Severity::Warning, format!("{key}.{}", area.key()), m);
            }
            return;
        };
        let consequence = "the simulator refuses every read of it (exception 2), so this signal never has a value";
        let problem = match field_at(sim.fields, area, address) {
            None => Some((
                area.key().to_string(),
                missing(sim, area, address, consequence, hint.as_deref(), false),
            )),
            Some(f) => shape(sim, f, area, address, encoding, false),
        };
        if let Some((sub, m)) = problem {
            self.push(Severity::Error, format!("{key}.{sub}"), m);
        }
    }

    /// One register entry of a `write` or `cancel` plan.
    fn write(
        &mut self,
        plant: &Plant,
        key: &str,
        area: Area,
        address: u16,
        encoding: &closedloop_driver::Encoding,
        value: &closedloop_plant::Expr,
    ) {
        let hint = one_based_hint(area, address);
        let Some(sim) = self.sim.as_ref() else {
            if let Some(h) = hint {
                let m = format!(
                    "{} = {address} looks like a 1-based register number: {h}",
                    area.key()
                );
                self.push(Severity::Warning, format!("{key}.{}", area.key()), m);
            }
            return;
        };
        let problem = match field_at(sim.fields, area, address) {
            None => Some((
                area.key().to_string(),
                missing(
                    sim,
                    area,
                    address,
                    "the simulator refuses the write (exception 2), so every command fails REGISTER_INVALID",
                    hint.as_deref(),
                    true,
                ),
            )),
            Some(f) if !f.writable => Some((area.key().to_string(), read_only(sim, f))),
            Some(f) => shape(sim, f, area, address, encoding, true).or_else(|| {
                (area == Area::Holding && yields_bool(plant, self.device, value))
                    .then(|| ("value".to_string(), bool_into_register(sim, f, value)))
            }),
        };
        if let Some((sub, m)) = problem {
            self.push(Severity::Error, format!("{key}.{sub}"), m);
        }
    }
}

fn field_at(fields: &[Field], area: Area, address: u16) -> Option<&Field> {
    fields.iter().find(|f| f.contains(area, address))
}

/// `coil 0 (the commanded coil state, read/write)` for every field of `area` (writable only
/// when `writes`), joined for a sentence.
fn listing(fields: &[Field], area: Area, writes: bool) -> Vec<String> {
    fields
        .iter()
        .filter(|f| f.area == area && (!writes || f.writable))
        .map(Field::describe)
        .collect()
}

fn plural(area: Area) -> &'static str {
    match area {
        Area::Coil => "coils",
        Area::DiscreteInput => "discrete inputs",
        Area::Holding => "holding registers",
        Area::Input => "input registers",
    }
}

fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The message for an address the model does not have in that area.
fn missing(
    sim: &Sim,
    area: Area,
    address: u16,
    consequence: &str,
    hint: Option<&str>,
    writes: bool,
) -> String {
    let key = area.key();
    let label = key.replace('_', " ");
    if area == Area::DiscreteInput && address == 0 && sim.no_feedback {
        return format!(
            "{} has no discrete input 0 with feedback = false: there is no contact to read, and \
             {consequence}. Set feedback = true if the relay has an auxiliary contact; otherwise \
             remove this signal and confirm nothing (verification = \"none\") or only the coil \
             (verification = \"readback\")",
            sim.name
        );
    }
    let here = listing(sim.fields, area, writes);
    let has = if here.is_empty() {
        let all: Vec<String> = sim
            .fields
            .iter()
            .filter(|f| !writes || f.writable)
            .map(Field::describe)
            .collect();
        format!(
            "{} has no {}{}; it has {}",
            sim.name,
            if writes { "writable " } else { "" },
            plural(area),
            join(&all)
        )
    } else {
        format!(
            "{} has no {label} {address}; its {}{}: {}",
            sim.name,
            if writes { "writable " } else { "" },
            plural(area),
            join(&here)
        )
    };
    let fix = match (hint, here.as_slice()) {
        (Some(h), _) => {
            let mut h = h.to_string();
            if let Some(c) = h.get_mut(0..1) {
                c.make_ascii_uppercase();
            }
            h
        }
        (None, [_]) => {
            let f = sim
                .fields
                .iter()
                .find(|f| f.area == area && (!writes || f.writable))
                .expect("one listed");
            format!("Write {key} = {}", f.start)
        }
        (None, []) => "Use one of those instead".to_string(),
        (None, _) => format!("Write one of those {}", plural(area)),
    };
    format!("{has}. {}. {fix}", capitalise_first(consequence))
}

fn capitalise_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// A write to a field the model only reads.
fn read_only(sim: &Sim, f: &Field) -> String {
    let writable = listing(sim.fields, f.area, true);
    let instead = if writable.is_empty() {
        match f.area {
            Area::Holding => "It has no writable holding register".to_string(),
            _ => String::new(),
        }
    } else {
        format!("Write {} instead", join(&writable))
    };
    format!(
        "{} of {} is {}: read-only. The simulator refuses the write (exception 2), so every \
         command fails REGISTER_INVALID. {instead}",
        f.span(),
        sim.name,
        f.what
    )
}

/// Alignment, width and byte order of a register value against the field it lands in.
/// Returns the key below the entry (`holding`, `type`, `word_order`, `byte_swap`) and the message.
fn shape(
    sim: &Sim,
    f: &Field,
    area: Area,
    address: u16,
    encoding: &closedloop_driver::Encoding,
    writes: bool,
) -> Option<(String, String)> {
    if area.is_bit() {
        return None;
    }
    let whole = format!("{} = {}, type = \"{}\"", area.key(), f.start, f.ty);
    let verb = if writes { "write" } else { "read" };
    if address != f.start {
        return Some((
            area.key().to_string(),
            format!(
                "{} {address} is the low word of {} of {}, an {} {} over {} (high word first). \
                 {} the whole value: {whole}",
                area.key(),
                f.what,
                sim.name,
                f.ty,
                f.units,
                f.span(),
                capitalise_first(verb)
            ),
        ));
    }
    let bit_read = !writes && (encoding.bit.is_some() || encoding.ty == ValueType::Bool);
    let width = if bit_read { 1 } else { encoding.ty.words() };
    if width != f.words() {
        let what = if width < f.words() {
            format!(
                "as type = \"{}\" this {verb} covers only {} {address}, the high word",
                encoding.ty,
                area.key()
            )
        } else {
            format!(
                "as type = \"{}\" this {verb} covers {} {address}–{} and the model has nothing \
                 after {} (exception 2)",
                encoding.ty,
                area.key(),
                u32::from(address) + u32::from(width) - 1,
                f.span()
            )
        };
        return Some((
            "type".into(),
            format!(
                "{} of {} is {}, an {} {} over {}; {what}. Write type = \"{}\"",
                f.span(),
                sim.name,
                f.what,
                f.ty,
                f.units,
                match f.words() {
                    1 => "one register",
                    2 => "two registers",
                    _ => "four registers",
                },
                f.ty
            ),
        ));
    }
    if !bit_read && matches!(encoding.ty, ValueType::F32 | ValueType::F64) {
        return Some((
            "type".into(),
            format!(
                "{} of {} is {}, an integer ({}), not a float; as type = \"{}\" its bits would be \
                 misread. Write type = \"{}\" (and scale for the units)",
                f.span(),
                sim.name,
                f.what,
                f.ty,
                encoding.ty,
                f.ty
            ),
        ));
    }
    if f.words() > 1 && encoding.word_order == WordOrder::Little {
        return Some((
            "word_order".into(),
            format!(
                "{} of {} sends the high word first; word_order = \"little\" would swap its \
                 halves. Remove word_order (the default \"big\" is right)",
                f.span(),
                sim.name
            ),
        ));
    }
    if encoding.byte_swap {
        return Some((
            "byte_swap".into(),
            format!(
                "{} of {} is not byte-swapped; byte_swap = true would garble it. Remove byte_swap",
                f.span(),
                sim.name
            ),
        ));
    }
    None
}

/// A bool written to a holding register: it becomes 0 or 1 in the register's raw units.
fn bool_into_register(sim: &Sim, f: &Field, value: &closedloop_plant::Expr) -> String {
    let coils = listing(sim.fields, Area::Coil, true);
    let coil_hint = if coils.is_empty() {
        String::new()
    } else {
        format!(
            "; to switch or trigger something write a coil: {}",
            join(&coils)
        )
    };
    format!(
        "value \"{}\" is a bool, and {} of {} is {} ({} {}): the bool would be written as \
         the number 0 or 1. Write a number in the register's units{coil_hint}",
        value.source(),
        f.span(),
        sim.name,
        f.what,
        f.ty,
        f.units
    )
}

/// Whether `value` yields a bool, found by evaluating it once against sample values (bools
/// false, numbers at each parameter's minimum or 0). An expression that cannot be evaluated this
/// way counts as not a bool.
fn yields_bool(plant: &Plant, device: &Device, value: &closedloop_plant::Expr) -> bool {
    fn sample(d: &Device) -> BTreeMap<String, Value> {
        d.signals
            .iter()
            .map(|s| {
                let v = if s.source.is_bool() {
                    Value::Bool(false)
                } else {
                    Value::Number(0.0)
                };
                (s.name.clone(), v)
            })
            .collect()
    }
    let signals = sample(device);
    let devices: BTreeMap<String, BTreeMap<String, Value>> = plant
        .devices
        .iter()
        .map(|d| (d.id.clone(), sample(d)))
        .collect();
    let mut params = Params::new();
    for a in &device.actions {
        for p in &a.params {
            let v = match p.ty {
                ParamType::Bool => ParamValue::Bool(false),
                ParamType::Number | ParamType::Integer => ParamValue::Number(p.min.unwrap_or(0.0)),
                ParamType::String => ParamValue::String(
                    p.choices
                        .as_ref()
                        .and_then(|c| c.first().cloned())
                        .unwrap_or_default(),
                ),
            };
            params.entry(p.name.clone()).or_insert(v);
        }
    }
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    matches!(value.eval(&scope), Ok(Value::Bool(_)))
}

#[cfg(test)]
mod tests {
    //! The table above against the simulator itself: every address of every area is read and
    //! written through `SimDevice` as a `Driver`, and must answer exception 2 exactly where the
    //! table has nothing (or nothing writable); the types are checked by what the registers hold.

    use super::*;
    use closedloop_driver::{Data, Driver, Exception, Write};
    use closedloop_sim::SimDevice;

    const AREAS: [Area; 4] = [Area::Coil, Area::DiscreteInput, Area::Holding, Area::Input];

    fn device(model: &str, extra: impl FnOnce(&mut SimConfig)) -> (SimDevice, &'static [Field]) {
        let mut cfg = SimConfig {
            model: model.into(),
            ..SimConfig::default()
        };
        extra(&mut cfg);
        let fields = map(&cfg.validate().unwrap().model).unwrap();
        (SimDevice::from_config(&cfg).unwrap(), fields)
    }

    fn models() -> Vec<(&'static str, SimDevice, &'static [Field])> {
        let (relay, rf) = device("relay", |_| {});
        let (mute, mf) = device("relay", |c| c.feedback = Some(false));
        let (stepper, sf) = device("stepper", |_| {});
        let (heater, hf) = device("heater", |_| {});
        let (sensor, nf) = device("sensor", |c| c.value = Some(-1.5));
        vec![
            ("relay", relay, rf),
            ("relay feedback=false", mute, mf),
            ("stepper", stepper, sf),
            ("heater", heater, hf),
            ("sensor", sensor, nf),
        ]
    }

    /// Addresses probed: the low ones, and the 1-based numbers people write by mistake.
    fn addresses() -> impl Iterator<Item = u16> {
        (0..64).chain([10001, 30001, 40001, 40002, 65535])
    }

    #[tokio::test(flavor = "current_thread")]
    async fn every_readable_address_is_in_the_table_and_nothing_else() {
        for (name, dev, fields) in models() {
            for area in AREAS {
                for addr in addresses() {
                    let answer = dev.read(area, addr, 1).await.unwrap();
                    let listed = field_at(fields, area, addr).is_some();
                    match answer {
                        Ok(_) => assert!(listed, "{name}: {area} {addr} answers but is not listed"),
                        Err(e) => {
                            assert_eq!(e, Exception::ILLEGAL_DATA_ADDRESS, "{name} {area} {addr}");
                            assert!(!listed, "{name}: {area} {addr} is listed but refused");
                        }
                    }
                }
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn every_writable_address_is_writable_in_the_table_and_nothing_else() {
        for (name, dev, fields) in models() {
            for addr in addresses() {
                // false triggers nothing on a stepper's command coils; 0 is inside travel.
                let coil = dev
                    .write(Write::Coils {
                        start: addr,
                        values: vec![false],
                    })
                    .await
                    .unwrap();
                let writable = field_at(fields, Area::Coil, addr).is_some_and(|f| f.writable);
                assert_eq!(coil.is_ok(), writable, "{name}: coil {addr} write {coil:?}");
                let reg = dev
                    .write(Write::Registers {
                        start: addr,
                        values: vec![0],
                    })
                    .await
                    .unwrap();
                let writable = field_at(fields, Area::Holding, addr).is_some_and(|f| f.writable);
                assert_eq!(
                    reg.is_ok(),
                    writable,
                    "{name}: holding {addr} write {reg:?}"
                );
                if let Err(e) = reg {
                    assert_eq!(e, Exception::ILLEGAL_DATA_ADDRESS, "{name} holding {addr}");
                }
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_types_are_what_the_registers_hold() {
        // stepper: the target is an i32 in 0.01 mm over holding 0–1, high word first, and the
        // encoder position over holding 2–3 reaches it after a start on coil 0.
        let (slide, _) = device("stepper", |c| {
            c.travel_mm = Some([-300.0, 300.0]);
            c.speed_mm_s = Some(1000.0);
        });
        let raw = (-15000i32) as u32;
        let words = vec![(raw >> 16) as u16, raw as u16];
        let w = Write::Registers {
            start: 0,
            values: words.clone(),
        };
        assert_eq!(slide.write(w).await, Ok(Ok(())));
        let start = Write::Coils {
            start: 0,
            values: vec![true],
        };
        assert_eq!(slide.write(start).await, Ok(Ok(())));
        assert_eq!(
            slide.read(Area::DiscreteInput, 0, 2).await,
            Ok(Ok(Data::Bits(vec![true, false])))
        );
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        assert_eq!(
            slide.read(Area::Holding, 2, 2).await,
            Ok(Ok(Data::Words(words)))
        );
        // heater: setpoint and temperature are i16 in 0.1 °C (ambient 25.0 reads 250).
        let (oven, _) = device("heater", |_| {});
        assert_eq!(
            oven.read(Area::Input, 0, 1).await,
            Ok(Ok(Data::Words(vec![250])))
        );
        assert_eq!(
            oven.read(Area::Holding, 0, 1).await,
            Ok(Ok(Data::Words(vec![250])))
        );
        // sensor: an i16 in tenths (-1.5 reads -15).
        let (probe, _) = device("sensor", |c| c.value = Some(-1.5));
        assert_eq!(
            probe.read(Area::Input, 0, 1).await,
            Ok(Ok(Data::Words(vec![(-15i16) as u16])))
        );
    }

    #[test]
    fn one_based_hints_name_the_0_based_address() {
        assert_eq!(
            one_based_hint(Area::Holding, 40001).unwrap(),
            "did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0"
        );
        assert_eq!(
            one_based_hint(Area::Input, 30011).unwrap(),
            "did you mean input = 10? Addresses are 0-based PDU addresses; 30001 is input = 0"
        );
        assert!(one_based_hint(Area::Holding, 40000).is_none());
        assert!(one_based_hint(Area::Coil, 40001).is_none());
    }
}
