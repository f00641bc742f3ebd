//! Request PDUs: what a client sends and a server decodes.

use closedloop_contract::{Area, Exception, Write};

use super::{
    COIL_ON, MAX_READ_BITS, MAX_READ_WORDS, MAX_WRITE_BITS, MAX_WRITE_WORDS, READ_COILS,
    READ_DISCRETE_INPUTS, READ_HOLDING_REGISTERS, READ_INPUT_REGISTERS, Refused,
    WRITE_MULTIPLE_COILS, WRITE_MULTIPLE_REGISTERS, WRITE_SINGLE_COIL, WRITE_SINGLE_REGISTER,
    pack_bits, put, unpack_bits, word,
};

/// One request, one function code: each variant is exactly one PDU layout, so FC05 vs FC15 and
/// FC06 vs FC16 is decided when the value is built and a decoded request echoes in the shape it
/// came in.
///
/// # Invariants
/// A request returned by [`Request::decode`] has passed [`Request::check`]. One built directly
/// should be checked before it is encoded: [`Request::encode`] of a request that fails the check
/// writes quantities and byte counts that do not fit their fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// FC01 / FC02 / FC03 / FC04, by area.
    Read {
        /// Which area, and so which of the four function codes.
        area: Area,
        /// First address.
        start: u16,
        /// How many items.
        count: u16,
    },
    /// FC05: one coil.
    WriteCoil {
        /// The coil's address.
        addr: u16,
        /// On ([`COIL_ON`] on the wire) or off.
        value: bool,
    },
    /// FC15: a block of coils.
    WriteCoils {
        /// First address.
        start: u16,
        /// One value per coil, in address order.
        values: Vec<bool>,
    },
    /// FC06: one holding register.
    WriteRegister {
        /// The register's address.
        addr: u16,
        /// Its new value.
        value: u16,
    },
    /// FC16: a block of holding registers (a 32-bit or wider value is always one such block).
    WriteRegisters {
        /// First address.
        start: u16,
        /// One value per register, in address order.
        values: Vec<u16>,
    },
}

/// What a [`Request`] asks of a device, in the `Driver` trait's terms ([`Request::operation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `Driver::read`.
    Read {
        /// Which area.
        area: Area,
        /// First address.
        start: u16,
        /// How many items.
        count: u16,
    },
    /// `Driver::write`.
    Write(Write),
}

impl Request {
    /// The function code this request is sent with.
    pub fn function(&self) -> u8 {
        match self {
            Request::Read { area, .. } => match area {
                Area::Coil => READ_COILS,
                Area::DiscreteInput => READ_DISCRETE_INPUTS,
                Area::Holding => READ_HOLDING_REGISTERS,
                Area::Input => READ_INPUT_REGISTERS,
            },
            Request::WriteCoil { .. } => WRITE_SINGLE_COIL,
            Request::WriteRegister { .. } => WRITE_SINGLE_REGISTER,
            Request::WriteCoils { .. } => WRITE_MULTIPLE_COILS,
            Request::WriteRegisters { .. } => WRITE_MULTIPLE_REGISTERS,
        }
    }

    /// Whether this request may change the device (decides nothing here; kept for logs).
    pub fn is_write(&self) -> bool {
        !matches!(self, Request::Read { .. })
    }

    /// The first address the request touches.
    pub fn start(&self) -> u16 {
        match self {
            Request::Read { start, .. }
            | Request::WriteCoils { start, .. }
            | Request::WriteRegisters { start, .. } => *start,
            Request::WriteCoil { addr, .. } | Request::WriteRegister { addr, .. } => *addr,
        }
    }

    /// How many items the request reads or writes.
    pub fn quantity(&self) -> usize {
        match self {
            Request::Read { count, .. } => usize::from(*count),
            Request::WriteCoil { .. } | Request::WriteRegister { .. } => 1,
            Request::WriteCoils { values, .. } => values.len(),
            Request::WriteRegisters { values, .. } => values.len(),
        }
    }

    /// The most items this request's function code may carry.
    pub fn max_quantity(&self) -> u16 {
        match self {
            Request::Read { area, .. } if area.is_bit() => MAX_READ_BITS,
            Request::Read { .. } => MAX_READ_WORDS,
            Request::WriteCoil { .. } | Request::WriteRegister { .. } => 1,
            Request::WriteCoils { .. } => MAX_WRITE_BITS,
            Request::WriteRegisters { .. } => MAX_WRITE_WORDS,
        }
    }

    /// The specification's limits, in its order: a quantity outside `1..=max_quantity` is
    /// exception 3 (illegal data value), a block that runs past address 65535 is exception 2
    /// (illegal data address).
    pub fn check(&self) -> Result<(), Exception> {
        let quantity = self.quantity();
        if quantity == 0 || quantity > usize::from(self.max_quantity()) {
            return Err(Exception::ILLEGAL_DATA_VALUE);
        }
        if usize::from(self.start()) + quantity > 0x1_0000 {
            return Err(Exception::ILLEGAL_DATA_ADDRESS);
        }
        Ok(())
    }

