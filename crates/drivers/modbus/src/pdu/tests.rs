//! The PDU codec byte by byte (the specification's own examples), round trips from the client's
//! encoder to the server's decoder and back, and every limit with its exception.

use closedloop_contract::{Area, Data, Exception, Write};

use super::*;

fn read(area: Area, start: u16, count: u16) -> Request {
    Request::Read { area, start, count }
}

/// The exception a request PDU is refused with, or `None` when it decodes.
fn refusal(pdu: &[u8]) -> Option<Exception> {
    Request::decode(pdu).err().map(|r| r.exception)
}

/// A block write PDU of `count` items, its byte count and data consistent with `count`.
fn block(function: u8, start: u16, count: u16) -> Vec<u8> {
    let bytes = if function == WRITE_MULTIPLE_COILS {
        usize::from(count).div_ceil(8)
    } else {
        usize::from(count) * 2
    };
    let mut pdu = vec![function];
    put(&mut pdu, start);
    put(&mut pdu, count);
    pdu.push(bytes as u8);
    pdu.resize(6 + bytes, 0);
    pdu
}

#[test]
fn requests_encode_as_the_specification_shows() {
    // Modbus application protocol V1.1b3, the examples of §6.1, 6.3, 6.5, 6.6, 6.11, 6.12.
    assert_eq!(read(Area::Coil, 19, 19).encode(), [1, 0, 0x13, 0, 0x13]);
    assert_eq!(read(Area::Holding, 107, 3).encode(), [3, 0, 0x6B, 0, 3]);
    let coil = Request::WriteCoil {
        addr: 0xAC,
        value: true,
    };
    assert_eq!(coil.encode(), [5, 0, 0xAC, 0xFF, 0]);
    let reg = Request::WriteRegister { addr: 1, value: 3 };
    assert_eq!(reg.encode(), [6, 0, 1, 0, 3]);
    let bits = [1, 0, 1, 1, 0, 0, 1, 1, 1, 0].map(|b| b == 1).to_vec();
    let coils = Request::WriteCoils {
        start: 0x13,
        values: bits,
    };
    assert_eq!(coils.encode(), [0x0F, 0, 0x13, 0, 0x0A, 2, 0xCD, 0x01]);
    let regs = Request::WriteRegisters {
        start: 1,
        values: vec![0x000A, 0x0102],
    };
    assert_eq!(regs.encode(), [0x10, 0, 1, 0, 2, 4, 0, 0x0A, 1, 2]);
}

#[test]
fn responses_encode_and_decode_as_the_specification_shows() {
    let cases: [(&[u8], Result<Payload, Exception>); 4] = [
        (
            &[1, 3, 0xCD, 0x6B, 0x05],
            Ok(Payload::Bits(unpack_bits(&[0xCD, 0x6B, 0x05], 24))),
        ),
        (
            &[3, 6, 0x02, 0x2B, 0, 0, 0, 0x64],
            Ok(Payload::Words(vec![0x022B, 0, 0x64])),
        ),
        (
            &[0x0F, 0, 0x13, 0, 0x0A],
            Ok(Payload::Echo {
                addr: 0x13,
                value: 10,
            }),
        ),
        (&[0x81, 2], Err(Exception::ILLEGAL_DATA_ADDRESS)),
    ];
    for (pdu, outcome) in cases {
        let response = Response {
            function: pdu[0] & 0x7F,
            outcome,
        };
        assert_eq!(response.encode(), pdu);
        assert_eq!(Response::decode(pdu), Ok(response));
        assert_eq!(Response::len_from_prefix(pdu), Ok(Some(pdu.len())));
    }
}

/// Requests as the driver builds them: every function code, at and inside the limits.
fn client_requests() -> Vec<Request> {
    let mut out = Vec::new();
    for area in [Area::Coil, Area::DiscreteInput, Area::Holding, Area::Input] {
        let max = if area.is_bit() { 2000 } else { 125 };
        for (start, count) in [
            (0, 1),
            (7, 9),
            (0, max),
            (65535, 1),
            (65536 - max as u32, max),
        ] {
            out.push(Request::read(area, start as u16, count).unwrap());
        }
    }
    let coils = |n: usize| (0..n).map(|i| i % 3 == 0).collect::<Vec<_>>();
    let words = |n: usize| (0..n).map(|i| i as u16 * 0x0101).collect::<Vec<_>>();
    for (start, n) in [
        (0, 1),
        (65535, 1),
        (4, 2),
        (9, 17),
        (0, 1968),
        (63568, 1968),
    ] {
        let values = coils(n);
        out.push(Request::write(Write::Coils { start, values }).unwrap());
    }
    for (start, n) in [(0, 1), (65535, 1), (4, 2), (0, 123), (65413, 123)] {
        let values = words(n);
        out.push(Request::write(Write::Registers { start, values }).unwrap());
    }
    out
}

