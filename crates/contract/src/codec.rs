//! Pure conversion between engineering values and 16-bit registers.
//!
//! No I/O here, so every encoding can be tested word by word. The rules come from
//! docs/plant-file.md: multi-register values are high word first unless `word_order = "little"`;
//! `byte_swap` swaps the two bytes inside each register; `bit` picks one bit of a register; the
//! engineering value is `raw × scale + offset`. Writing inverts that and rounds to the nearest raw
//! value — and a value the register cannot hold (NaN, infinite, out of range) is an error, never
//! saturated, because a saturated setpoint is a silent lie about what was commanded.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// A signal's value as the engine and the expressions see it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A bit, a contact, a flag.
    Bool(bool),
    /// Every number is a double (docs/plant-file.md), whatever its register type.
    Number(f64),
}

impl Value {
    /// The value as a boolean: `Bool` as is, a number is true when non-zero.
    pub fn as_bool(self) -> bool {
        match self {
            Value::Bool(b) => b,
            Value::Number(n) => n != 0.0,
        }
    }

    /// The value as a number: `Bool` is 0 or 1.
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Bool(b) => f64::from(u8::from(b)),
            Value::Number(n) => n,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
        }
    }
}

/// The raw type of a register value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    /// One bit (a coil, a discrete input, a register's `bit`, or a register read as non-zero).
    Bool,
    /// Unsigned 16-bit, the default for registers.
    #[default]
    U16,
    /// Signed 16-bit.
    I16,
    /// Unsigned 32-bit over two registers.
    U32,
    /// Signed 32-bit over two registers.
    I32,
    /// Unsigned 64-bit over four registers.
    U64,
    /// Signed 64-bit over four registers.
    I64,
    /// IEEE 754 single over two registers.
    F32,
    /// IEEE 754 double over four registers.
    F64,
}

impl ValueType {
    /// How many 16-bit registers one value occupies.
    pub fn words(self) -> u16 {
        match self {
            ValueType::Bool | ValueType::U16 | ValueType::I16 => 1,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 2,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 4,
        }
    }

    /// The plant-file spelling.
    pub fn key(self) -> &'static str {
        match self {
            ValueType::Bool => "bool",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F32 => "f32",
            ValueType::F64 => "f64",
        }
    }

    /// The smallest and largest raw value an integer type can hold (as doubles).
    fn integer_range(self) -> Option<(f64, f64)> {
        match self {
            ValueType::Bool => Some((0.0, 1.0)),
            ValueType::U16 => Some((0.0, f64::from(u16::MAX))),
            ValueType::I16 => Some((f64::from(i16::MIN), f64::from(i16::MAX))),
            ValueType::U32 => Some((0.0, f64::from(u32::MAX))),
            ValueType::I32 => Some((f64::from(i32::MIN), f64::from(i32::MAX))),
            // 2^64 is not representable in u64; any double >= 2^64 is out of range.
            ValueType::U64 => Some((0.0, 18_446_744_073_709_549_568.0)),
            ValueType::I64 => Some((-9_223_372_036_854_775_808.0, 9_223_372_036_854_774_784.0)),
            ValueType::F32 | ValueType::F64 => None,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Order of the registers of a multi-register value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WordOrder {
    /// High word first (ABCD), the Modbus convention and the default.
    #[default]
    Big,
    /// Low word first (CDAB), common on some PLCs.
    Little,
}

/// How a register value maps to an engineering value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Encoding {
    /// Raw type.
    pub ty: ValueType,
    /// Register order of multi-register values.
    pub word_order: WordOrder,
    /// Swap the two bytes inside each register.
    pub byte_swap: bool,
    /// Take one bit (0 = least significant) of a single register.
    pub bit: Option<u8>,
    /// Engineering value = raw × scale + offset.
    pub scale: f64,
    /// Engineering value = raw × scale + offset.
    pub offset: f64,
}

impl Default for Encoding {
    fn default() -> Self {
        Encoding {
            ty: ValueType::U16,
            word_order: WordOrder::Big,
            byte_swap: false,
            bit: None,
            scale: 1.0,
            offset: 0.0,
        }
    }
}

/// Why a value could not be turned into registers.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// NaN or infinite.
    #[error("the value {0} is not a finite number")]
    NotFinite(f64),
    /// The raw value does not fit the register type.
    #[error(
        "the value {value} becomes raw {raw} which a {ty} register cannot hold ({min}..={max})"
    )]
    OutOfRange {
        /// The engineering value asked for.
        value: f64,
        /// `(value - offset) / scale`, rounded.
        raw: f64,
        /// The register type.
        ty: ValueType,
        /// Smallest raw value.
        min: f64,
        /// Largest raw value.
        max: f64,
    },
    /// `bit = N` registers cannot be written on their own without clobbering the other bits.
    #[error("a single bit of a register cannot be written; write the whole register")]
    BitWrite,
    /// The scale is zero, so no raw value maps back.
    #[error("scale is zero")]
    ZeroScale,
}

impl Encoding {
    /// How many registers this encoding reads or writes.
    pub fn words(&self) -> u16 {
        if self.bit.is_some() {
            1
        } else {
            self.ty.words()
        }
    }

