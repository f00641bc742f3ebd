//! Tests of the slcan protocol, byte by byte.

use super::*;

fn events(bytes: &[u8]) -> Vec<Event> {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    d.push(bytes, &mut out);
    out
}

#[test]
fn bitrates_map_to_s_codes() {
    assert_eq!(bitrate_command(10_000), Some(&b"S0\r"[..]));
    assert_eq!(bitrate_command(500_000), Some(&b"S6\r"[..]));
    assert_eq!(bitrate_command(1_000_000), Some(&b"S8\r"[..]));
    assert_eq!(bitrate_command(83_333), None);
}

#[test]
fn frames_encode_byte_by_byte() {
    let f = Frame::data(0x1F0, false, [0x01, 0xAB]);
    assert_eq!(encode_frame(&f).unwrap(), b"t1F0201AB\r");
    let f = Frame::data(0x18DA_F110, true, [0xFF; 8]);
    assert_eq!(encode_frame(&f).unwrap(), b"T18DAF1108FFFFFFFFFFFFFFFF\r");
    let f = Frame::data(0x7, false, []);
    assert_eq!(encode_frame(&f).unwrap(), b"t0070\r");
    let mut r = Frame::data(0x123, false, [0; 4]);
    r.rtr = true;
    assert_eq!(encode_frame(&r).unwrap(), b"r1234\r");
    r.extended = true;
    assert_eq!(encode_frame(&r).unwrap(), b"R000001234\r");
    assert_eq!(
        encode_frame(&Frame::data(0x800, false, [])),
        Err(FrameError::Id {
            id: 0x800,
            extended: false
        })
    );
    assert!(encode_frame(&Frame::data(1, false, [0; 9])).is_err());
}

#[test]
fn received_frames_decode() {
    assert_eq!(
        events(b"t1F0201AB\r"),
        [Event::Frame(Frame::data(0x1F0, false, [0x01, 0xAB]))]
    );
    assert_eq!(
        events(b"T18daf1108ffffffffffffffff\r"),
        [Event::Frame(Frame::data(0x18DA_F110, true, [0xFF; 8]))]
    );
    let mut r = Frame::data(0x123, false, [0; 2]);
    r.rtr = true;
    assert_eq!(events(b"r1232\r"), [Event::Frame(r.clone())]);
    r.extended = true;
    assert_eq!(events(b"R000001232\r"), [Event::Frame(r)]);
}

#[test]
fn timestamps_are_tolerated() {
    assert_eq!(
        events(b"t1F0201ABEA5F\r"),
        [Event::Frame(Frame::data(0x1F0, false, [0x01, 0xAB]))]
    );
    assert_eq!(
        events(b"t10001234\r"),
        [Event::Frame(Frame::data(0x100, false, []))]
    );
    assert!(matches!(events(b"t1F0201ABE\r")[0], Event::Invalid { .. }));
    assert!(matches!(
        events(b"t1F0201ABEA5X\r")[0],
        Event::Invalid { .. }
    ));
}

#[test]
fn acks_naks_and_replies() {
    assert_eq!(events(b"\r"), [Event::Ack]);
    assert_eq!(events(b"z\rZ\r"), [Event::Ack, Event::Ack]);
    assert_eq!(events(b"\x07"), [Event::Nak]);
    assert_eq!(events(b"\x07\r"), [Event::Nak, Event::Ack]);
    assert_eq!(events(b"V1013\r"), [Event::Reply("V1013".into())]);
    assert_eq!(events(b"\r\n\r\n"), [Event::Ack, Event::Ack]);
}

#[test]
fn lines_split_across_reads_reassemble() {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for chunk in [&b"t1"[..], b"F02", b"01", b"AB", b"\rt0", b"000\r"] {
        d.push(chunk, &mut out);
    }
    assert_eq!(
        out,
        [
            Event::Frame(Frame::data(0x1F0, false, [0x01, 0xAB])),
            Event::Frame(Frame::data(0x000, false, [])),
        ]
    );
    assert_eq!(d.errors(), 0);
}

#[test]
fn garbage_is_counted_and_the_next_line_is_read() {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    d.push(
        b"\x00\xFFxyz\rt1001AA\rt80000\rt1009\rt100200112\rq\r",
        &mut out,
    );
    assert_eq!(out.len(), 6);
    assert!(matches!(
        &out[0],
        Event::Invalid {
            reason: "not an slcan reply",
            ..
        }
    ));
    assert_eq!(out[1], Event::Frame(Frame::data(0x100, false, [0xAA])));
    assert!(matches!(
        &out[2],
        Event::Invalid {
            reason: "identifier out of range",
            ..
        }
    ));
    assert!(matches!(
        &out[3],
        Event::Invalid {
            reason: "length is not 0-8",
            ..
        }
    ));
    assert!(matches!(
        &out[4],
        Event::Invalid {
            reason: "payload does not match its length",
            ..
        }
    ));
    assert!(matches!(&out[5], Event::Invalid { .. }));
    assert_eq!(d.errors(), 5);
}

#[test]
fn an_overlong_line_is_one_error_then_resync() {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    d.push(&[b'7'; 200], &mut out);
    assert!(out.is_empty());
    d.push(b"\rt1000\r", &mut out);
    assert!(matches!(
        &out[0],
        Event::Invalid {
            reason: "longer than any slcan line",
            ..
        }
    ));
    assert_eq!(out[1], Event::Frame(Frame::data(0x100, false, [])));
    assert_eq!(d.errors(), 1);
}

#[test]
fn a_bel_inside_a_line_cuts_it() {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    d.push(b"t12\x07t1000\r", &mut out);
    assert!(matches!(
        &out[0],
        Event::Invalid {
            reason: "cut short by BEL",
            ..
        }
    ));
    assert_eq!(out[1], Event::Nak);
    assert_eq!(out[2], Event::Frame(Frame::data(0x100, false, [])));
}

#[test]
fn encoded_frames_decode_to_themselves() {
    for f in [
        Frame::data(0, false, []),
        Frame::data(0x7FF, false, [1, 2, 3, 4, 5, 6, 7, 8]),
        Frame::data(0x1FFF_FFFF, true, [0xA5]),
    ] {
        assert_eq!(events(&encode_frame(&f).unwrap()), [Event::Frame(f)]);
    }
}
