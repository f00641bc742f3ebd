//! The Modbus PDU (function code and data) of function codes 1–6, 15 and 16, in both directions:
//! pure encode and decode, no I/O, no framing.
//!
//! One codec for both ends of closedloop's Modbus connections: the driver encodes a [`Request`] and
//! decodes the [`Response`] (over RTU here, in [`crate::rtu::frame`]), and `closedloop sim`
//! (closedloop-sim-server, behind its MBAP framing) decodes the request and encodes the answer.
//! Keeping both directions in one place means the two ends cannot disagree on a byte order, a
//! bit packing or a limit, and a round trip through both is a unit test.
//!
//! The limits are those of the Modbus application protocol specification (V1.1b3 §6):
//! [`MAX_READ_BITS`], [`MAX_READ_WORDS`], [`MAX_WRITE_BITS`], [`MAX_WRITE_WORDS`], byte counts
//! that match the quantity, and no block that runs past address 65535. A decoded request has
//! passed all of them, in the specification's order ([`Request::check`]).

mod request;
mod response;
#[cfg(test)]
mod tests;

use closedloop_contract::Exception;

pub use request::{Operation, Request};
pub use response::{Malformed, Payload, Response};

/// FC01: read coils.
pub const READ_COILS: u8 = 0x01;
/// FC02: read discrete inputs.
pub const READ_DISCRETE_INPUTS: u8 = 0x02;
/// FC03: read holding registers.
pub const READ_HOLDING_REGISTERS: u8 = 0x03;
/// FC04: read input registers.
pub const READ_INPUT_REGISTERS: u8 = 0x04;
/// FC05: write one coil.
pub const WRITE_SINGLE_COIL: u8 = 0x05;
/// FC06: write one holding register.
pub const WRITE_SINGLE_REGISTER: u8 = 0x06;
/// FC15: write a block of coils.
pub const WRITE_MULTIPLE_COILS: u8 = 0x0F;
/// FC16: write a block of holding registers.
pub const WRITE_MULTIPLE_REGISTERS: u8 = 0x10;
/// The bit a response's function code carries when it is an exception (§7).
pub const EXCEPTION_BIT: u8 = 0x80;

/// Most coils or discrete inputs one read may ask for (§6.1/6.2).
pub const MAX_READ_BITS: u16 = 2000;
/// Most registers one read may ask for (§6.3/6.4).
pub const MAX_READ_WORDS: u16 = 125;
/// Most coils one FC15 request may carry (§6.11).
pub const MAX_WRITE_BITS: u16 = 1968;
/// Most registers one FC16 request may carry (§6.12).
pub const MAX_WRITE_WORDS: u16 = 123;
/// Largest PDU the specification allows: a 256-byte RTU frame less unit and CRC, or a 260-byte
/// TCP ADU less the MBAP header (§4.1).
pub const MAX_PDU_LEN: usize = 253;

/// FC05's value for a coil switched on; `0x0000` is off and anything else is refused (§6.5).
pub const COIL_ON: u16 = 0xFF00;

/// A request PDU a server cannot carry out, with the exception the specification prescribes:
/// 1 for a function it does not know, 3 for a malformed request or a quantity out of range,
/// 2 for a block that runs past address 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The function code as received (0 for an empty PDU), so the exception answers it.
    pub function: u8,
    /// What to answer.
    pub exception: Exception,
}

impl Refused {
    /// The exception response that answers this refusal.
    pub fn response(self) -> Response {
        Response {
            function: self.function,
            outcome: Err(self.exception),
        }
    }
}

/// Bits packed LSB first, padded with zeros to whole bytes, as FC01/02/15 carry them.
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// The first `count` bits of `bytes`, LSB first (the inverse of [`pack_bits`]); `count` must not
/// exceed `bytes.len() * 8`.
pub fn unpack_bits(bytes: &[u8], count: usize) -> Vec<bool> {
    (0..count)
        .map(|i| bytes[i / 8] & (1 << (i % 8)) != 0)
        .collect()
}

/// The big-endian word at `i`, if the PDU is long enough to hold it.
fn word(pdu: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*pdu.get(i)?, *pdu.get(i + 1)?]))
}

/// Appends `v` big-endian, as every Modbus field is sent.
fn put(pdu: &mut Vec<u8>, v: u16) {
    pdu.extend_from_slice(&v.to_be_bytes());
}