#[test]
fn what_the_client_encodes_the_server_decodes_to_the_same_request() {
    for req in client_requests() {
        let pdu = req.encode();
        assert!(pdu.len() <= MAX_PDU_LEN, "{req:?}");
        assert_eq!(Request::decode(&pdu), Ok(req.clone()), "{pdu:02x?}");
    }
}

#[test]
fn what_the_server_answers_the_client_decodes_to_the_same_response() {
    for req in client_requests() {
        let n = req.quantity();
        let data = match &req {
            Request::Read { area, .. } if area.is_bit() => {
                Some(Data::Bits((0..n).map(|i| i % 5 == 1).collect()))
            }
            Request::Read { .. } => Some(Data::Words((0..n).map(|i| i as u16 ^ 0xA5A5).collect())),
            _ => None,
        };
        let payload = Payload::answering(&req, data.clone()).unwrap();
        let sent = Response {
            function: req.function(),
            outcome: Ok(payload),
        };
        let pdu = sent.encode();
        assert!(pdu.len() <= MAX_PDU_LEN, "{req:?}");
        let got = Response::decode(&pdu).unwrap();
        assert_eq!(got.function, req.function());
        match (got.outcome, data) {
            // Bits arrive padded to whole bytes; the padding reads as zeros.
            (Ok(Payload::Bits(mut b)), Some(Data::Bits(want))) => {
                assert!(b[n..].iter().all(|x| !x), "{req:?}");
                b.truncate(n);
                assert_eq!(b, want);
            }
            (Ok(Payload::Words(w)), Some(Data::Words(want))) => assert_eq!(w, want),
            (Ok(Payload::Echo { addr, value }), None) => {
                assert_eq!(Some((addr, value)), req.echo());
            }
            other => panic!("{req:?} came back as {other:?}"),
        }
        let refused = Refused {
            function: req.function(),
            exception: Exception::SERVER_DEVICE_BUSY,
        };
        let back = Response::decode(&refused.response().encode());
        assert_eq!(back, Ok(refused.response()));
    }
}

#[test]
fn every_quantity_limit_is_exception_3_and_the_limit_itself_passes() {
    let limits = [
        (READ_COILS, MAX_READ_BITS, 2000),
        (READ_DISCRETE_INPUTS, MAX_READ_BITS, 2000),
        (READ_HOLDING_REGISTERS, MAX_READ_WORDS, 125),
        (READ_INPUT_REGISTERS, MAX_READ_WORDS, 125),
    ];
    for (function, max, spec) in limits {
        assert_eq!(max, spec);
        let pdu = |count: u16| [function, 0, 0, (count >> 8) as u8, count as u8];
        assert_eq!(refusal(&pdu(0)), Some(Exception::ILLEGAL_DATA_VALUE));
        assert_eq!(refusal(&pdu(1)), None);
        assert_eq!(refusal(&pdu(max)), None);
        assert_eq!(refusal(&pdu(max + 1)), Some(Exception::ILLEGAL_DATA_VALUE));
    }
    for (function, max) in [
        (WRITE_MULTIPLE_COILS, 1968),
        (WRITE_MULTIPLE_REGISTERS, 123),
    ] {
        let exception = |count| refusal(&block(function, 0, count));
        assert_eq!(exception(0), Some(Exception::ILLEGAL_DATA_VALUE));
        assert_eq!(exception(1), None);
        assert_eq!(exception(max), None);
        assert_eq!(exception(max + 1), Some(Exception::ILLEGAL_DATA_VALUE));
    }
    assert_eq!((MAX_WRITE_BITS, MAX_WRITE_WORDS), (1968, 123));
}

#[test]
fn byte_counts_and_lengths_must_match_the_quantity() {
    let mut wrong_count = block(WRITE_MULTIPLE_REGISTERS, 0, 2);
    wrong_count[5] = 3;
    wrong_count.pop();
    assert_eq!(refusal(&wrong_count), Some(Exception::ILLEGAL_DATA_VALUE));
    let mut short = block(WRITE_MULTIPLE_COILS, 0, 10);
    short.pop();
    assert_eq!(refusal(&short), Some(Exception::ILLEGAL_DATA_VALUE));
    let mut long = block(WRITE_MULTIPLE_COILS, 0, 10);
    long.push(0);
    assert_eq!(refusal(&long), Some(Exception::ILLEGAL_DATA_VALUE));
    assert_eq!(refusal(&[3, 0, 0, 0]), Some(Exception::ILLEGAL_DATA_VALUE));
    assert_eq!(
        refusal(&[6, 0, 0, 0, 1, 0]),
        Some(Exception::ILLEGAL_DATA_VALUE)
    );
    assert_eq!(
        refusal(&[5, 0, 1, 0x12, 0]),
        Some(Exception::ILLEGAL_DATA_VALUE)
    );
    assert_eq!(refusal(&[5, 0, 1, 0, 0]), None);
}