    /// What a write's response echoes: FC05/06 the address and the value as sent, FC15/16 the
    /// start and the quantity. `None` for a read, whose response carries data instead.
    pub fn echo(&self) -> Option<(u16, u16)> {
        match self {
            Request::Read { .. } => None,
            Request::WriteCoil { addr, value } => Some((*addr, if *value { COIL_ON } else { 0 })),
            Request::WriteRegister { addr, value } => Some((*addr, *value)),
            Request::WriteCoils { start, values } => Some((*start, values.len() as u16)),
            Request::WriteRegisters { start, values } => Some((*start, values.len() as u16)),
        }
    }

    /// The request in the `Driver` trait's terms, as a server hands it to its device: one item
    /// and a block alike become a [`Write`].
    pub fn operation(&self) -> Operation {
        match self {
            Request::Read { area, start, count } => Operation::Read {
                area: *area,
                start: *start,
                count: *count,
            },
            Request::WriteCoil { addr, value } => Operation::Write(Write::Coils {
                start: *addr,
                values: vec![*value],
            }),
            Request::WriteCoils { start, values } => Operation::Write(Write::Coils {
                start: *start,
                values: values.clone(),
            }),
            Request::WriteRegister { addr, value } => Operation::Write(Write::Registers {
                start: *addr,
                values: vec![*value],
            }),
            Request::WriteRegisters { start, values } => Operation::Write(Write::Registers {
                start: *start,
                values: values.clone(),
            }),
        }
    }

    /// The request PDU, function code first (see the type's invariants).
    pub fn encode(&self) -> Vec<u8> {
        let mut pdu = vec![self.function()];
        match self {
            Request::Read { start, count, .. } => {
                put(&mut pdu, *start);
                put(&mut pdu, *count);
            }
            Request::WriteCoil { .. } | Request::WriteRegister { .. } => {
                let (addr, value) = self.echo().unwrap_or_default();
                put(&mut pdu, addr);
                put(&mut pdu, value);
            }
            Request::WriteCoils { start, values } => {
                put(&mut pdu, *start);
                put(&mut pdu, values.len() as u16);
                let bytes = pack_bits(values);
                pdu.push(bytes.len() as u8);
                pdu.extend_from_slice(&bytes);
            }
            Request::WriteRegisters { start, values } => {
                put(&mut pdu, *start);
                put(&mut pdu, values.len() as u16);
                pdu.push((values.len() * 2) as u8);
                values.iter().for_each(|v| put(&mut pdu, *v));
            }
        }
        pdu
    }

    /// Decodes a request PDU as a server receives it, refusing what the specification makes
    /// an exception: an unknown function (1), a malformed PDU, a quantity out of range or a
    /// byte count that does not match it (3), a block past address 65535 (2).
    pub fn decode(pdu: &[u8]) -> Result<Request, Refused> {
        let function = pdu.first().copied().unwrap_or(0);
        let refuse = |exception| Refused {
            function,
            exception,
        };
        let request = match function {
            READ_COILS..=READ_INPUT_REGISTERS => decode_read(function, pdu),
            WRITE_SINGLE_COIL | WRITE_SINGLE_REGISTER => decode_single(function, pdu),
            WRITE_MULTIPLE_COILS | WRITE_MULTIPLE_REGISTERS => decode_block(function, pdu),
            _ => return Err(refuse(Exception::ILLEGAL_FUNCTION)),
        }
        .ok_or(refuse(Exception::ILLEGAL_DATA_VALUE))?;
        request.check().map_err(refuse)?;
        Ok(request)
    }
}

/// FC01–04: start and count, nothing more.
fn decode_read(function: u8, pdu: &[u8]) -> Option<Request> {
    let (Some(start), Some(count), 5) = (word(pdu, 1), word(pdu, 3), pdu.len()) else {
        return None;
    };
    let area = match function {
        READ_COILS => Area::Coil,
        READ_DISCRETE_INPUTS => Area::DiscreteInput,
        READ_HOLDING_REGISTERS => Area::Holding,
        _ => Area::Input,
    };
    Some(Request::Read { area, start, count })
}

/// FC05/06: address and value; a coil's value is [`COIL_ON`] or 0, nothing else.
fn decode_single(function: u8, pdu: &[u8]) -> Option<Request> {
    let (Some(addr), Some(value), 5) = (word(pdu, 1), word(pdu, 3), pdu.len()) else {
        return None;
    };
    if function == WRITE_SINGLE_REGISTER {
        return Some(Request::WriteRegister { addr, value });
    }
    let value = match value {
        COIL_ON => true,
        0 => false,
        _ => return None,
    };
    Some(Request::WriteCoil { addr, value })
}

/// FC15/16: start, quantity, a byte count that matches the quantity, and exactly that many
/// bytes. The quantity's range is left to [`Request::check`].
fn decode_block(function: u8, pdu: &[u8]) -> Option<Request> {
    let (Some(start), Some(count), Some(&bytes)) = (word(pdu, 1), word(pdu, 3), pdu.get(5)) else {
        return None;
    };
    let count = usize::from(count);
    let want = if function == WRITE_MULTIPLE_COILS {
        count.div_ceil(8)
    } else {
        count * 2
    };
    if usize::from(bytes) != want || pdu.len() != 6 + want {
        return None;
    }
    let data = &pdu[6..];
    Some(if function == WRITE_MULTIPLE_COILS {
        Request::WriteCoils {
            start,
            values: unpack_bits(data, count),
        }
    } else {
        let values = data
            .chunks_exact(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .collect();
        Request::WriteRegisters { start, values }
    })
}
