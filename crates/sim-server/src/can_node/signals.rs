//! How a simulated model's natural quantities map to DBC signals, by name, and to its registers.
//!
//! | model | status signals (sent) | command signals (taken) |
//! |---|---|---|
//! | `relay` | `Commanded` (coil 0), `Contact` (discrete input 0), 0/1 | `On` → coil 0 |
//! | `stepper` | `PositionMm` (holding 2–3 ÷ 100), `Moving`, `Fault` (discrete inputs 0, 1) | `TargetMm` → holding 0–1 × 100; `Reset`, `Start`, `Stop` → coils 2, 0, 1 when 1 |
//! | `heater` | `TemperatureC` (input 0 ÷ 10), `Enable` (coil 0), `SetpointC` (holding 0 ÷ 10) | `SetpointC` → holding 0 × 10; `Enable` → coil 0 |
//! | `sensor` | `Value` (input 0 ÷ 10) | — |
//!
//! Going through the registers (not the physical truth) is the point: what the node reports is
//! what a register read would show, so `swapped_contacts`, a stall's fault bit and a sensor's
//! noise look exactly as they do in-process and over Modbus.

use std::collections::BTreeMap;

use closedloop_contract::{Area, Data, Driver, Write};
use closedloop_sim::{Model, SimDevice};
use tokio::time::Duration;

/// How long the node waits for its device. The device answers at once unless it is silent
/// (the node keeps the faults that delay answers: see [`super::faults`]), so this only bounds
/// the wait when silence strikes between the node's check and its request.
pub(crate) const DEVICE_WAIT: Duration = Duration::from_millis(100);

/// The models a CAN node can run, with what changes their signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A relay; without feedback it has no contact to report.
    Relay {
        /// Whether discrete input 0 (the contact) exists.
        feedback: bool,
    },
    /// A stepper axis.
    Stepper,
    /// A heater.
    Heater,
    /// A constant sensor.
    Sensor,
}

impl Kind {
    /// The node kind of a model, or `None` for one with no register map (`mqtt-relay`).
    pub(crate) fn of(model: &Model) -> Option<Kind> {
        Some(match model {
            Model::Relay(o) => Kind::Relay {
                feedback: o.feedback,
            },
            Model::Stepper(_) => Kind::Stepper,
            Model::Heater(_) => Kind::Heater,
            Model::Sensor(_) => Kind::Sensor,
            _ => return None,
        })
    }

    /// The signals the status message must have.
    pub(crate) fn status_signals(self) -> &'static [&'static str] {
        match self {
            Kind::Relay { feedback: true } => &["Commanded", "Contact"],
            Kind::Relay { feedback: false } => &["Commanded"],
            Kind::Stepper => &["PositionMm", "Moving", "Fault"],
            Kind::Heater => &["TemperatureC", "Enable", "SetpointC"],
            Kind::Sensor => &["Value"],
        }
    }

    /// The signals the command message must have.
    pub(crate) fn command_signals(self) -> &'static [&'static str] {
        match self {
            Kind::Relay { .. } => &["On"],
            Kind::Stepper => &["TargetMm", "Start", "Stop", "Reset"],
            Kind::Heater => &["SetpointC", "Enable"],
            Kind::Sensor => &[],
        }
    }
}

/// The device did not answer: it is silent (`power_off`, `zombie`, a reboot still down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Silent;

/// Reads the status signals from the device's registers. A register the device refuses (an
/// exception) leaves its signal out; the node then sends it as raw 0.
pub(crate) async fn read_status(
    kind: Kind,
    device: &SimDevice,
) -> Result<BTreeMap<&'static str, f64>, Silent> {
    let mut out = BTreeMap::new();
    let bits = |d: Data| match d {
        Data::Bits(b) => b,
        Data::Words(_) => Vec::new(),
    };
    let words = |d: Data| match d {
        Data::Words(w) => w,
        Data::Bits(_) => Vec::new(),
    };
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    match kind {
        Kind::Relay { feedback } => {
            if let Some(b) = read(device, Area::Coil, 0, 1).await?.map(bits) {
                b.first().map(|v| out.insert("Commanded", flag(*v)));
            }
            if feedback && let Some(b) = read(device, Area::DiscreteInput, 0, 1).await?.map(bits) {
                b.first().map(|v| out.insert("Contact", flag(*v)));
            }
        }
        Kind::Stepper => {
            if let Some(w) = read(device, Area::Holding, 2, 2).await?.map(words)
                && let [hi, lo] = w[..]
            {
                let raw = ((u32::from(hi) << 16) | u32::from(lo)) as i32;
                out.insert("PositionMm", f64::from(raw) / 100.0);
            }
            if let Some(b) = read(device, Area::DiscreteInput, 0, 2).await?.map(bits)
                && let [moving, fault] = b[..]
            {
                out.insert("Moving", flag(moving));
                out.insert("Fault", flag(fault));
            }
        }
        Kind::Heater => {
            if let Some(w) = read(device, Area::Input, 0, 1).await?.map(words) {
                w.first().map(|v| out.insert("TemperatureC", tenths(*v)));
            }
            if let Some(b) = read(device, Area::Coil, 0, 1).await?.map(bits) {
                b.first().map(|v| out.insert("Enable", flag(*v)));
            }
            if let Some(w) = read(device, Area::Holding, 0, 1).await?.map(words) {
                w.first().map(|v| out.insert("SetpointC", tenths(*v)));
            }
        }
        Kind::Sensor => {
            if let Some(w) = read(device, Area::Input, 0, 1).await?.map(words) {
                w.first().map(|v| out.insert("Value", tenths(*v)));
            }
        }
    }
    Ok(out)
}