#[test]
fn a_block_past_address_65535_is_exception_2_after_the_quantity_checks() {
    for function in READ_COILS..=READ_INPUT_REGISTERS {
        assert_eq!(refusal(&[function, 0xFF, 0xFF, 0, 1]), None);
        let past = refusal(&[function, 0xFF, 0xFF, 0, 2]);
        assert_eq!(past, Some(Exception::ILLEGAL_DATA_ADDRESS));
        // A quantity out of range is exception 3 even where the block also runs past the end.
        let both = refusal(&[function, 0xFF, 0xFF, 0x7F, 0xFF]);
        assert_eq!(both, Some(Exception::ILLEGAL_DATA_VALUE));
    }
    for function in [WRITE_MULTIPLE_COILS, WRITE_MULTIPLE_REGISTERS] {
        assert_eq!(refusal(&block(function, 65534, 2)), None);
        let past = refusal(&block(function, 65535, 2));
        assert_eq!(past, Some(Exception::ILLEGAL_DATA_ADDRESS));
    }
    assert_eq!(refusal(&[5, 0xFF, 0xFF, 0xFF, 0]), None);
    assert_eq!(refusal(&[6, 0xFF, 0xFF, 0x12, 0x34]), None);
}

#[test]
fn unknown_functions_are_exception_1_naming_the_function() {
    for pdu in [&[0x2B, 0x0E, 1, 0][..], &[0x07], &[0x81, 0, 0, 0, 1]] {
        let refused = Request::decode(pdu).unwrap_err();
        assert_eq!(refused.function, pdu[0]);
        assert_eq!(refused.exception, Exception::ILLEGAL_FUNCTION);
        assert_eq!(refused.response().encode(), [pdu[0] | 0x80, 1]);
    }
    let empty = Request::decode(&[]).unwrap_err();
    assert_eq!(
        (empty.function, empty.exception),
        (0, Exception::ILLEGAL_FUNCTION)
    );
}

#[test]
fn malformed_responses_are_errors_not_answers() {
    assert_eq!(
        Response::len_from_prefix(&[0x2B]),
        Err(Malformed::Function(0x2B))
    );
    assert_eq!(Response::len_from_prefix(&[3]), Ok(None));
    assert_eq!(Response::len_from_prefix(&[]), Ok(None));
    assert_eq!(
        Response::decode(&[3, 3, 0, 1, 2]),
        Err(Malformed::OddRegisters)
    );
    let short = Response::decode(&[6, 0, 1, 0]);
    assert_eq!(
        short,
        Err(Malformed::Length {
            function: 6,
            len: 4
        })
    );
    let extra = Response::decode(&[0x83, 2, 0]);
    assert_eq!(
        extra,
        Err(Malformed::Length {
            function: 3,
            len: 3
        })
    );
    let empty = Response::decode(&[]);
    assert_eq!(
        empty,
        Err(Malformed::Length {
            function: 0,
            len: 0
        })
    );
    let no_count = Response::decode(&[3]);
    assert_eq!(
        no_count,
        Err(Malformed::Length {
            function: 3,
            len: 1
        })
    );
}

#[test]
fn a_server_never_answers_with_data_that_does_not_fit_the_request() {
    let req = read(Area::Holding, 0, 2);
    assert_eq!(Payload::answering(&req, Some(Data::Words(vec![1]))), None);
    assert_eq!(
        Payload::answering(&req, Some(Data::Bits(vec![true; 2]))),
        None
    );
    assert_eq!(Payload::answering(&req, None), None);
    let coil = Request::WriteCoil {
        addr: 3,
        value: false,
    };
    let echo = Payload::answering(&coil, None);
    assert_eq!(echo, Some(Payload::Echo { addr: 3, value: 0 }));
}

#[test]
fn writes_decode_to_the_blocks_the_driver_trait_takes() {
    let coil = Request::decode(&[5, 0, 1, 0xFF, 0]).unwrap();
    let one = Write::Coils {
        start: 1,
        values: vec![true],
    };
    assert_eq!(coil.operation(), Operation::Write(one));
    let coils = Request::decode(&[15, 0, 0, 0, 10, 2, 0b0000_0101, 0b10]).unwrap();
    let values = [1, 0, 1, 0, 0, 0, 0, 0, 0, 1].map(|b| b == 1).to_vec();
    assert_eq!(
        coils.operation(),
        Operation::Write(Write::Coils { start: 0, values })
    );
    let regs = Request::decode(&[16, 0, 0, 0, 2, 4, 0, 0, 0x75, 0x30]).unwrap();
    let values = vec![0, 30000];
    let block = Write::Registers { start: 0, values };
    assert_eq!(regs.operation(), Operation::Write(block));
    // FC16 of one register stays FC16, so its answer echoes FC16's shape.
    let one_reg = Request::decode(&[16, 0, 9, 0, 1, 2, 0, 7]).unwrap();
    assert_eq!(one_reg.function(), WRITE_MULTIPLE_REGISTERS);
    assert_eq!(one_reg.echo(), Some((9, 1)));
    let input = Operation::Read {
        area: Area::Input,
        start: 1,
        count: 2,
    };
    assert_eq!(
        Request::decode(&[4, 0, 1, 0, 2]).unwrap().operation(),
        input
    );
}
