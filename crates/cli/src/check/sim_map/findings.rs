//! The walk over a plant that compares each register entry with its model's map, and the
//! findings it collects.

use super::messages::{bool_into_register, missing, read_only, shape};
use super::{Sim, field_at, one_based_hint, sim_of};
use closedloop_contract::{Area, Value};
use closedloop_plant::{
    Device, ParamType, ParamValue, Params, Plant, PlantError, Scope, Source, WriteEntry,
};
use std::cell::OnceCell;
use std::collections::BTreeMap;

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

/// Every finding for `plant`, in file order. `file` is the label errors carry (as the loader's).
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let samples = Samples {
        plant,
        devices: OnceCell::new(),
    };
    for device in &plant.devices {
        if !device.driver.is_register_based() {
            continue;
        }
        let mut linter = Linter {
            file,
            device,
            sim: sim_of(device),
            samples: &samples,
            out: &mut out,
        };
        linter.reads();
        linter.writes();
    }
    out
}

/// Sample values of every device's signals (bools false, numbers 0), which a write's value
/// is evaluated against to learn whether it yields a bool. Built once, at the first write
/// that needs it: built per write, a hall of 4,000 simulated heaters took 9 s to check.
struct Samples<'a> {
    plant: &'a Plant,
    devices: OnceCell<BTreeMap<String, BTreeMap<String, Value>>>,
}

impl Samples<'_> {
    fn devices(&self) -> &BTreeMap<String, BTreeMap<String, Value>> {
        self.devices.get_or_init(|| {
            self.plant
                .devices
                .iter()
                .map(|d| (d.id.clone(), sample(d)))
                .collect()
        })
    }
}

/// One device's signals at their sample values.
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

/// Checks the register entries of one device and collects what it finds into `out`.
struct Linter<'a> {
    /// The label every finding carries.
    file: &'a str,
    device: &'a Device,
    /// The model the device's entries must match; `None` when it is not simulated, and then
    /// only the 1-based warning applies.
    sim: Option<Sim>,
    /// The signals' sample values, for [`yields_bool`].
    samples: &'a Samples<'a>,
    out: &'a mut Vec<Finding>,
}

impl Linter<'_> {
    /// Every register signal of the device, then its heartbeat counter.
    fn reads(&mut self) {
        let device = self.device;
        for signal in &device.signals {
            if let Source::Register {
                area,
                address,
                encoding,
            } = &signal.source
            {
                let key = format!("signals.{}", signal.name);
                self.read(&key, *area, *address, encoding);
            }
        }
        if let Some(counter) = device.liveness.counter {
            self.read(
                "liveness.counter",
                Area::Holding,
                counter,
                &closedloop_contract::Encoding::default(),
            );
        }
    }

    /// Every register entry of every action's `write` plan, then of its `cancel` plan.
    fn writes(&mut self) {
        let device = self.device;
        for action in &device.actions {
            for (plan, entries) in [("write", &action.write), ("cancel", &action.cancel)] {
                for (index, entry) in entries.iter().enumerate() {
                    if let WriteEntry::Register {
                        area,
                        address,
                        encoding,
                        value,
                    } = entry
                    {
                        let key = format!("action.{}.{plan}[{index}]", action.name);
                        self.write(&key, *area, *address, encoding, value);
                    }
                }
            }
        }
    }

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

    /// Without a model to check against, a 1-based look is only a warning: a real device may
    /// well have such an address.
    fn warn_one_based(&mut self, key: &str, area: Area, address: u16, hint: Option<String>) {
        if let Some(h) = hint {
            let m = format!(
                "{} = {address} looks like a 1-based register number: {h}",
                area.key()
            );
            self.push(Severity::Warning, format!("{key}.{}", area.key()), m);
        }
    }

    /// A signal (or the heartbeat counter) read from `address`.
    fn read(
        &mut self,
        key: &str,
        area: Area,
        address: u16,
        encoding: &closedloop_contract::Encoding,
    ) {
        let hint = one_based_hint(area, address);
        let Some(sim) = self.sim.as_ref() else {
            self.warn_one_based(key, area, address, hint);
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
        key: &str,
        area: Area,
        address: u16,
        encoding: &closedloop_contract::Encoding,
        value: &closedloop_plant::Expr,
    ) {
        let hint = one_based_hint(area, address);
        let Some(sim) = self.sim.as_ref() else {
            self.warn_one_based(key, area, address, hint);
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
                (area == Area::Holding && yields_bool(self.samples, self.device, value))
                    .then(|| ("value".to_string(), bool_into_register(sim, f, value)))
            }),
        };
        if let Some((sub, m)) = problem {
            self.push(Severity::Error, format!("{key}.{sub}"), m);
        }
    }
}

/// Whether `value` yields a bool, found by evaluating it once against sample values (bools
/// false, numbers at each parameter's minimum or 0). An expression that cannot be evaluated this
/// way counts as not a bool.
fn yields_bool(samples: &Samples, device: &Device, value: &closedloop_plant::Expr) -> bool {
    let none = BTreeMap::new();
    let signals = samples.devices().get(&device.id).unwrap_or(&none);
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
        signals,
        params: &params,
        devices: samples.devices(),
        extra_strings: &[],
    };
    matches!(value.eval(&scope), Ok(Value::Bool(_)))
}