/// A register in tenths (i16) as a number.
fn tenths(raw: u16) -> f64 {
    f64::from(raw as i16) / 10.0
}

/// One read: `Ok(None)` when the device refused it (an exception), `Err(Silent)` when it did
/// not answer.
async fn read(
    device: &SimDevice,
    area: Area,
    start: u16,
    count: u16,
) -> Result<Option<Data>, Silent> {
    match tokio::time::timeout(DEVICE_WAIT, device.read(area, start, count)).await {
        Ok(Ok(Ok(data))) => Ok(Some(data)),
        Ok(Ok(Err(exception))) => {
            tracing::debug!("reading {area:?} {start}: exception {exception:?}");
            Ok(None)
        }
        // A checksum failure is refused for CAN nodes; a timeout is silence.
        Ok(Err(_)) | Err(_) => Err(Silent),
    }
}

/// One step of applying a command frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Write this, for the signal named.
    Write(&'static str, Write),
    /// The signal's value cannot be written (it does not fit the register): why, for the log.
    Skip(String),
}

/// The register writes a command frame's signals (decoded, by name) come to, in the order they
/// are applied: stepper target, reset, start, then stop (so a frame that says both start and
/// stop leaves the axis stopped); heater setpoint, then enable. Signals the model does not take
/// are ignored; `Start`, `Stop` and `Reset` act when nonzero (a 1-bit flag set).
pub(crate) fn command_steps(kind: Kind, values: &BTreeMap<&str, f64>) -> Vec<Step> {
    let mut steps = Vec::new();
    let on = |name: &str| values.get(name).map(|v| *v != 0.0);
    let coil = |start: u16, on: bool| Write::Coils {
        start,
        values: vec![on],
    };
    match kind {
        Kind::Relay { .. } => {
            if let Some(v) = on("On") {
                steps.push(Step::Write("On", coil(0, v)));
            }
        }
        Kind::Stepper => {
            if let Some(mm) = values.get("TargetMm") {
                let raw = (mm * 100.0).round();
                if raw.is_finite() && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&raw) {
                    let raw = raw as i32 as u32;
                    let values = vec![(raw >> 16) as u16, raw as u16];
                    steps.push(Step::Write(
                        "TargetMm",
                        Write::Registers { start: 0, values },
                    ));
                } else {
                    steps.push(Step::Skip(format!(
                        "TargetMm = {mm} does not fit the target register (an i32 in 0.01 mm)"
                    )));
                }
            }
            for (name, addr) in [("Reset", 2), ("Start", 0), ("Stop", 1)] {
                if on(name) == Some(true) {
                    steps.push(Step::Write(name, coil(addr, true)));
                }
            }
        }
        Kind::Heater => {
            if let Some(c) = values.get("SetpointC") {
                let raw = (c * 10.0).round();
                if raw.is_finite() && (f64::from(i16::MIN)..=f64::from(i16::MAX)).contains(&raw) {
                    let values = vec![raw as i16 as u16];
                    steps.push(Step::Write(
                        "SetpointC",
                        Write::Registers { start: 0, values },
                    ));
                } else {
                    steps.push(Step::Skip(format!(
                        "SetpointC = {c} does not fit the setpoint register (an i16 in 0.1 °C)"
                    )));
                }
            }
            if let Some(v) = on("Enable") {
                steps.push(Step::Write("Enable", coil(0, v)));
            }
        }
        Kind::Sensor => {}
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(&'static str, f64)]) -> BTreeMap<&'static str, f64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn stepper_commands_become_writes_in_a_safe_order() {
        let steps = command_steps(
            Kind::Stepper,
            &values(&[
                ("TargetMm", -1.5),
                ("Start", 1.0),
                ("Stop", 1.0),
                ("Reset", 0.0),
            ]),
        );
        assert_eq!(
            steps,
            [
                Step::Write(
                    "TargetMm",
                    Write::Registers {
                        start: 0,
                        values: vec![0xFFFF, 0xFF6A]
                    }
                ),
                Step::Write(
                    "Start",
                    Write::Coils {
                        start: 0,
                        values: vec![true]
                    }
                ),
                Step::Write(
                    "Stop",
                    Write::Coils {
                        start: 1,
                        values: vec![true]
                    }
                ),
            ]
        );
        let steps = command_steps(Kind::Stepper, &values(&[("TargetMm", 3e7)]));
        assert!(matches!(&steps[..], [Step::Skip(why)] if why.contains("TargetMm")));
    }

    #[test]
    fn relay_heater_and_sensor_commands() {
        assert_eq!(
            command_steps(
                Kind::Relay { feedback: true },
                &values(&[("On", 1.0), ("X", 1.0)])
            ),
            [Step::Write(
                "On",
                Write::Coils {
                    start: 0,
                    values: vec![true]
                }
            )]
        );
        assert_eq!(
            command_steps(
                Kind::Heater,
                &values(&[("Enable", 0.0), ("SetpointC", -12.34)])
            ),
            [
                Step::Write(
                    "SetpointC",
                    Write::Registers {
                        start: 0,
                        values: vec![(-123i16) as u16]
                    }
                ),
                Step::Write(
                    "Enable",
                    Write::Coils {
                        start: 0,
                        values: vec![false]
                    }
                ),
            ]
        );
        assert!(command_steps(Kind::Sensor, &values(&[("Value", 1.0)])).is_empty());
    }

    #[test]
    fn required_signals_follow_the_model() {
        assert_eq!(
            Kind::Relay { feedback: false }.status_signals(),
            ["Commanded"]
        );
        assert_eq!(Kind::Stepper.command_signals().len(), 4);
        assert!(Kind::Sensor.command_signals().is_empty());
    }
}