    /// Decodes `words` (exactly [`Encoding::words`] of them, in device order) into a value.
    ///
    /// # Panics
    /// Never; a short slice decodes the missing registers as zero. Callers read the right count.
    pub fn decode(&self, words: &[u16]) -> Value {
        if let Some(bit) = self.bit {
            let w = self.swap(words.first().copied().unwrap_or(0));
            return Value::Bool((w >> (bit & 15)) & 1 == 1);
        }
        let n = usize::from(self.ty.words());
        let mut regs: Vec<u16> = (0..n).map(|i| words.get(i).copied().unwrap_or(0)).collect();
        for r in regs.iter_mut() {
            *r = self.swap(*r);
        }
        if self.word_order == WordOrder::Little {
            regs.reverse();
        }
        let mut bits: u64 = 0;
        for r in &regs {
            bits = (bits << 16) | u64::from(*r);
        }
        let raw = match self.ty {
            ValueType::Bool => return Value::Bool(bits != 0),
            ValueType::U16 | ValueType::U32 | ValueType::U64 => bits as f64,
            ValueType::I16 => f64::from(bits as u16 as i16),
            ValueType::I32 => f64::from(bits as u32 as i32),
            ValueType::I64 => bits as i64 as f64,
            ValueType::F32 => f64::from(f32::from_bits(bits as u32)),
            ValueType::F64 => f64::from_bits(bits),
        };
        Value::Number(self.engineering(raw))
    }

    /// `raw × scale + offset`, rounded to the decimals the scale and offset carry, so that a
    /// register holding 252 with `scale = 0.1` reads 25.2 rather than 25.200000000000003. Float
    /// registers are not rounded: their raw value is no integer, and rounding it to the scale's
    /// decimals would cut its precision (1234.5678 W at scale 0.001 must read 1.2345678 kW).
    fn engineering(&self, raw: f64) -> f64 {
        let v = raw * self.scale + self.offset;
        if (self.scale == 1.0 && self.offset == 0.0)
            || matches!(self.ty, ValueType::F32 | ValueType::F64)
        {
            return v;
        }
        // A scale or offset finer than 12 decimals (1e-13, a subnormal) is used as it is:
        // rounding to 12 decimals would round its values away.
        let (Some(ds), Some(doff)) = (decimals(self.scale), decimals(self.offset)) else {
            return v;
        };
        let f = 10f64.powi(ds.max(doff));
        let r = (v * f).round() / f;
        if r.is_finite() { r } else { v }
    }

    /// Encodes an engineering value into registers in device order.
    pub fn encode(&self, value: Value) -> Result<Vec<u16>, EncodeError> {
        if self.bit.is_some() {
            return Err(EncodeError::BitWrite);
        }
        if self.ty == ValueType::Bool {
            return Ok(vec![self.swap(u16::from(bool_value(value)?))]);
        }
        let v = value.as_f64();
        if !v.is_finite() {
            return Err(EncodeError::NotFinite(v));
        }
        if self.scale == 0.0 {
            return Err(EncodeError::ZeroScale);
        }
        let scaled = (v - self.offset) / self.scale;
        let bits: u64 = match self.ty.integer_range() {
            Some((min, max)) => {
                let raw = scaled.round();
                if !(min..=max).contains(&raw) {
                    return Err(EncodeError::OutOfRange {
                        value: v,
                        raw,
                        ty: self.ty,
                        min,
                        max,
                    });
                }
                match self.ty {
                    ValueType::I16 => u64::from(raw as i16 as u16),
                    ValueType::I32 => u64::from(raw as i32 as u32),
                    ValueType::I64 => raw as i64 as u64,
                    _ => raw as u64,
                }
            }
            None if self.ty == ValueType::F32 => {
                let f = scaled as f32;
                if !f.is_finite() {
                    return Err(EncodeError::OutOfRange {
                        value: v,
                        raw: scaled,
                        ty: self.ty,
                        min: f64::from(f32::MIN),
                        max: f64::from(f32::MAX),
                    });
                }
                u64::from(f.to_bits())
            }
            None if !scaled.is_finite() => {
                // (value − offset) / scale overflowed: refused, never written as ±∞.
                return Err(EncodeError::OutOfRange {
                    value: v,
                    raw: scaled,
                    ty: self.ty,
                    min: f64::MIN,
                    max: f64::MAX,
                });
            }
            None => scaled.to_bits(),
        };
        let n = usize::from(self.ty.words());
        let mut regs: Vec<u16> = (0..n).rev().map(|i| (bits >> (16 * i)) as u16).collect();
        if self.word_order == WordOrder::Little {
            regs.reverse();
        }
        Ok(regs.into_iter().map(|r| self.swap(r)).collect())
    }

    fn swap(&self, w: u16) -> u16 {
        if self.byte_swap { w.swap_bytes() } else { w }
    }
}

/// What a `bool` register is written with: a bool, or a number that is exactly 0 or 1, as a coil
/// and an OPC UA Boolean take them. Any other number (2, 0.3, NaN) is refused: writing it as 1
/// would clamp it to the nearest value the register holds.
fn bool_value(value: Value) -> Result<bool, EncodeError> {
    match value {
        Value::Bool(b) => Ok(b),
        Value::Number(n) if n == 0.0 || n == 1.0 => Ok(n == 1.0),
        Value::Number(n) if !n.is_finite() => Err(EncodeError::NotFinite(n)),
        Value::Number(n) => Err(EncodeError::OutOfRange {
            value: n,
            raw: n,
            ty: ValueType::Bool,
            min: 0.0,
            max: 1.0,
        }),
    }
}

/// How many decimals `x` needs: 0.1 → 1, 0.25 → 2, 100 → 0, 1e-10 → 10, 1000000000.125 → 3;
/// `None` beyond 12 (1e-13, a subnormal). The tolerance, relative to `x` scaled, is a few times
/// the rounding of a double: an offset of 156842196990.24268 keeps its five decimals.
fn decimals(x: f64) -> Option<i32> {
    (0..=12).find(|d| {
        let m = x * 10f64.powi(*d);
        (m - m.round()).abs() <= 1e-15 * m.abs()
    })
}

#[cfg(test)]
mod tests;
