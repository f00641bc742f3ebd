//! Address keys shared by signals and write entries: which kind of source or write a table is,
//! whether it fits the device's driver, and register encodings.

use crate::model::{RawSignal, RawWrite};
use crate::plant::DriverConfig;
use closedloop_contract::{Area, Encoding, ValueType, WordOrder};

/// What a signal is read from, or a write entry writes to, decided by its address key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourceFamily {
    /// `coil`, `discrete_input`, `holding`, `input`.
    Register,
    /// `topic` (MQTT).
    Topic,
    /// `node` (OPC UA).
    Node,
    /// `method` (OPC UA method call; writes only).
    Method,
    /// `message` (CAN).
    Can,
}

impl SourceFamily {
    fn anchors(self) -> &'static [&'static str] {
        match self {
            SourceFamily::Register => &["coil", "discrete_input", "holding", "input"],
            SourceFamily::Topic => &["topic"],
            SourceFamily::Node => &["node"],
            SourceFamily::Method => &["method"],
            SourceFamily::Can => &["message"],
        }
    }

    /// Whether a device with driver `d` can serve this family.
    pub fn fits(self, d: &DriverConfig) -> Result<(), String> {
        let (ok, needs) = match self {
            SourceFamily::Register => (
                d.is_register_based(),
                "a sim, modbus-tcp or modbus-rtu driver",
            ),
            SourceFamily::Topic => (matches!(d, DriverConfig::Mqtt { .. }), "an mqtt driver"),
            SourceFamily::Node | SourceFamily::Method => {
                (matches!(d, DriverConfig::Opcua { .. }), "an opcua driver")
            }
            SourceFamily::Can => (matches!(d, DriverConfig::Can { .. }), "a can driver"),
        };
        if ok {
            return Ok(());
        }
        let instead = match d {
            DriverConfig::Mqtt { .. } => "topic = \"...\"",
            DriverConfig::Opcua { .. } => "node = \"ns=2;s=...\"",
            DriverConfig::Can { .. } => "message = \"...\"",
            DriverConfig::Sim(_)
            | DriverConfig::ModbusTcp { .. }
            | DriverConfig::ModbusRtu { .. } => "coil, discrete_input, holding or input",
        };
        Err(format!(
            "{} needs {needs}, but this device's driver is {}; use {instead}",
            self.anchors().join("/"),
            d.kind()
        ))
    }
}

/// Decides the family of a table from its keys and checks that every key belongs to it.
pub(crate) fn family(
    keys: &[String],
    allowed: &[(SourceFamily, &[&str])],
) -> Result<SourceFamily, String> {
    let anchors: Vec<(SourceFamily, &String)> = keys
        .iter()
        .filter_map(|k| {
            allowed
                .iter()
                .find(|(f, _)| f.anchors().contains(&k.as_str()))
                .map(|(f, _)| (*f, k))
        })
        .collect();
    let all: Vec<&str> = allowed
        .iter()
        .flat_map(|(f, _)| f.anchors().iter().copied())
        .collect();
    let (fam, anchor) = match anchors.as_slice() {
        [] => return Err(format!("no address given; write one of {}", all.join(", "))),
        [one] => *one,
        many => {
            let given: Vec<&str> = many.iter().map(|(_, k)| k.as_str()).collect();
            return Err(format!(
                "{} are given together; write exactly one of them",
                given.join(" and ")
            ));
        }
    };
    let ok = allowed
        .iter()
        .find(|(f, _)| *f == fam)
        .map(|(_, k)| *k)
        .unwrap_or(&[]);
    if let Some(bad) = keys.iter().find(|k| !ok.contains(&k.as_str())) {
        return Err(format!(
            "\"{bad}\" does not go with {anchor}; {anchor} entries take {}",
            ok.join(", ")
        ));
    }
    Ok(fam)
}

/// The register keys of a signal or write entry.
pub(crate) struct RegKeys {
    pub addr: [(Area, Option<u16>); 4],
    pub ty: Option<ValueType>,
    pub word_order: Option<WordOrder>,
    pub byte_swap: Option<bool>,
    pub bit: Option<u8>,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
}

impl From<&RawSignal> for RegKeys {
    fn from(r: &RawSignal) -> RegKeys {
        RegKeys {
            addr: [
                (Area::Coil, r.coil),
                (Area::DiscreteInput, r.discrete_input),
                (Area::Holding, r.holding),
                (Area::Input, r.input),
            ],
            ty: r.ty,
            word_order: r.word_order,
            byte_swap: r.byte_swap,
            bit: r.bit,
            scale: r.scale,
            offset: r.offset,
        }
    }
}

