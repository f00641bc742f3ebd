//! Generators shared by the PDU and RTU property tests: requests the specification's limits
//! accept, and the answers a device gives them.

// Each test file uses part of this module.
#![allow(dead_code)]

use closedloop_contract::{Area, Exception};
use closedloop_modbus::pdu::{MAX_READ_BITS, MAX_READ_WORDS, MAX_WRITE_BITS, MAX_WRITE_WORDS};
use closedloop_modbus::pdu::{Payload, Request, Response};
use proptest::collection::vec;
use proptest::prelude::*;

pub fn area() -> impl Strategy<Value = Area> {
    prop::sample::select(vec![
        Area::Coil,
        Area::DiscreteInput,
        Area::Holding,
        Area::Input,
    ])
}

/// `start` moved down, if need be, so that `n` items from it stay inside address 65535.
fn fit(start: u16, n: usize) -> u16 {
    start.min((0x1_0000 - n) as u16)
}

/// A request that passes [`Request::check`]: every function code, every quantity up to its
/// limit, blocks that end at address 65535.
pub fn valid_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (area(), any::<u16>(), any::<u16>()).prop_map(|(area, s, c)| {
            let max = if area.is_bit() {
                MAX_READ_BITS
            } else {
                MAX_READ_WORDS
            };
            let count = 1 + c % max;
            Request::Read {
                area,
                start: fit(s, count.into()),
                count,
            }
        }),
        (any::<u16>(), any::<bool>()).prop_map(|(addr, value)| Request::WriteCoil { addr, value }),
        (any::<u16>(), any::<u16>())
            .prop_map(|(addr, value)| Request::WriteRegister { addr, value }),
        (
            any::<u16>(),
            vec(any::<bool>(), 1..=usize::from(MAX_WRITE_BITS))
        )
            .prop_map(|(s, values)| Request::WriteCoils {
                start: fit(s, values.len()),
                values,
            }),
        (
            any::<u16>(),
            vec(any::<u16>(), 1..=usize::from(MAX_WRITE_WORDS))
        )
            .prop_map(|(s, values)| Request::WriteRegisters {
                start: fit(s, values.len()),
                values,
            }),
    ]
}

/// A well-formed answer of each layout: bits, registers, a write's echo, an exception.
pub fn response() -> impl Strategy<Value = Response> {
    let ok = |function, p| Response {
        function,
        outcome: Ok(p),
    };
    prop_oneof![
        (1u8..=2, vec(any::<bool>(), 1..=usize::from(MAX_READ_BITS)))
            .prop_map(move |(f, bits)| ok(f, Payload::Bits(bits))),
        (3u8..=4, vec(any::<u16>(), 1..=usize::from(MAX_READ_WORDS)))
            .prop_map(move |(f, words)| ok(f, Payload::Words(words))),
        (
            prop::sample::select(vec![5u8, 6, 15, 16]),
            any::<u16>(),
            any::<u16>()
        )
            .prop_map(move |(f, addr, value)| ok(f, Payload::Echo { addr, value })),
        (1u8..0x80, any::<u8>()).prop_map(|(function, code)| Response {
            function,
            outcome: Err(Exception(code)),
        }),
    ]
}
