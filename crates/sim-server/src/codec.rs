//! Modbus TCP framing and the PDUs of function codes 1–6, 15 and 16: pure encode and decode, no
//! I/O, so every byte is checked by a unit test.
//!
//! The simulator frames Modbus itself instead of using tokio-modbus's server: that server awaits
//! each request's answer before it reads the next frame, so a request the device never answers
//! (power off, zombie, a lost request) would wedge its connection for good and keep the socket
//! open after the client left. The connection loop in [`crate::modbus`] needs to go on reading
//! while answers are outstanding, which needs framing it controls.

use closedloop_driver::{Area, Data, Exception, Write};

/// MBAP header length: transaction id, protocol id, length, unit id.
pub const HEADER_LEN: usize = 7;
/// Largest PDU the specification allows (a 260-byte ADU).
pub const MAX_PDU_LEN: usize = 253;

/// Most coils or discrete inputs one read may ask for (FC01/02).
const MAX_READ_BITS: u16 = 2000;
/// Most registers one read may ask for (FC03/04).
const MAX_READ_WORDS: u16 = 125;
/// Most coils one FC15 may write.
const MAX_WRITE_BITS: u16 = 1968;
/// Most registers one FC16 may write.
const MAX_WRITE_WORDS: u16 = 123;

/// What identifies a request's answer: echoed unchanged in the response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Chosen by the client; matches answers to requests.
    pub transaction: u16,
    /// The unit addressed behind this listener.
    pub unit: u8,
}

/// One framed request: its header and its PDU (function code first), not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adu {
    /// The MBAP header's fields that matter.
    pub header: Header,
    /// Function code and data.
    pub pdu: Vec<u8>,
}

/// A byte stream that is not Modbus TCP; the connection is closed, as real servers do, because
/// nothing after it can be framed reliably.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The protocol id must be 0 (Modbus).
    #[error("protocol id {0} is not Modbus (0)")]
    Protocol(u16),
    /// The length field must cover the unit id and a PDU of 1 to 253 bytes.
    #[error("length field {0} is outside 2..=254")]
    Length(u16),
}

/// Takes one complete ADU off the front of `buf`, if one has fully arrived.
pub fn take_adu(buf: &mut Vec<u8>) -> Result<Option<Adu>, FrameError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let transaction = u16::from_be_bytes([buf[0], buf[1]]);
    let protocol = u16::from_be_bytes([buf[2], buf[3]]);
    let length = u16::from_be_bytes([buf[4], buf[5]]);
    if protocol != 0 {
        return Err(FrameError::Protocol(protocol));
    }
    if !(2..=(MAX_PDU_LEN as u16 + 1)).contains(&length) {
        return Err(FrameError::Length(length));
    }
    let total = HEADER_LEN - 1 + usize::from(length);
    if buf.len() < total {
        return Ok(None);
    }
    let unit = buf[6];
    let pdu = buf[HEADER_LEN..total].to_vec();
    buf.drain(..total);
    Ok(Some(Adu {
        header: Header { transaction, unit },
        pdu,
    }))
}

/// A decoded request, in the driver's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// FC01–04.
    Read {
        /// Which area the function code reads.
        area: Area,
        /// First address.
        start: u16,
        /// How many items.
        count: u16,
    },
    /// FC05/06 (one item) and FC15/16 (a block).
    Write {
        /// The function code, so the answer echoes the right shape.
        function: u8,
        /// What to write.
        write: Write,
    },
}

impl Request {
    /// The function code this request came with.
    pub fn function(&self) -> u8 {
        match self {
            Request::Read { area, .. } => match area {
                Area::Coil => 1,
                Area::DiscreteInput => 2,
                Area::Holding => 3,
                Area::Input => 4,
            },
            Request::Write { function, .. } => *function,
        }
    }
}

