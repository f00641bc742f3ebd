//! Response PDUs: what a server encodes and a client decodes.

use closedloop_contract::{Data, Exception};

use super::{
    EXCEPTION_BIT, READ_COILS, READ_DISCRETE_INPUTS, READ_HOLDING_REGISTERS, READ_INPUT_REGISTERS,
    Request, WRITE_MULTIPLE_COILS, WRITE_MULTIPLE_REGISTERS, WRITE_SINGLE_COIL,
    WRITE_SINGLE_REGISTER, pack_bits, put, unpack_bits, word,
};

/// One response PDU: the function it answers, and either its payload or the device's exception.
///
/// Two layers, as the `Driver` trait has them: an exception is a well-formed answer ("the
/// device said no"); a PDU that cannot be decoded at all is a [`Malformed`] error instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The request's function code, without [`EXCEPTION_BIT`].
    pub function: u8,
    /// The payload, or the exception that replaced it.
    pub outcome: Result<Payload, Exception>,
}

/// The data of a successful response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// FC01/02: the bits as carried, padded to whole bytes (the request says how many count).
    Bits(Vec<bool>),
    /// FC03/04: the registers.
    Words(Vec<u16>),
    /// FC05/06/15/16: the two words a write echoes ([`Request::echo`]).
    Echo {
        /// The address written (FC05/06) or the block's start (FC15/16).
        addr: u16,
        /// The value written (FC05/06) or the block's quantity (FC15/16).
        value: u16,
    },
}

/// A response PDU that is not one of the function codes' layouts. Nothing in it can be trusted,
/// not even that it belongs to the request it arrived after.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// A function code this codec has no layout for (and no exception bit).
    #[error("an answer began with function code {0:#04x}")]
    Function(u8),
    /// The PDU's length does not match its function's layout or its own byte count.
    #[error("an answer to function {function:#04x} cannot be {len} bytes long")]
    Length {
        /// The function code, without [`EXCEPTION_BIT`].
        function: u8,
        /// The PDU's length in bytes.
        len: usize,
    },
    /// FC03/04 carried a byte count that is not a whole number of registers.
    #[error("an odd byte count for registers")]
    OddRegisters,
}

impl Payload {
    /// The payload a server answers `request` with, after the device read `data` (ignored for
    /// a write, which echoes the request). `None` when the data does not fit the request — bits
    /// for registers, or the wrong count — which a server must not send as if it did.
    pub fn answering(request: &Request, data: Option<Data>) -> Option<Payload> {
        if let Some((addr, value)) = request.echo() {
            return Some(Payload::Echo { addr, value });
        }
        let Request::Read { area, count, .. } = request else {
            return None;
        };
        match (area.is_bit(), data?) {
            (true, Data::Bits(bits)) if bits.len() == usize::from(*count) => {
                Some(Payload::Bits(bits))
            }
            (false, Data::Words(words)) if words.len() == usize::from(*count) => {
                Some(Payload::Words(words))
            }
            _ => None,
        }
    }
}

impl Response {
    /// The response PDU, function code first (with [`EXCEPTION_BIT`] for an exception).
    pub fn encode(&self) -> Vec<u8> {
        let payload = match &self.outcome {
            Err(e) => return vec![self.function | EXCEPTION_BIT, e.0],
            Ok(p) => p,
        };
        let mut pdu = vec![self.function];
        match payload {
            Payload::Bits(bits) => {
                let bytes = pack_bits(bits);
                pdu.push(bytes.len() as u8);
                pdu.extend_from_slice(&bytes);
            }
            Payload::Words(words) => {
                pdu.push((words.len() * 2) as u8);
                words.iter().for_each(|w| put(&mut pdu, *w));
            }
            Payload::Echo { addr, value } => {
                put(&mut pdu, *addr);
                put(&mut pdu, *value);
            }
        }
        pdu
    }

    /// Decodes a response PDU as a client receives it. Whether it answers the request that was
    /// sent (function, count, echo) is the client's to check.
    pub fn decode(pdu: &[u8]) -> Result<Response, Malformed> {
        let first = pdu.first().copied().unwrap_or(0);
        let function = first & !EXCEPTION_BIT;
        if Response::len_from_prefix(pdu)? != Some(pdu.len()) {
            return Err(Malformed::Length {
                function,
                len: pdu.len(),
            });
        }
        let outcome = match first {
            f if f & EXCEPTION_BIT != 0 => Err(Exception(pdu[1])),
            READ_COILS | READ_DISCRETE_INPUTS => {
                let bytes = &pdu[2..];
                Ok(Payload::Bits(unpack_bits(bytes, bytes.len() * 8)))
            }
            READ_HOLDING_REGISTERS | READ_INPUT_REGISTERS => {
                // The length is 2 + the byte count, so an odd length is an odd byte count.
                if !pdu.len().is_multiple_of(2) {
                    return Err(Malformed::OddRegisters);
                }
                let words = pdu[2..]
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .collect();
                Ok(Payload::Words(words))
            }
            _ => Ok(Payload::Echo {
                addr: word(pdu, 1).unwrap_or_default(),
                value: word(pdu, 3).unwrap_or_default(),
            }),
        };
        Ok(Response { function, outcome })
    }

    /// How long the response PDU starting with `prefix` is, once enough of it has arrived to
    /// tell (`None`: read more). For framings without a length field, such as RTU.
    pub fn len_from_prefix(prefix: &[u8]) -> Result<Option<usize>, Malformed> {
        let Some(&function) = prefix.first() else {
            return Ok(None);
        };
        Ok(Some(match function {
            f if f & EXCEPTION_BIT != 0 => 2,
            READ_COILS..=READ_INPUT_REGISTERS => match prefix.get(1) {
                Some(&n) => 2 + usize::from(n),
                None => return Ok(None),
            },
            WRITE_SINGLE_COIL
            | WRITE_SINGLE_REGISTER
            | WRITE_MULTIPLE_COILS
            | WRITE_MULTIPLE_REGISTERS => 5,
            other => return Err(Malformed::Function(other)),
        }))
    }
}
