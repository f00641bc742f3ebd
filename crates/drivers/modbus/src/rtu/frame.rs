//! Modbus RTU framing: `unit · PDU · CRC16 (little-endian)`, pure encode and decode, no I/O.
//!
//! closedloop frames RTU itself instead of using tokio-modbus's RTU codec because that codec
//! answers a bad CRC by dropping a byte and trying to resynchronise: the caller never learns
//! that a garbled answer arrived, and the contract must report it as `CRC_MISMATCH` (the request
//! may have taken effect), not as silence.

use closedloop_driver::{Data, Exception};

use crate::link::{LinkAnswer, LinkError, check_data, check_echo};
use crate::request::Request;

/// The longest RTU frame (Modbus over serial line, §2.5.1.1).
pub const MAX_FRAME: usize = 256;

/// CRC-16/MODBUS: reflected polynomial 0xA001, initial value 0xFFFF.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0xFFFF;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// Appends the CRC (low byte first, as RTU sends it).
pub fn seal(frame: &mut Vec<u8>) {
    let crc = crc16(frame);
    frame.extend_from_slice(&crc.to_le_bytes());
}

/// The bytes of `req` addressed to `unit`, CRC included.
pub fn encode_request(unit: u8, req: &Request) -> Vec<u8> {
    let mut f = vec![unit, req.function()];
    let put = |f: &mut Vec<u8>, v: u16| f.extend_from_slice(&v.to_be_bytes());
    match req {
        Request::Read { start, count, .. } => {
            put(&mut f, *start);
            put(&mut f, *count);
        }
        Request::WriteCoil { addr, value } => {
            put(&mut f, *addr);
            put(&mut f, if *value { 0xFF00 } else { 0x0000 });
        }
        Request::WriteRegister { addr, value } => {
            put(&mut f, *addr);
            put(&mut f, *value);
        }
        Request::WriteCoils { start, values } => {
            put(&mut f, *start);
            put(&mut f, values.len() as u16);
            let bytes = pack_bits(values);
            f.push(bytes.len() as u8);
            f.extend_from_slice(&bytes);
        }
        Request::WriteRegisters { start, values } => {
            put(&mut f, *start);
            put(&mut f, values.len() as u16);
            f.push((values.len() * 2) as u8);
            for v in values {
                put(&mut f, *v);
            }
        }
    }
    seal(&mut f);
    f
}

/// Bits packed LSB first, as FC01/02/15 carry them.
pub fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut out = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        if b {
            out[i / 8] |= 1 << (i % 8);
        }
    }
    out
}

/// How long the answer frame starting with `buf` is, once enough of it has arrived to tell
/// (`None`: read more). Errors when the header cannot start any answer to a request of ours.
pub(crate) fn answer_len(buf: &[u8]) -> Result<Option<usize>, LinkError> {
    let Some(&function) = buf.get(1) else {
        return Ok(None);
    };
    let len = match function {
        f if f & 0x80 != 0 => 5,
        0x01..=0x04 => match buf.get(2) {
            Some(&n) => 5 + usize::from(n),
            None => return Ok(None),
        },
        0x05 | 0x06 | 0x0F | 0x10 => 8,
        other => {
            return Err(LinkError::Io(format!(
                "an answer began with function code {other:#04x}"
            )));
        }
    };
    Ok(Some(len))
}

