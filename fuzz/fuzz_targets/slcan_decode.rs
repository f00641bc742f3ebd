//! What an slcan adapter sends the host (`closedloop_can::slcan::codec::Decoder`), and the lines
//! the host sends it (`encode_frame`).
//!
//! Input: `chunk, stream...`: the stream arrives `chunk` bytes at a time (0: all at once). The
//! first bytes of the stream also make one frame to transmit: `flags, id (4), data (0-8)`.
//!
//! Properties: no panic; the events do not depend on how the stream was cut; `errors()` counts
//! the invalid lines; replies are short; every received frame is one the bus can carry, and the
//! line that would send it decodes back to it; a frame `encode_frame` accepts decodes back to
//! itself, and one it refuses is one `Frame::validate` refuses.

#![no_main]

use closedloop_can::Frame;
use closedloop_can::slcan::codec::{Decoder, Event, MAX_LINE, encode_frame, parse_line};
use libfuzzer_sys::fuzz_target;

fn events(stream: &[u8], chunk: usize) -> (Vec<Event>, u64) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for piece in stream.chunks(chunk) {
        d.push(piece, &mut out);
    }
    (out, d.errors())
}

/// `frame`'s line without its `\r` decodes to `frame`.
fn round_trip(frame: &Frame) {
    let line = encode_frame(frame).unwrap_or_else(|e| panic!("{frame:?} cannot be sent: {e}"));
    assert_eq!(line.last(), Some(&b'\r'));
    assert!(line.len() - 1 <= MAX_LINE, "{line:?}");
    assert_eq!(
        parse_line(&line[..line.len() - 1]),
        Event::Frame(frame.clone()),
        "{line:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let (whole, errors) = events(stream, stream.len().max(1));
    if chunk != 0 {
        assert_eq!(
            events(stream, usize::from(chunk)),
            (whole.clone(), errors),
            "events depend on how the stream was cut"
        );
    }
    let invalid = whole
        .iter()
        .filter(|e| matches!(e, Event::Invalid { .. }))
        .count();
    assert_eq!(errors, invalid as u64);
    for e in &whole {
        match e {
            Event::Frame(f) => {
                assert!(f.validate().is_ok(), "{f:?}");
                round_trip(f);
            }
            Event::Reply(r) => assert!(!r.is_empty() && r.len() <= MAX_LINE, "{r:?}"),
            Event::Invalid { line, .. } => assert!(line.len() <= 4 * MAX_LINE, "{line:?}"),
            Event::Ack | Event::Nak => {}
        }
    }

    // One frame the host sends, from the first bytes.
    let b = |i: usize| stream.get(i).copied().unwrap_or(0);
    let flags = b(0);
    let frame = Frame {
        id: u32::from_be_bytes([b(1), b(2), b(3), b(4)]) >> (flags >> 4 & 7),
        extended: flags & 1 != 0,
        rtr: flags & 2 != 0,
        data: stream
            .get(5..)
            .unwrap_or(&[])
            .iter()
            .take(usize::from(flags >> 2 & 3) * 3)
            .copied()
            .collect(),
    };
    let frame = if frame.rtr {
        Frame {
            data: vec![0; frame.data.len()],
            ..frame
        }
    } else {
        frame
    };
    match encode_frame(&frame) {
        Ok(_) => round_trip(&frame),
        Err(e) => assert_eq!(frame.validate(), Err(e), "{frame:?}"),
    }
});
