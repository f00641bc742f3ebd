//! Properties of Modbus RTU framing (`closedloop_modbus::rtu::frame`) and of the CRC that guards
//! it, over generated requests, answers and corruptions (issue 14, "proptest round trips for
//! every codec").
//!
//! Guarded:
//! - a request frame is `unit · PDU · CRC16 (low byte first)` and its PDU decodes to the request;
//! - any change confined to one byte, or two neighbouring bytes, of a sealed frame fails the CRC
//!   (CRC-16 detects every burst of up to 16 bits);
//! - through a `ModbusDevice` on a scripted serial line, a correct answer reaches the caller as
//!   exactly its data, echo or exception; a corrupted one never does: a corrupted byte that does
//!   not set the frame's length is `TransportError::Crc`, and one that does (the function code,
//!   a read's byte count) is some error, never a successful answer.
//!
//! Why: RTU has no transaction id and no length field of its own; the CRC is all that tells a
//! garbled answer from a good one, and the contract must report it as `CRC_MISMATCH` (the
//! request may have taken effect), never as data.

mod common;

use closedloop_contract::{Area, Data, Driver, Exception, TransportError, Write};
use closedloop_modbus::pdu::{Payload, Request, Response};
use closedloop_modbus::rtu::frame::{MAX_FRAME, crc16, encode_request, seal};
use closedloop_modbus::{Connection, ModbusDevice};
use common::valid_request;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use std::io;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// One exchange: what the caller asks, how the device answers, and what the caller must get.
#[derive(Debug, Clone)]
struct Exchange {
    op: Op,
    answer: Response,
    want: Outcome,
}

#[derive(Debug, Clone)]
enum Op {
    Read(Area, u16, u16),
    Write(Write),
}

/// The caller's view of the answer, reads and writes alike.
type Outcome = Result<Result<Option<Data>, Exception>, TransportError>;

fn exchange() -> impl Strategy<Value = Exchange> {
    let read = |area, data: Data, payload| {
        let n = data.len() as u16;
        Exchange {
            op: Op::Read(area, 0, n),
            answer: Response {
                function: Request::Read {
                    area,
                    start: 0,
                    count: n,
                }
                .function(),
                outcome: Ok(payload),
            },
            want: Ok(Ok(Some(data))),
        }
    };
    prop_oneof![
        vec(any::<u16>(), 1..=125)
            .prop_map(move |w| { read(Area::Holding, Data::Words(w.clone()), Payload::Words(w)) }),
        vec(any::<bool>(), 1..=2000)
            .prop_map(move |b| { read(Area::Coil, Data::Bits(b.clone()), Payload::Bits(b)) }),
        (any::<u16>(), vec(any::<u16>(), 1..=123)).prop_map(|(start, values)| {
            let start = start.min((0x1_0000 - values.len()) as u16);
            let w = Write::Registers { start, values };
            let req = Request::write(w.clone()).expect("within the limits");
            let (addr, value) = req.echo().expect("a write echoes");
            Exchange {
                op: Op::Write(w),
                answer: Response {
                    function: req.function(),
                    outcome: Ok(Payload::Echo { addr, value }),
                },
                want: Ok(Ok(None)),
            }
        }),
        (1u16..=125, any::<u8>()).prop_map(|(n, code)| Exchange {
            op: Op::Read(Area::Input, 0, n),
            answer: Response {
                function: 0x04,
                outcome: Err(Exception(code))
            },
            want: Ok(Err(Exception(code))),
        }),
    ]
}

/// A serial line's far end: reads the request frame, hands it over, answers with `answer`, then
/// stays open (as a port does) until the driver lets go.
async fn unit_line(mut line: DuplexStream, len: usize, answer: Vec<u8>) -> Vec<u8> {
    let mut request = vec![0u8; len];
    if line.read_exact(&mut request).await.is_err() {
        return request;
    }
    let _ = line.write_all(&answer).await;
    let mut rest = [0u8; 64];
    while matches!(line.read(&mut rest).await, Ok(n) if n > 0) {}
    request
}

