//! The Modbus TCP requests `closedloop sim` decodes from its clients
//! (`closedloop_sim_server::codec`): `take_adu` on a byte stream that arrives in chunks, then
//! `decode_request` on each PDU, and the answer `encode_answer` builds for it.
//!
//! Input: `chunk, stream...`: the stream arrives `chunk` bytes at a time (0: all at once).
//!
//! Properties: no panic; framing does not depend on how the stream was cut; every PDU holds 1 to
//! 253 bytes; a decoded request re-encodes to the PDU it came from (FC15's padding bits aside)
//! and stays inside the address space and the per-request limits; a refusal names the PDU's
//! function and exception 1, 2 or 3; every answer is itself a well-formed ADU with the request's
//! header, and a read's answer carries back exactly the data given.

#![no_main]

use closedloop_driver::{Area, Data, Exception, Write};
use closedloop_sim_server::codec::{
    Adu, FrameError, MAX_PDU_LEN, Request, decode_request, encode_answer, encode_exception,
    take_adu,
};
use libfuzzer_sys::fuzz_target;

/// Every ADU taken off the stream, and the framing error that ended it (if one did).
fn frames(stream: &[u8], chunk: usize) -> (Vec<Adu>, Option<FrameError>) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let before = buf.len();
            match take_adu(&mut buf) {
                Ok(Some(adu)) => {
                    assert_eq!(
                        buf.len(),
                        before - 7 - adu.pdu.len(),
                        "took the frame, nothing else"
                    );
                    out.push(adu);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame stays in the buffer");
                    break;
                }
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// The PDU a request came from, as a client would have sent it.
fn pdu_of(req: &Request) -> Vec<u8> {
    let mut p = vec![req.function()];
    let put = |p: &mut Vec<u8>, v: u16| p.extend_from_slice(&v.to_be_bytes());
    match req {
        Request::Read { start, count, .. } => {
            put(&mut p, *start);
            put(&mut p, *count);
        }
        Request::Write {
            function: 5,
            write: Write::Coils { start, values },
        } => {
            put(&mut p, *start);
            put(&mut p, if values[0] { 0xFF00 } else { 0 });
        }
        Request::Write {
            function: 6,
            write: Write::Registers { start, values },
        } => {
            put(&mut p, *start);
            put(&mut p, values[0]);
        }
        Request::Write {
            write: Write::Coils { start, values },
            ..
        } => {
            put(&mut p, *start);
            put(&mut p, values.len() as u16);
            let mut bytes = vec![0u8; values.len().div_ceil(8)];
            for (i, b) in values.iter().enumerate() {
                if *b {
                    bytes[i / 8] |= 1 << (i % 8);
                }
            }
            p.push(bytes.len() as u8);
            p.extend_from_slice(&bytes);
        }
        Request::Write {
            write: Write::Registers { start, values },
            ..
        } => {
            put(&mut p, *start);
            put(&mut p, values.len() as u16);
            p.push((values.len() * 2) as u8);
            for v in values {
                put(&mut p, *v);
            }
        }
    }
    p
}

/// Takes the answer back apart: exactly one ADU, nothing left over.
fn reframe(answer: &[u8]) -> Adu {
    let mut buf = answer.to_vec();
    let adu = take_adu(&mut buf)
        .unwrap_or_else(|e| panic!("the answer {answer:02x?} is not Modbus TCP: {e}"))
        .unwrap_or_else(|| panic!("the answer {answer:02x?} is not a whole frame"));
    assert!(
        buf.is_empty(),
        "the answer {answer:02x?} has bytes after its frame"
    );
    adu
}

fn check(adu: &Adu) {
    assert!((1..=MAX_PDU_LEN).contains(&adu.pdu.len()), "{adu:?}");
    match decode_request(&adu.pdu) {
        Ok(req) => {
            let mut again = pdu_of(&req);
            let mut original = adu.pdu.clone();
            if let Request::Write {
                function: 15,
                write: Write::Coils { values, .. },
            } = &req
            {
                // Bits past the quantity in the last byte are padding: ignored, not echoed.
                let tail = values.len() % 8;
                if tail != 0 {
                    *original.last_mut().unwrap() &= (1u8 << tail) - 1;
                    *again.last_mut().unwrap() &= (1u8 << tail) - 1;
                }
            }
            assert_eq!(again, original, "{req:?} does not re-encode to its PDU");
            match &req {
                Request::Read { area, start, count } => {
                    let max = if area.is_bit() { 2000 } else { 125 };
                    assert!((1..=max).contains(count), "{req:?}");
                    assert!(u32::from(*start) + u32::from(*count) <= 0x1_0000, "{req:?}");
                    // The answer carries back what the device read.
                    let n = usize::from(*count);
                    let data = if area.is_bit() {
                        Data::Bits(
                            (0..n)
                                .map(|i| (i * 7 + usize::from(*start)) % 3 == 0)
                                .collect(),
                        )
                    } else {
                        Data::Words(
                            (0..n)
                                .map(|i| (i as u16).wrapping_mul(0x9E37) ^ *start)
                                .collect(),
                        )
                    };
                    let answer = reframe(&encode_answer(adu.header, &req, Ok(Some(data.clone()))));
                    assert_eq!(answer.header, adu.header);
                    let p = &answer.pdu;
                    assert_eq!(p[0], req.function());
                    assert_eq!(usize::from(p[1]), p.len() - 2, "byte count");
                    let back = match area {
                        Area::Coil | Area::DiscreteInput => {
                            Data::Bits((0..n).map(|i| p[2 + i / 8] >> (i % 8) & 1 == 1).collect())
                        }
                        _ => Data::Words(
                            p[2..]
                                .chunks_exact(2)
                                .map(|w| u16::from_be_bytes([w[0], w[1]]))
                                .collect(),
                        ),
                    };
                    assert_eq!(back, data, "{req:?}");
                    // A misshapen answer becomes exception 4, never a frame that lies.
                    let short = match &data {
                        Data::Bits(b) => Data::Bits(b[1..].to_vec()),
                        Data::Words(w) => Data::Words(w[1..].to_vec()),
                    };
                    let refused = reframe(&encode_answer(adu.header, &req, Ok(Some(short))));
                    assert_eq!(refused.pdu, [req.function() | 0x80, 4]);
                }
                Request::Write { function, write } => {
                    assert!([5, 6, 15, 16].contains(function), "{req:?}");
                    let n = match write {
                        Write::Coils { values, .. } => values.len(),
                        Write::Registers { values, .. } => values.len(),
                    };
                    assert!(
                        n >= 1 && u32::from(write.start()) + n as u32 <= 0x1_0000,
                        "{req:?}"
                    );
                    let answer = reframe(&encode_answer(adu.header, &req, Ok(None)));
                    assert_eq!(answer.header, adu.header);
                    // FC05/06 echo the request; FC15/16 echo its first five bytes.
                    assert_eq!(answer.pdu, adu.pdu[..5], "{req:?}");
                }
            }
        }
        Err(refused) => {
            assert_eq!(refused.function, adu.pdu[0]);
            assert!(
                [
                    Exception::ILLEGAL_FUNCTION,
                    Exception::ILLEGAL_DATA_ADDRESS,
                    Exception::ILLEGAL_DATA_VALUE
                ]
                .contains(&refused.exception),
                "{refused:?}"
            );
            let answer = reframe(&encode_exception(
                adu.header,
                refused.function,
                refused.exception,
            ));
            assert_eq!(answer.header, adu.header);
            assert_eq!(answer.pdu, [refused.function | 0x80, refused.exception.0]);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let whole = frames(stream, stream.len().max(1));
    let chunk = usize::from(chunk);
    if chunk != 0 {
        assert_eq!(
            frames(stream, chunk),
            whole,
            "framing depends on how the stream was cut"
        );
    }
    for adu in &whole.0 {
        check(adu);
    }
});