/// A PDU that cannot be carried out, with the exception the specification prescribes:
/// 1 for a function this server does not know, 3 for a malformed or out-of-range request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The function code as received (0 for an empty PDU).
    pub function: u8,
    /// What to answer.
    pub exception: Exception,
}

/// Decodes a request PDU.
pub fn decode_request(pdu: &[u8]) -> Result<Request, Refused> {
    let function = pdu.first().copied().unwrap_or(0);
    let refuse = |exception| Refused {
        function,
        exception,
    };
    let word =
        |i: usize| -> Option<u16> { Some(u16::from_be_bytes([*pdu.get(i)?, *pdu.get(i + 1)?])) };
    let bad = refuse(Exception::ILLEGAL_DATA_VALUE);
    match function {
        1..=4 => {
            let (Some(start), Some(count), 5) = (word(1), word(3), pdu.len()) else {
                return Err(bad);
            };
            let (area, max) = match function {
                1 => (Area::Coil, MAX_READ_BITS),
                2 => (Area::DiscreteInput, MAX_READ_BITS),
                3 => (Area::Holding, MAX_READ_WORDS),
                _ => (Area::Input, MAX_READ_WORDS),
            };
            if !(1..=max).contains(&count) {
                return Err(bad);
            }
            fits(start, count).map_err(refuse)?;
            Ok(Request::Read { area, start, count })
        }
        5 | 6 => {
            let (Some(start), Some(value), 5) = (word(1), word(3), pdu.len()) else {
                return Err(bad);
            };
            let write = if function == 5 {
                let on = match value {
                    0xFF00 => true,
                    0x0000 => false,
                    _ => return Err(bad),
                };
                Write::Coils {
                    start,
                    values: vec![on],
                }
            } else {
                Write::Registers {
                    start,
                    values: vec![value],
                }
            };
            Ok(Request::Write { function, write })
        }
        15 | 16 => {
            let (Some(start), Some(count), Some(&bytes)) = (word(1), word(3), pdu.get(5)) else {
                return Err(bad);
            };
            let (max, want) = if function == 15 {
                (MAX_WRITE_BITS, u32::from(count).div_ceil(8))
            } else {
                (MAX_WRITE_WORDS, u32::from(count) * 2)
            };
            if !(1..=max).contains(&count)
                || u32::from(bytes) != want
                || pdu.len() != 6 + usize::from(bytes)
            {
                return Err(bad);
            }
            fits(start, count).map_err(refuse)?;
            let data = &pdu[6..];
            let write = if function == 15 {
                let values = (0..usize::from(count))
                    .map(|i| data[i / 8] & (1 << (i % 8)) != 0)
                    .collect();
                Write::Coils { start, values }
            } else {
                let values = data
                    .chunks_exact(2)
                    .map(|w| u16::from_be_bytes([w[0], w[1]]))
                    .collect();
                Write::Registers { start, values }
            };
            Ok(Request::Write { function, write })
        }
        _ => Err(refuse(Exception::ILLEGAL_FUNCTION)),
    }
}

/// A block that runs past address 65535 does not exist: exception 2.
fn fits(start: u16, count: u16) -> Result<(), Exception> {
    if u32::from(start) + u32::from(count) > 0x1_0000 {
        Err(Exception::ILLEGAL_DATA_ADDRESS)
    } else {
        Ok(())
    }
}

