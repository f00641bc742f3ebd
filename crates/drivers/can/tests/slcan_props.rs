//! Properties of the slcan line codec (`slcan::codec`: `encode_frame`, `Decoder`) over generated
//! frames and read sizes (issue 14, "proptest round trips for every codec").
//!
//! Guarded:
//! - a frame classic CAN can carry (11- or 29-bit id, 0–8 bytes, data or remote) encodes to a
//!   line that decodes to that frame, however the line is split across reads, in upper or lower
//!   case hex, with or without an adapter's 4-digit timestamp;
//! - a frame classic CAN cannot carry is refused by `encode_frame`, never truncated to fit;
//! - a line cut short is reported as invalid, never read as a shorter frame.
//!
//! Why: slcan carries no checksum, so the codec's own checks are all that stand between a
//! half-received line and a frame with the wrong id, length or data.

use closedloop_can::slcan::codec::{Decoder, Event, encode_frame};
use closedloop_can::{Frame, FrameError};
use proptest::collection::vec;
use proptest::prelude::*;

/// A frame classic CAN carries. A remote frame's data is zeros: only its length is sent.
fn frame() -> impl Strategy<Value = Frame> {
    (
        any::<bool>(),
        any::<u32>(),
        any::<bool>(),
        vec(any::<u8>(), 0..=8),
    )
        .prop_map(|(extended, id, rtr, data)| Frame {
            id: id & if extended { 0x1FFF_FFFF } else { 0x7FF },
            extended,
            rtr,
            data: if rtr { vec![0; data.len()] } else { data },
        })
}

/// Feeds `bytes` to a fresh decoder in reads of the given sizes (cycled); returns the events
/// and the decoder's error count.
fn feed(bytes: &[u8], sizes: &[usize]) -> (Vec<Event>, u64) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    let mut rest = bytes;
    for &n in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(n.clamp(1, rest.len()));
        d.push(chunk, &mut out);
        rest = tail;
    }
    (out, d.errors())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn frames_round_trip_across_any_read_sizes(
        frames in vec(frame(), 1..=8),
        sizes in vec(1usize..=40, 1..=8),
    ) {
        let mut line = Vec::new();
        for f in &frames {
            line.extend(encode_frame(f).expect("a frame classic CAN carries"));
        }
        let (events, errors) = feed(&line, &sizes);
        let want: Vec<Event> = frames.into_iter().map(Event::Frame).collect();
        prop_assert_eq!(events, want);
        prop_assert_eq!(errors, 0);
    }

    /// What adapters add or change: lower-case hex, a millisecond timestamp, a `\n` after `\r`.
    #[test]
    fn adapter_variants_decode_to_the_same_frame(
        f in frame(),
        lower in any::<bool>(),
        stamp in proptest::option::of(0u16..=0xFFFF),
        newline in any::<bool>(),
    ) {
        let mut line = encode_frame(&f).expect("a frame classic CAN carries");
        line.pop(); // the '\r'
        if lower {
            // The kind letter stays: its case says standard or extended.
            line[1..].make_ascii_lowercase();
        }
        if let Some(ms) = stamp {
            line.extend(format!("{ms:04X}").bytes());
        }
        line.extend(if newline { &b"\r\n"[..] } else { b"\r" });
        prop_assert_eq!(feed(&line, &[line.len()]), (vec![Event::Frame(f)], 0));
    }

    /// A line that lost its end (a dropped byte, a read cut off by a reconnect) is counted as
    /// invalid and the next line is read normally.
    #[test]
    fn a_line_cut_short_is_never_a_frame(
        f in frame(),
        g in frame(),
        cut in any::<prop::sample::Index>(),
    ) {
        let line = encode_frame(&f).expect("a frame classic CAN carries");
        let kept = cut.index(line.len() - 1); // strictly before the '\r'
        let mut bytes = line[..kept].to_vec();
        bytes.push(b'\r');
        bytes.extend(encode_frame(&g).expect("a frame classic CAN carries"));
        let (events, errors) = feed(&bytes, &[bytes.len()]);
        let first_is_invalid = matches!(events.first(), Some(Event::Invalid { .. }))
            || (kept == 0 && events.first() == Some(&Event::Ack));
        prop_assert!(first_is_invalid, "{:?} cut to {}: {:?}", f, kept, events);
        prop_assert_eq!(events.last(), Some(&Event::Frame(g)));
        prop_assert_eq!(errors, u64::from(kept > 0));
    }

    /// An id too wide for its format, or more than 8 bytes, is refused: never masked or cut.
    #[test]
    fn frames_classic_can_cannot_carry_are_refused(
        extended in any::<bool>(),
        id in any::<u32>(),
        data in vec(any::<u8>(), 0..=16),
    ) {
        let max = if extended { 0x1FFF_FFFF } else { 0x7FF };
        let f = Frame { id, extended, rtr: false, data: data.clone() };
        let got = encode_frame(&f);
        if id > max {
            prop_assert_eq!(got, Err(FrameError::Id { id, extended }));
        } else if data.len() > 8 {
            prop_assert_eq!(got, Err(FrameError::TooLong { len: data.len() }));
        } else {
            prop_assert!(got.is_ok());
        }
    }
}
