//! Properties of the Modbus PDU codec (`closedloop_modbus::pdu`) over generated requests and
//! answers (issue 14, "proptest round trips for every codec").
//!
//! Guarded:
//! - a request within the specification's limits decodes to itself; one beyond them (a quantity
//!   of 0 or over the limit, a block past address 65535) is refused with the exception
//!   [`Request::check`] names, never decoded as a shorter or wrapped request — and the client's
//!   builders refuse exactly what a server would;
//! - an answer decodes to itself (bits padded with zeros to whole bytes, as the wire carries
//!   them: documented on `Payload::Bits`), and no prefix of an answer is taken for a whole one,
//!   which RTU relies on to find where a frame ends.
//!
//! Why: both ends of closedloop's Modbus connections (the driver and `closedloop sim`) use this one
//! codec, so a byte it loses or a limit it stretches would go unnoticed by every other test.

mod common;

use closedloop_contract::Write;
use closedloop_modbus::pdu::{Payload, Refused, Request, Response, pack_bits, unpack_bits};
use common::{area, response, valid_request};
use proptest::collection::vec;
use proptest::prelude::*;

/// A start address, often near the end of the address space.
fn start() -> impl Strategy<Value = u16> {
    prop_oneof![any::<u16>(), 65400..=u16::MAX]
}

/// A count, often at or next to a limit (0, 123–125, 1968, 2000).
fn count() -> impl Strategy<Value = u16> {
    prop_oneof![0..=3u16, 120..=130u16, 1965..=2005u16, any::<u16>()]
}

/// Any request, within the limits or not.
fn any_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (area(), start(), count()).prop_map(|(area, start, count)| Request::Read {
            area,
            start,
            count
        }),
        (start(), vec(any::<bool>(), 0..=2100))
            .prop_map(|(start, values)| Request::WriteCoils { start, values }),
        (start(), vec(any::<u16>(), 0..=300))
            .prop_map(|(start, values)| Request::WriteRegisters { start, values }),
        valid_request(),
    ]
}

/// The bits an answer carries on the wire: padded with `false` to whole bytes.
fn padded(bits: &[bool]) -> Vec<bool> {
    let mut out = bits.to_vec();
    out.resize(bits.len().div_ceil(8) * 8, false);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_requests_decode_to_themselves(req in valid_request()) {
        let pdu = req.encode();
        prop_assert!(pdu.len() <= closedloop_modbus::pdu::MAX_PDU_LEN, "{} bytes", pdu.len());
        prop_assert_eq!(Request::decode(&pdu), Ok(req));
    }

    /// What a server decodes is the request or the refusal its limits prescribe: never a
    /// request with a truncated count or a wrapped byte count.
    #[test]
    fn requests_beyond_the_limits_are_refused_not_truncated(req in any_request()) {
        let want = match req.check() {
            Ok(()) => Ok(req.clone()),
            Err(exception) => Err(Refused { function: req.function(), exception }),
        };
        prop_assert_eq!(Request::decode(&req.encode()), want);
    }

    /// The client's builders send exactly what a server accepts.
    #[test]
    fn the_client_refuses_what_a_server_would(
        area in area(),
        start in start(),
        count in count(),
        values in vec(any::<u16>(), 0..=300),
    ) {
        let read = Request::Read { area, start, count };
        prop_assert_eq!(Request::read(area, start, count).is_ok(), read.check().is_ok());
        let block = Request::WriteRegisters { start, values: values.clone() };
        let built = Request::write(Write::Registers { start, values });
        prop_assert_eq!(built.is_ok(), block.check().is_ok(), "{:?}", built);
    }

    #[test]
    fn answers_decode_to_themselves(resp in response()) {
        let want = match &resp.outcome {
            Ok(Payload::Bits(bits)) => Response {
                function: resp.function,
                outcome: Ok(Payload::Bits(padded(bits))),
            },
            _ => resp.clone(),
        };
        prop_assert_eq!(Response::decode(&resp.encode()), Ok(want));
    }

    /// Every prefix of an answer either says "read more" or names the whole answer's length,
    /// and no strict prefix decodes.
    #[test]
    fn no_prefix_of_an_answer_passes_for_a_whole_one(resp in response()) {
        let pdu = resp.encode();
        for n in 0..pdu.len() {
            let len = Response::len_from_prefix(&pdu[..n]);
            prop_assert!(matches!(len, Ok(None)) || len == Ok(Some(pdu.len())), "{n}: {len:?}");
            prop_assert!(Response::decode(&pdu[..n]).is_err(), "{n} of {} bytes", pdu.len());
        }
        prop_assert_eq!(Response::len_from_prefix(&pdu), Ok(Some(pdu.len())));
    }

    #[test]
    fn bits_pack_and_unpack(bits in vec(any::<bool>(), 0..=2000)) {
        let bytes = pack_bits(&bits);
        prop_assert_eq!(bytes.len(), bits.len().div_ceil(8));
        prop_assert_eq!(unpack_bits(&bytes, bits.len()), bits.clone());
        prop_assert_eq!(unpack_bits(&bytes, bytes.len() * 8), padded(&bits));
    }

    /// A single write goes as FC05/06, a block as FC15/16, and a server hands its device the
    /// same write either way.
    #[test]
    fn writes_reach_the_device_as_they_were_given(
        start in 0u16..=65000,
        coils in vec(any::<bool>(), 1..=300),
        regs in vec(any::<u16>(), 1..=123),
    ) {
        for w in [
            Write::Coils { start, values: coils },
            Write::Registers { start, values: regs },
        ] {
            let req = Request::write(w.clone()).expect("within the limits");
            let decoded = Request::decode(&req.encode()).expect("a valid request");
            prop_assert_eq!(
                decoded.operation(),
                closedloop_modbus::pdu::Operation::Write(w)
            );
        }
    }
}
