//! Modbus TCP framing (the MBAP header) around closedloop-modbus's PDU codec
//! ([`closedloop_modbus::pdu`], the same one the driver uses): pure encode and decode, no I/O, so
//! every byte is checked by a unit test.
//!
//! The simulator frames Modbus itself instead of using tokio-modbus's server: that server awaits
//! each request's answer before it reads the next frame, so a request the device never answers
//! (power off, zombie, a lost request) would wedge its connection for good and keep the socket
//! open after the client left. The connection loop in [`crate::modbus`] needs to go on reading
//! while answers are outstanding, which needs framing it controls.

use closedloop_contract::{Data, Exception};
use closedloop_modbus::pdu::{Payload, Request, Response};

/// Largest PDU the specification allows (a 260-byte ADU).
pub use closedloop_modbus::pdu::MAX_PDU_LEN;

/// MBAP header length: transaction id, protocol id, length, unit id.
pub const HEADER_LEN: usize = 7;

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

/// The complete response ADU to `request`: its data, its write echo, or the device's exception.
///
/// A read answer whose shape does not match the request (bits for registers, or the wrong
/// count) would be a simulator bug; it is answered with exception 4 rather than a lying frame.
pub fn encode_answer(
    header: Header,
    request: &Request,
    answer: Result<Option<Data>, Exception>,
) -> Vec<u8> {
    let outcome = answer
        .and_then(|data| Payload::answering(request, data).ok_or(Exception::SERVER_DEVICE_FAILURE));
    let response = Response {
        function: request.function(),
        outcome,
    };
    frame(header, &response.encode())
}

/// An exception response ADU: the function code with its high bit set, then the code.
pub fn encode_exception(header: Header, function: u8, exception: Exception) -> Vec<u8> {
    let response = Response {
        function,
        outcome: Err(exception),
    };
    frame(header, &response.encode())
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
    use closedloop_contract::Area;

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
        let coil = Request::decode(&[5, 0, 1, 0xFF, 0]).unwrap();
        assert_eq!(
            encode_answer(H, &coil, Ok(None)),
            vec![0x12, 0x34, 0, 0, 0, 6, 7, 5, 0, 1, 0xFF, 0]
        );
        let regs = Request::decode(&[16, 0, 0, 0, 2, 4, 0, 0, 0x75, 0x30]).unwrap();
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