/// Runs `x` against unit `unit` answering with `frame`; returns what the caller got and the
/// request frame the line received.
fn run(x: &Exchange, unit: u8, frame: Vec<u8>) -> (Outcome, Vec<u8>, Vec<u8>) {
    let req = match &x.op {
        Op::Read(area, start, count) => Request::read(*area, *start, *count),
        Op::Write(w) => Request::write(w.clone()),
    };
    let sent = encode_request(unit, &req.expect("within the limits"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let (ours, theirs) = tokio::io::duplex(1024);
    // The line opens once: a second open (after a failure) finds it gone.
    let ours = Mutex::new(Some(ours));
    let (got, received) = rt.block_on(async {
        let far = tokio::spawn(unit_line(theirs, sent.len(), frame));
        let conn = Connection::rtu_over("rtu props".into(), move || {
            let line = ours.lock().ok().and_then(|mut l| l.take());
            async move { line.ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected)) }
        });
        let dev = ModbusDevice {
            conn: Arc::new(conn),
            unit,
            timeout_ms: 1000,
        };
        let got = match &x.op {
            Op::Read(area, start, count) => {
                dev.read(*area, *start, *count).await.map(|a| a.map(Some))
            }
            Op::Write(w) => dev.write(w.clone()).await.map(|a| a.map(|()| None)),
        };
        drop(dev);
        (got, far.await.expect("the line task"))
    });
    (got, received, sent)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn request_frames_carry_unit_pdu_and_crc(unit in any::<u8>(), req in valid_request()) {
        let frame = encode_request(unit, &req);
        prop_assert!(frame.len() <= MAX_FRAME, "{} bytes", frame.len());
        let (body, crc) = frame.split_at(frame.len() - 2);
        prop_assert_eq!(body[0], unit);
        prop_assert_eq!(crc16(body).to_le_bytes(), [crc[0], crc[1]]);
        prop_assert_eq!(Request::decode(&body[1..]), Ok(req));
    }

    #[test]
    fn a_burst_in_two_neighbouring_bytes_fails_the_crc(
        body in vec(any::<u8>(), 1..=MAX_FRAME - 2),
        at in any::<Index>(),
        flip in 1u16..,
    ) {
        let mut frame = body;
        seal(&mut frame);
        let i = at.index(frame.len());
        let [hi, lo] = flip.to_be_bytes();
        // On the last byte only `hi` lands: it must change something.
        prop_assume!(hi != 0 || i + 1 < frame.len());
        frame[i] ^= hi;
        if let Some(next) = frame.get_mut(i + 1) {
            *next ^= lo;
        }
        let (b, crc) = frame.split_at(frame.len() - 2);
        prop_assert_ne!(crc16(b), u16::from_le_bytes([crc[0], crc[1]]));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn answers_reach_the_caller_exactly_and_corrupted_ones_never_do(
        x in exchange(),
        unit in 1u8..=247,
        corrupt in proptest::option::of((any::<bool>(), any::<Index>(), 1u8..=255)),
    ) {
        let mut frame = vec![unit];
        frame.extend(x.answer.encode());
        seal(&mut frame);
        let mut sets_length = false;
        if let Some((header, at, flip)) = corrupt {
            // Half the corruptions hit the first four bytes, where the length is decided.
            let i = at.index(if header { 4 } else { frame.len() });
            let is_data = matches!(x.answer.outcome, Ok(Payload::Bits(_) | Payload::Words(_)));
            sets_length = i == 1 || (i == 2 && is_data);
            frame[i] ^= flip;
        }
        let (got, received, sent) = run(&x, unit, frame);
        prop_assert_eq!(received, sent, "the request frame on the line");
        match corrupt {
            None => prop_assert_eq!(got, x.want),
            Some(_) if !sets_length => prop_assert_eq!(got, Err(TransportError::Crc)),
            Some(_) => {
                prop_assert!(!matches!(got, Ok(Ok(_))), "{got:?}");
                prop_assert_ne!(got, x.want);
            }
        }
    }
}