impl From<&RawWrite> for RegKeys {
    fn from(r: &RawWrite) -> RegKeys {
        RegKeys {
            addr: [
                (Area::Coil, r.coil),
                (Area::DiscreteInput, r.discrete_input),
                (Area::Holding, r.holding),
                (Area::Input, r.input),
            ],
            ty: r.ty,
            word_order: r.word_order,
            byte_swap: r.byte_swap,
            bit: r.bit,
            scale: r.scale,
            offset: r.offset,
        }
    }
}

impl RegKeys {
    /// Area, address and encoding; the error names the key (relative) and the fix.
    pub fn resolve(&self) -> Result<(Area, u16, Encoding), (String, String)> {
        let Some((area, address)) = self.addr.iter().find_map(|(a, v)| v.map(|v| (*a, v))) else {
            return err("", "no address given".into());
        };
        if area.is_bit() {
            return self.bit_area(area, address);
        }
        let ty = self.ty.unwrap_or(ValueType::U16);
        self.check_bit(ty)?;
        let (scale, offset) = self.scale_offset(ty)?;
        let words = if self.bit.is_some() { 1 } else { ty.words() };
        if u32::from(address) + u32::from(words) - 1 > u32::from(u16::MAX) {
            return err(
                area.key(),
                format!(
                    "{} {ty} at {address} runs past register 65535",
                    article(&ty.to_string())
                ),
            );
        }
        let encoding = Encoding {
            ty,
            word_order: self.word_order.unwrap_or_default(),
            byte_swap: self.byte_swap.unwrap_or(false),
            bit: self.bit,
            scale,
            offset,
        };
        Ok((area, address, encoding))
    }

    /// A coil or discrete input is one bit: a bool, with none of the keys that shape a
    /// register's value.
    fn bit_area(
        &self,
        area: Area,
        address: u16,
    ) -> Result<(Area, u16, Encoding), (String, String)> {
        for (k, given) in [
            ("word_order", self.word_order.is_some()),
            ("byte_swap", self.byte_swap.is_some()),
            ("bit", self.bit.is_some()),
            ("scale", self.scale.is_some()),
            ("offset", self.offset.is_some()),
        ] {
            if given {
                return err(
                    k,
                    format!(
                        "{k} does not apply to a {}, which is one bit; remove it",
                        area.key()
                    ),
                );
            }
        }
        if let Some(ty) = self.ty.filter(|t| *t != ValueType::Bool) {
            return err(
                "type",
                format!("a {} is a bool, not {ty}; remove type", area.key()),
            );
        }
        Ok((
            area,
            address,
            Encoding {
                ty: ValueType::Bool,
                ..Encoding::default()
            },
        ))
    }

    /// `bit` picks one of the 16 bits of a single one-word register of type `ty`.
    fn check_bit(&self, ty: ValueType) -> Result<(), (String, String)> {
        let Some(bit) = self.bit else {
            return Ok(());
        };
        if bit > 15 {
            return err(
                "bit",
                format!("bit {bit} does not exist; a register has bits 0 to 15"),
            );
        }
        if ty.words() != 1 || ty == ValueType::Bool {
            return err(
                "bit",
                format!(
                    "bit takes one bit of a single u16/i16 register, not of {} {ty}; remove type or bit",
                    article(&ty.to_string())
                ),
            );
        }
        Ok(())
    }

    /// Scale and offset with their defaults: finite, a scale that can be undone on write, and
    /// neither on a bool.
    fn scale_offset(&self, ty: ValueType) -> Result<(f64, f64), (String, String)> {
        let scale = self.scale.unwrap_or(1.0);
        let offset = self.offset.unwrap_or(0.0);
        if !scale.is_finite() || scale == 0.0 {
            return err(
                "scale",
                format!("scale {scale} cannot be undone on write; use a finite non-zero number"),
            );
        }
        if !offset.is_finite() {
            return err("offset", "offset must be a finite number".into());
        }
        if (ty == ValueType::Bool || self.bit.is_some())
            && (self.scale.is_some() || self.offset.is_some())
        {
            return err("scale", "a bool has no scale or offset; remove them".into());
        }
        Ok((scale, offset))
    }
}

/// A refusal of key `k` (relative to the entry) with message `m`, as [`RegKeys::resolve`]
/// returns it.
fn err<T>(k: &str, m: String) -> Result<T, (String, String)> {
    Err((k.to_string(), m))
}

/// "a" or "an" before a type name as it is spoken (an i32, an f64, a u16).
fn article(word: &str) -> &'static str {
    match word.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'f') => "an",
        _ => "a",
    }
}