/// The complete response ADU to `request`: its data, its write echo, or the device's exception.
///
/// A read answer whose shape does not match the request (bits for registers, or the wrong
/// count) would be a simulator bug; it is answered with exception 4 rather than a lying frame.
pub fn encode_answer(
    header: Header,
    request: &Request,
    answer: Result<Option<Data>, Exception>,
) -> Vec<u8> {
    let function = request.function();
    let pdu = match (request, answer) {
        (_, Err(e)) => return encode_exception(header, function, e),
        (Request::Read { area, count, .. }, Ok(Some(data))) => {
            match read_body(*area, *count, data) {
                Some(body) => [&[function][..], &body].concat(),
                None => {
                    return encode_exception(header, function, Exception::SERVER_DEVICE_FAILURE);
                }
            }
        }
        (Request::Read { .. }, Ok(None)) => {
            return encode_exception(header, function, Exception::SERVER_DEVICE_FAILURE);
        }
        (Request::Write { write, .. }, Ok(_)) => {
            let mut pdu = vec![function];
            pdu.extend_from_slice(&write.start().to_be_bytes());
            let second = match (function, write) {
                (5, Write::Coils { values, .. }) => {
                    if values.first() == Some(&true) {
                        0xFF00
                    } else {
                        0
                    }
                }
                (6, Write::Registers { values, .. }) => values.first().copied().unwrap_or(0),
                (_, Write::Coils { values, .. }) => values.len() as u16,
                (_, Write::Registers { values, .. }) => values.len() as u16,
            };
            pdu.extend_from_slice(&second.to_be_bytes());
            pdu
        }
    };
    frame(header, &pdu)
}

/// The byte count and payload of a read answer, or `None` when it does not fit the request.
fn read_body(area: Area, count: u16, data: Data) -> Option<Vec<u8>> {
    if data.len() != usize::from(count) {
        return None;
    }
    match (area.is_bit(), data) {
        (true, Data::Bits(bits)) => {
            let mut bytes = vec![0u8; bits.len().div_ceil(8)];
            for (i, _) in bits.iter().enumerate().filter(|(_, b)| **b) {
                bytes[i / 8] |= 1 << (i % 8);
            }
            Some([&[bytes.len() as u8][..], &bytes].concat())
        }
        (false, Data::Words(words)) => {
            let mut body = vec![(words.len() * 2) as u8];
            for w in words {
                body.extend_from_slice(&w.to_be_bytes());
            }
            Some(body)
        }
        _ => None,
    }
}

/// An exception response ADU: the function code with its high bit set, then the code.
pub fn encode_exception(header: Header, function: u8, exception: Exception) -> Vec<u8> {
    frame(header, &[function | 0x80, exception.0])
}

