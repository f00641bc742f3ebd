//! Register-level addresses and payloads, named after the Modbus data model because every
//! register-mapped device (and the simulator) speaks it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One of the four Modbus data areas. Addresses inside an area are 0-based PDU addresses
/// (`holding = 0` is the register people call 40001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    /// Read/write single bits.
    Coil,
    /// Read-only single bits.
    DiscreteInput,
    /// Read/write 16-bit registers.
    Holding,
    /// Read-only 16-bit registers.
    Input,
}

impl Area {
    /// Whether items of this area are single bits (as opposed to 16-bit registers).
    pub fn is_bit(self) -> bool {
        matches!(self, Area::Coil | Area::DiscreteInput)
    }

    /// Whether a client may write this area.
    pub fn is_writable(self) -> bool {
        matches!(self, Area::Coil | Area::Holding)
    }

    /// The plant-file key that names this area (`coil`, `discrete_input`, `holding`, `input`).
    pub fn key(self) -> &'static str {
        match self {
            Area::Coil => "coil",
            Area::DiscreteInput => "discrete_input",
            Area::Holding => "holding",
            Area::Input => "input",
        }
    }
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// The payload of a read answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// Coils or discrete inputs.
    Bits(Vec<bool>),
    /// Holding or input registers.
    Words(Vec<u16>),
}

impl Data {
    /// Number of items carried.
    pub fn len(&self) -> usize {
        match self {
            Data::Bits(b) => b.len(),
            Data::Words(w) => w.len(),
        }
    }

    /// Whether the answer carries nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One write request: a block of coils or a block of holding registers, sent as one request so
/// that a 32-bit value never lands half-written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Write coils starting at `start`.
    Coils { start: u16, values: Vec<bool> },
    /// Write holding registers starting at `start`.
    Registers { start: u16, values: Vec<u16> },
}

impl Write {
    /// The area this request writes.
    pub fn area(&self) -> Area {
        match self {
            Write::Coils { .. } => Area::Coil,
            Write::Registers { .. } => Area::Holding,
        }
    }

    /// The first address written.
    pub fn start(&self) -> u16 {
        match self {
            Write::Coils { start, .. } | Write::Registers { start, .. } => *start,
        }
    }
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Write::Coils { start, values } => write!(f, "coil:{start} <- {values:?}"),
            Write::Registers { start, values } => write!(f, "holding:{start} <- {values:?}"),
        }
    }
}