/// Decodes one complete answer frame to `req` sent to `unit`. The CRC is checked first: a
/// frame that fails it says nothing reliable, not even which unit sent it.
pub(crate) fn decode_answer(frame: &[u8], unit: u8, req: &Request) -> LinkAnswer {
    if frame.len() < 5 {
        return Err(LinkError::Io(format!(
            "an answer of {} bytes is too short",
            frame.len()
        )));
    }
    let (body, crc) = frame.split_at(frame.len() - 2);
    if crc16(body) != u16::from_le_bytes([crc[0], crc[1]]) {
        return Err(LinkError::Crc);
    }
    if body[0] != unit {
        return Err(LinkError::Io(format!(
            "asked unit {unit}, unit {} answered",
            body[0]
        )));
    }
    let function = body[1];
    if function & 0x7F != req.function() {
        return Err(LinkError::Io(format!(
            "sent function {:#04x}, the answer is for {:#04x}",
            req.function(),
            function & 0x7F
        )));
    }
    if function & 0x80 != 0 {
        return Ok(Err(Exception(body[2])));
    }
    let pdu = &body[2..];
    let word = |i: usize| u16::from_be_bytes([pdu[i], pdu[i + 1]]);
    match function {
        0x01 | 0x02 => {
            let bytes = &pdu[1..];
            let bits = (0..bytes.len() * 8)
                .map(|i| bytes[i / 8] & (1 << (i % 8)) != 0)
                .collect();
            check_data(req, Data::Bits(bits)).map(Ok)
        }
        0x03 | 0x04 => {
            let bytes = &pdu[1..];
            if bytes.len() % 2 != 0 {
                return Err(LinkError::Io("an odd byte count for registers".into()));
            }
            let words = bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            check_data(req, Data::Words(words)).map(Ok)
        }
        _ => check_echo(req, word(0), word(2)).map(Ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Reply;
    use closedloop_driver::Area;

    #[test]
    fn crc_matches_the_specification_example() {
        // Modbus over serial line, §6.2.2: 01 03 00 00 00 0A → CRC C5 CD.
        let f = encode_request(
            1,
            &Request::Read {
                area: Area::Holding,
                start: 0,
                count: 10,
            },
        );
        assert_eq!(f, [0x01, 0x03, 0x00, 0x00, 0x00, 0x0A, 0xC5, 0xCD]);
    }

    #[test]
    fn write_requests_encode_byte_by_byte() {
        let coils = encode_request(
            0x11,
            &Request::WriteCoils {
                start: 0x13,
                values: vec![
                    true, false, true, true, false, false, true, true, true, false,
                ],
            },
        );
        assert_eq!(
            &coils[..coils.len() - 2],
            [0x11, 0x0F, 0x00, 0x13, 0x00, 0x0A, 0x02, 0xCD, 0x01]
        );
        let regs = encode_request(
            1,
            &Request::WriteRegisters {
                start: 1,
                values: vec![0x000A, 0x0102],
            },
        );
        assert_eq!(
            &regs[..regs.len() - 2],
            [
                0x01, 0x10, 0x00, 0x01, 0x00, 0x02, 0x04, 0x00, 0x0A, 0x01, 0x02
            ]
        );
        let one = encode_request(
            1,
            &Request::WriteCoil {
                addr: 0xAC,
                value: true,
            },
        );
        assert_eq!(&one[..6], [0x01, 0x05, 0x00, 0xAC, 0xFF, 0x00]);
    }

    #[test]
    fn answers_decode_and_a_flipped_bit_is_a_crc_error() {
        let req = Request::Read {
            area: Area::Holding,
            start: 0,
            count: 2,
        };
        let mut f = vec![1, 0x03, 4, 0x12, 0x34, 0xAB, 0xCD];
        seal(&mut f);
        assert_eq!(answer_len(&f[..2]), Ok(None));
        assert_eq!(answer_len(&f[..3]), Ok(Some(f.len())));
        assert_eq!(
            decode_answer(&f, 1, &req),
            Ok(Ok(Reply::Data(Data::Words(vec![0x1234, 0xABCD]))))
        );
        f[3] ^= 0x01;
        assert_eq!(decode_answer(&f, 1, &req), Err(LinkError::Crc));
    }

    #[test]
    fn exceptions_and_mismatches() {
        let req = Request::Read {
            area: Area::Coil,
            start: 0,
            count: 3,
        };
        let mut ex = vec![1, 0x81, 0x02];
        seal(&mut ex);
        assert_eq!(answer_len(&ex), Ok(Some(5)));
        assert_eq!(decode_answer(&ex, 1, &req), Ok(Err(Exception(2))));
        assert!(matches!(decode_answer(&ex, 2, &req), Err(LinkError::Io(_))));
        let mut bits = vec![1, 0x01, 1, 0b101];
        seal(&mut bits);
        assert_eq!(
            decode_answer(&bits, 1, &req),
            Ok(Ok(Reply::Data(Data::Bits(vec![true, false, true]))))
        );
        let other = Request::Read {
            area: Area::Holding,
            start: 0,
            count: 1,
        };
        assert!(matches!(
            decode_answer(&bits, 1, &other),
            Err(LinkError::Io(_))
        ));
    }
}
