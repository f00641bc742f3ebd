//! Modbus RTU framing: `unit · PDU · CRC16 (little-endian)`, pure encode and decode, no I/O;
//! the PDU itself is [`crate::pdu`]'s.
//!
//! closedloop frames RTU itself instead of using tokio-modbus's RTU codec because that codec
//! answers a bad CRC by dropping a byte and trying to resynchronise: the caller never learns
//! that a garbled answer arrived, and the contract must report it as `CRC_MISMATCH` (the request
//! may have taken effect), not as silence.

use crate::pdu::{EXCEPTION_BIT, Response};
use crate::request::Request;
use crate::transport::{ExchangeError, TransportAnswer, check_payload};

/// The longest RTU frame (Modbus over serial line, §2.5.1.1).
pub const MAX_FRAME: usize = 256;

/// What an RTU frame holds besides its PDU: the unit id before it, the CRC after it.
const OVERHEAD: usize = 3;

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
    let mut f = vec![unit];
    f.extend_from_slice(&req.encode());
    seal(&mut f);
    f
}

/// How long the answer frame starting with `buf` is, once enough of it has arrived to tell
/// (`None`: read more). Errors when the header cannot start any answer to a request of ours.
pub(crate) fn answer_len(buf: &[u8]) -> Result<Option<usize>, ExchangeError> {
    let pdu = buf.get(1..).unwrap_or_default();
    match Response::len_from_prefix(pdu) {
        Ok(len) => Ok(len.map(|n| n + OVERHEAD)),
        Err(e) => Err(ExchangeError::Io(e.to_string())),
    }
}

/// Decodes one complete answer frame to `req` sent to `unit`. The CRC is checked first: a
/// frame that fails it says nothing reliable, not even which unit sent it.
pub(crate) fn decode_answer(frame: &[u8], unit: u8, req: &Request) -> TransportAnswer {
    if frame.len() < 5 {
        return Err(ExchangeError::Io(format!(
            "an answer of {} bytes is too short",
            frame.len()
        )));
    }
    let (body, crc) = frame.split_at(frame.len() - 2);
    if crc16(body) != u16::from_le_bytes([crc[0], crc[1]]) {
        return Err(ExchangeError::Crc);
    }
    if body[0] != unit {
        return Err(ExchangeError::Io(format!(
            "asked unit {unit}, unit {} answered",
            body[0]
        )));
    }
    let function = body[1] & !EXCEPTION_BIT;
    if function != req.function() {
        return Err(ExchangeError::Io(format!(
            "sent function {:#04x}, the answer is for {function:#04x}",
            req.function(),
        )));
    }
    let response = Response::decode(&body[1..]).map_err(|e| ExchangeError::Io(e.to_string()))?;
    match response.outcome {
        Err(exception) => Ok(Err(exception)),
        Ok(payload) => check_payload(req, payload).map(Ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Reply;
    use closedloop_contract::{Area, Data, Exception};

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
        assert_eq!(decode_answer(&f, 1, &req), Err(ExchangeError::Crc));
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
        assert!(matches!(
            decode_answer(&ex, 2, &req),
            Err(ExchangeError::Io(_))
        ));
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
            Err(ExchangeError::Io(_))
        ));
    }
}
