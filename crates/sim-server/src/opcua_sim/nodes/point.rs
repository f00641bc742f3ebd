//! Where each OPC UA variable of a device lives in its register map, and how its value is
//! carried there: the register side of the nodes, kept apart from the OPC UA stack so the
//! encoding can be read and tested on its own.

use closedloop_contract::{Area, Data, Write};
use closedloop_sim::Model;
use opcua::types::{StatusCode, Variant};

/// Where a variable lives in its device's register map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// A coil or a discrete input, as Boolean.
    Bit { area: Area, addr: u16 },
    /// An i32 over two holding registers (high word first) in 0.01 units, as Double.
    Hundredths { addr: u16 },
    /// An i16 register in 0.1 units, as Double.
    Tenths { area: Area, addr: u16 },
}

impl Point {
    /// A coil or discrete input: shorthand for [`layout`]'s table.
    const fn bit(area: Area, addr: u16) -> Point {
        Point::Bit { area, addr }
    }

    /// An i16 register in 0.1 units: shorthand for [`layout`]'s table.
    const fn tenths(area: Area, addr: u16) -> Point {
        Point::Tenths { area, addr }
    }

    /// Whether the variable is Boolean; every other one is Double.
    pub(super) fn is_bool(self) -> bool {
        matches!(self, Point::Bit { .. })
    }

    /// What to read for the value: the area, the first address and how many.
    pub(super) fn read_span(self) -> (Area, u16, u16) {
        match self {
            Point::Bit { area, addr } | Point::Tenths { area, addr } => (area, addr, 1),
            Point::Hundredths { addr } => (Area::Holding, addr, 2),
        }
    }

    /// The value in what was read, or `None` when the answer has the wrong shape.
    pub(super) fn decode(self, data: &Data) -> Option<Variant> {
        match (self, data) {
            (Point::Bit { .. }, Data::Bits(b)) => b.first().map(|b| Variant::Boolean(*b)),
            (Point::Hundredths { .. }, Data::Words(w)) if w.len() == 2 => {
                let raw = ((u32::from(w[0]) << 16) | u32::from(w[1])) as i32;
                Some(Variant::Double(f64::from(raw) / 100.0))
            }
            (Point::Tenths { .. }, Data::Words(w)) => w
                .first()
                .map(|w| Variant::Double(f64::from(*w as i16) / 10.0)),
            _ => None,
        }
    }

    /// The register write for a value of the right type; `Bad_OutOfRange` when the register
    /// cannot hold it (never saturated).
    pub(super) fn encode(self, value: &Variant) -> Result<Write, StatusCode> {
        match (self, value) {
            (Point::Bit { addr, .. }, Variant::Boolean(b)) => Ok(Write::Coils {
                start: addr,
                values: vec![*b],
            }),
            (Point::Hundredths { addr }, Variant::Double(x)) => {
                let raw = (x * 100.0).round();
                if !raw.is_finite() || raw < f64::from(i32::MIN) || raw > f64::from(i32::MAX) {
                    return Err(StatusCode::BadOutOfRange);
                }
                let raw = raw as i32 as u32;
                Ok(Write::Registers {
                    start: addr,
                    values: vec![(raw >> 16) as u16, raw as u16],
                })
            }
            (Point::Tenths { addr, .. }, Variant::Double(x)) => {
                let raw = (x * 10.0).round();
                if !raw.is_finite() || raw < f64::from(i16::MIN) || raw > f64::from(i16::MAX) {
                    return Err(StatusCode::BadOutOfRange);
                }
                Ok(Write::Registers {
                    start: addr,
                    values: vec![raw as i16 as u16],
                })
            }
            _ => Err(StatusCode::BadTypeMismatch),
        }
    }
}

/// A variable of a model: its name, where it lives, whether clients may write it.
pub(super) type VarSpec = (&'static str, Point, bool);
/// A method of a model: its name and the command coil it pulses.
pub(super) type MethodSpec = (&'static str, u16);

/// The variables and methods of each model.
pub(super) fn layout(model: &Model) -> (Vec<VarSpec>, Vec<MethodSpec>) {
    use Area::{Coil, DiscreteInput, Holding, Input};
    match model {
        Model::Relay(o) => {
            let mut vars = vec![("Commanded", Point::bit(Coil, 0), true)];
            if o.feedback {
                vars.push(("Contact", Point::bit(DiscreteInput, 0), false));
            }
            (vars, vec![])
        }
        Model::Stepper(_) => (
            vec![
                ("TargetMm", Point::Hundredths { addr: 0 }, true),
                ("PositionMm", Point::Hundredths { addr: 2 }, false),
                ("Moving", Point::bit(DiscreteInput, 0), false),
                ("Fault", Point::bit(DiscreteInput, 1), false),
            ],
            vec![("Start", 0), ("Stop", 1), ("Reset", 2)],
        ),
        Model::Heater(_) => (
            vec![
                ("SetpointC", Point::tenths(Holding, 0), true),
                ("Enable", Point::bit(Coil, 0), true),
                ("TemperatureC", Point::tenths(Input, 0), false),
            ],
            vec![],
        ),
        Model::Sensor(_) => (vec![("Value", Point::tenths(Input, 0), false)], vec![]),
        // Refused before the server is built (`mqtt-relay` speaks MQTT, not registers).
        Model::MqttRelay(_) => (vec![], vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_encode_as_i32_hundredths_high_word_first_and_never_saturate() {
        let p = Point::Hundredths { addr: 0 };
        assert_eq!(
            p.encode(&Variant::Double(150.0)),
            Ok(Write::Registers {
                start: 0,
                values: vec![0, 15000]
            })
        );
        assert_eq!(
            p.encode(&Variant::Double(-1.0)),
            Ok(Write::Registers {
                start: 0,
                values: vec![0xFFFF, 0xFF9C]
            })
        );
        assert_eq!(
            p.encode(&Variant::Double(3e7)),
            Err(StatusCode::BadOutOfRange)
        );
        assert_eq!(
            p.encode(&Variant::Float(1.0)),
            Err(StatusCode::BadTypeMismatch)
        );
        let data = Data::Words(vec![0xFFFF, 0xFF9C]);
        assert_eq!(p.decode(&data), Some(Variant::Double(-1.0)));
    }

    #[test]
    fn tenths_are_signed_and_bits_are_booleans() {
        let t = Point::Tenths {
            area: Area::Input,
            addr: 0,
        };
        assert_eq!(
            t.decode(&Data::Words(vec![(-25i16) as u16])),
            Some(Variant::Double(-2.5))
        );
        assert_eq!(
            t.encode(&Variant::Double(4000.0)),
            Err(StatusCode::BadOutOfRange)
        );
        let b = Point::Bit {
            area: Area::Coil,
            addr: 0,
        };
        assert_eq!(
            b.encode(&Variant::Double(1.0)),
            Err(StatusCode::BadTypeMismatch)
        );
        assert_eq!(
            b.decode(&Data::Bits(vec![true])),
            Some(Variant::Boolean(true))
        );
    }
}
