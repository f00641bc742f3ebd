//! The Modbus TCP requests `closedloop sim` decodes from its clients: `take_adu`
//! (`closedloop_sim_server::codec`, the MBAP framing) on a byte stream that arrives in chunks,
//! then `Request::decode` (`closedloop_modbus::pdu`, the PDU codec the driver shares) on each
//! PDU, and the answer `encode_answer` builds for it, decoded again as the driver decodes it.
//!
//! Input: `chunk, stream...`: the stream arrives `chunk` bytes at a time (0: all at once).
//!
//! Properties: no panic; framing does not depend on how the stream was cut; every PDU holds 1 to
//! 253 bytes; a decoded request re-encodes through the client's encoder to the PDU it came from
//! (FC15's padding bits aside) and stays inside the address space and the per-request limits; a refusal names the PDU's
//! function and exception 1, 2 or 3; every answer is itself a well-formed ADU with the request's
//! header, and a read's answer, decoded by the client's decoder, carries back exactly the data
//! given (and matches an independent unpacking of its bytes).

#![no_main]

use closedloop_contract::{Area, Data, Exception};
use closedloop_modbus::pdu::{MAX_PDU_LEN, Payload, Request, Response};
use closedloop_sim_server::codec::{Adu, FrameError, encode_answer, encode_exception, take_adu};
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
    let req = match Request::decode(&adu.pdu) {
        Ok(req) => req,
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
            return;
        }
    };
    let mut again = req.encode();
    let mut original = adu.pdu.clone();
    if let Request::WriteCoils { values, .. } = &req {
        // Bits past the quantity in the last byte are padding: ignored, not echoed.
        let tail = values.len() % 8;
        if tail != 0 {
            *original.last_mut().unwrap() &= (1u8 << tail) - 1;
            *again.last_mut().unwrap() &= (1u8 << tail) - 1;
        }
    }
    assert_eq!(again, original, "{req:?} does not re-encode to its PDU");
    let n = req.quantity();
    assert!(
        n >= 1 && usize::from(req.start()) + n <= 0x1_0000,
        "{req:?}"
    );
    match &req {
        Request::Read { area, start, count } => check_read(adu, &req, *area, *start, *count),
        _ => check_write(adu, &req),
    }
}

/// A read's answer carries back what the device read, and a misshapen one is exception 4.
fn check_read(adu: &Adu, req: &Request, area: Area, start: u16, count: u16) {
    let max = if area.is_bit() { 2000 } else { 125 };
    assert!((1..=max).contains(&count), "{req:?}");
    let n = usize::from(count);
    let data = if area.is_bit() {
        Data::Bits(
            (0..n)
                .map(|i| (i * 7 + usize::from(start)) % 3 == 0)
                .collect(),
        )
    } else {
        Data::Words(
            (0..n)
                .map(|i| (i as u16).wrapping_mul(0x9E37) ^ start)
                .collect(),
        )
    };
    let answer = reframe(&encode_answer(adu.header, req, Ok(Some(data.clone()))));
    assert_eq!(answer.header, adu.header);
    let p = &answer.pdu;
    assert_eq!(p[0], req.function());
    assert_eq!(usize::from(p[1]), p.len() - 2, "byte count");
    // Unpacked here by hand, and by the client's decoder: both give back the data.
    let back = if area.is_bit() {
        Data::Bits((0..n).map(|i| p[2 + i / 8] >> (i % 8) & 1 == 1).collect())
    } else {
        Data::Words(
            p[2..]
                .chunks_exact(2)
                .map(|w| u16::from_be_bytes([w[0], w[1]]))
                .collect(),
        )
    };
    assert_eq!(back, data, "{req:?}");
    let decoded = Response::decode(p).unwrap_or_else(|e| panic!("{req:?}: {p:02x?}: {e}"));
    assert_eq!(decoded.function, req.function());
    let decoded = match decoded.outcome {
        Ok(Payload::Bits(mut b)) => {
            b.truncate(n);
            Data::Bits(b)
        }
        Ok(Payload::Words(w)) => Data::Words(w),
        other => panic!("{req:?} decoded as {other:?}"),
    };
    assert_eq!(decoded, data, "{req:?}");
    // A misshapen answer becomes exception 4, never a frame that lies.
    let short = match &data {
        Data::Bits(b) => Data::Bits(b[1..].to_vec()),
        Data::Words(w) => Data::Words(w[1..].to_vec()),
    };
    let refused = reframe(&encode_answer(adu.header, req, Ok(Some(short))));
    assert_eq!(refused.pdu, [req.function() | 0x80, 4]);
}

/// A write's answer echoes it: FC05/06 the whole request, FC15/16 its first five bytes.
fn check_write(adu: &Adu, req: &Request) {
    assert!([5, 6, 15, 16].contains(&req.function()), "{req:?}");
    let answer = reframe(&encode_answer(adu.header, req, Ok(None)));
    assert_eq!(answer.header, adu.header);
    assert_eq!(answer.pdu, adu.pdu[..5], "{req:?}");
    let decoded = Response::decode(&answer.pdu).map(|r| r.outcome);
    let (addr, value) = req.echo().unwrap_or_else(|| panic!("{req:?} has no echo"));
    assert_eq!(decoded, Ok(Ok(Payload::Echo { addr, value })), "{req:?}");
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