/// Wraps a PDU in its MBAP header.
fn frame(header: Header, pdu: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + pdu.len());
    out.extend_from_slice(&header.transaction.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(pdu.len() as u16 + 1).to_be_bytes());
    out.push(header.unit);
    out.extend_from_slice(pdu);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Header = Header {
        transaction: 0x1234,
        unit: 7,
    };

    #[test]
    fn frames_are_taken_whole_and_only_whole() {
        let mut buf = vec![0x12, 0x34, 0, 0, 0, 6, 7, 3, 0, 2, 0];
        assert_eq!(take_adu(&mut buf), Ok(None));
        buf.extend_from_slice(&[2, 0xAA]); // the rest, then the next frame's first byte
        let adu = take_adu(&mut buf).unwrap().unwrap();
        assert_eq!(adu.header, H);
        assert_eq!(adu.pdu, vec![3, 0, 2, 0, 2]);
        assert_eq!(buf, vec![0xAA]);
    }

    #[test]
    fn non_modbus_streams_are_refused() {
        let mut buf = vec![0, 1, 0, 9, 0, 6, 1, 3, 0, 0, 0, 1];
        assert_eq!(take_adu(&mut buf), Err(FrameError::Protocol(9)));
        let mut buf = vec![0, 1, 0, 0, 1, 0, 1];
        assert_eq!(take_adu(&mut buf), Err(FrameError::Length(256)));
    }

    #[test]
    fn reads_decode_with_their_area_and_limits() {
        assert_eq!(
            decode_request(&[4, 0, 1, 0, 2]),
            Ok(Request::Read {
                area: Area::Input,
                start: 1,
                count: 2
            })
        );
        let too_many = decode_request(&[3, 0, 0, 0, 126]).unwrap_err();
        assert_eq!(too_many.exception, Exception::ILLEGAL_DATA_VALUE);
        let past_end = decode_request(&[1, 0xFF, 0xFF, 0, 2]).unwrap_err();
        assert_eq!(past_end.exception, Exception::ILLEGAL_DATA_ADDRESS);
        let unknown = decode_request(&[0x2B, 0x0E, 1, 0]).unwrap_err();
        assert_eq!(
            (unknown.function, unknown.exception),
            (0x2B, Exception::ILLEGAL_FUNCTION)
        );
    }

    #[test]
    fn writes_decode_to_driver_blocks() {
        let coil = decode_request(&[5, 0, 1, 0xFF, 0]).unwrap();
        assert_eq!(
            coil,
            Request::Write {
                function: 5,
                write: Write::Coils {
                    start: 1,
                    values: vec![true]
                }
            }
        );
        assert!(decode_request(&[5, 0, 1, 0x12, 0]).is_err());
        let coils = decode_request(&[15, 0, 0, 0, 10, 2, 0b0000_0101, 0b10]).unwrap();
        let expected: Vec<bool> = [1, 0, 1, 0, 0, 0, 0, 0, 0, 1]
            .iter()
            .map(|b| *b == 1)
            .collect();
        assert_eq!(
            coils,
            Request::Write {
                function: 15,
                write: Write::Coils {
                    start: 0,
                    values: expected
                }
            }
        );
        let regs = decode_request(&[16, 0, 0, 0, 2, 4, 0, 0, 0x75, 0x30]).unwrap();
        assert_eq!(
            regs,
            Request::Write {
                function: 16,
                write: Write::Registers {
                    start: 0,
                    values: vec![0, 30000]
                }
            }
        );
        // The byte count must agree with the quantity.
        assert!(decode_request(&[16, 0, 0, 0, 2, 2, 0, 0]).is_err());
    }

    #[test]
    fn answers_encode_byte_by_byte() {
        let read_bits = Request::Read {
            area: Area::DiscreteInput,
            start: 0,
            count: 9,
        };
        let mut bits = vec![false; 9];
        bits[0] = true;
        bits[8] = true;
        assert_eq!(
            encode_answer(H, &read_bits, Ok(Some(Data::Bits(bits)))),
            vec![0x12, 0x34, 0, 0, 0, 5, 7, 2, 2, 0b1, 0b1]
        );
        let read_words = Request::Read {
            area: Area::Holding,
            start: 2,
            count: 2,
        };
        assert_eq!(
            encode_answer(H, &read_words, Ok(Some(Data::Words(vec![0, 0x1B58])))),
            vec![0x12, 0x34, 0, 0, 0, 7, 7, 3, 4, 0, 0, 0x1B, 0x58]
        );
        let coil = decode_request(&[5, 0, 1, 0xFF, 0]).unwrap();
        assert_eq!(
            encode_answer(H, &coil, Ok(None)),
            vec![0x12, 0x34, 0, 0, 0, 6, 7, 5, 0, 1, 0xFF, 0]
        );
        let regs = decode_request(&[16, 0, 0, 0, 2, 4, 0, 0, 0x75, 0x30]).unwrap();
        assert_eq!(
            encode_answer(H, &regs, Ok(None)),
            vec![0x12, 0x34, 0, 0, 0, 6, 7, 16, 0, 0, 0, 2]
        );
        assert_eq!(
            encode_answer(H, &regs, Err(Exception::ILLEGAL_DATA_VALUE)),
            vec![0x12, 0x34, 0, 0, 0, 3, 7, 0x90, 3]
        );
    }

    #[test]
    fn a_misshapen_read_answer_becomes_exception_4_not_a_lie() {
        let req = Request::Read {
            area: Area::Holding,
            start: 0,
            count: 2,
        };
        assert_eq!(
            encode_answer(H, &req, Ok(Some(Data::Words(vec![1])))),
            encode_exception(H, 3, Exception::SERVER_DEVICE_FAILURE)
        );
    }
}
