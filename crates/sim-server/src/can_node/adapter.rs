//! The adapter's side of slcan (Lawicel), pure: the host's bytes in, the adapter's answers and
//! the frames to put on the bus out; bus frames in, the lines that report them out. No I/O and
//! no clock (the caller passes the milliseconds a timestamp needs), so every rule is tested byte
//! by byte below.
//!
//! What a host sees (Lawicel's CAN232/CANUSB manual; `\r` is OK, BEL `\x07` is an error):
//!
//! | host sends | channel closed | channel open |
//! |---|---|---|
//! | `S0`–`S8`, `sxxyy` (bitrate) | `\r` | BEL |
//! | `O` (open), `L` (open listen-only) | `\r`, now open | BEL |
//! | `C` (close) | BEL | `\r`, now closed |
//! | `tiiildd..`, `riiil` | BEL | `z\r`, the frame goes on the bus (BEL when listen-only) |
//! | `Tiiiiiiiildd..`, `Riiiiiiiil` | BEL | `Z\r`, likewise |
//! | `Z0` / `Z1` (timestamps off / on) | `\r` | BEL |
//! | `Mxxxxxxxx`, `mxxxxxxxx` (acceptance filter) | `\r` (accepted, not applied) | BEL |
//! | `V`, `N`, `F` | `V1013\r`, `NCL01\r`, `F00\r` | the same |
//! | an empty line | `\r` | `\r` |
//! | anything else, or a line longer than [`MAX_LINE`] | BEL | BEL |
//!
//! Frames from the bus are reported as `t`/`T`/`r`/`R` lines only while the channel is open
//! (listen-only included), with a 4-digit millisecond timestamp (0–59999) when `Z1` asked.

use closedloop_can::Frame;
use closedloop_can::slcan::codec::{self, Event};

/// The longest host line the adapter reads (the longest valid one, `T` + 8 + 1 + 16, is 26
/// bytes). Longer runs of bytes without `\r` are answered with one BEL at their `\r`.
pub(crate) const MAX_LINE: usize = 64;
/// The error answer.
const BEL: u8 = 0x07;
/// Timestamps count milliseconds modulo this (Lawicel's wrap at 60 s).
const TIMESTAMP_WRAP: u64 = 60_000;

/// Whether, and how, the CAN channel is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Channel {
    /// After power-up and after `C`: only configuration commands are taken.
    #[default]
    Closed,
    /// After `O`: frames go both ways.
    Open,
    /// After `L`: frames are reported, none are sent.
    ListenOnly,
}

/// What the adapter does with some of the host's bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Fed {
    /// The answers to write back to the host, in order.
    pub reply: Vec<u8>,
    /// The frames the host transmitted, to put on the bus.
    pub frames: Vec<Frame>,
}

/// The simulated adapter's protocol state.
///
/// # Invariants
/// `line` holds the bytes since the last `\r`, at most [`MAX_LINE`] of them; when more arrive,
/// `overlong` is set and bytes are dropped until the next `\r`.
#[derive(Debug, Default)]
pub(crate) struct Adapter {
    channel: Channel,
    timestamps: bool,
    line: Vec<u8>,
    overlong: bool,
}

impl Adapter {
    /// The channel's state, for logs and tests.
    pub(crate) fn channel(&self) -> Channel {
        self.channel
    }

    /// Takes bytes from the host as they came (lines may be split across calls).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Fed {
        let mut fed = Fed::default();
        for &b in bytes {
            match b {
                b'\r' => {
                    if self.overlong {
                        fed.reply.push(BEL);
                    } else {
                        let line = std::mem::take(&mut self.line);
                        self.on_line(&line, &mut fed);
                    }
                    self.line.clear();
                    self.overlong = false;
                }
                // Terminals send "\r\n": a newline starting a line is nothing.
                b'\n' if self.line.is_empty() && !self.overlong => {}
                _ if self.line.len() >= MAX_LINE => self.overlong = true,
                _ => self.line.push(b),
            }
        }
        fed
    }

    /// The line that reports a bus frame to the host, or `None` while the channel is closed (or
    /// for a frame slcan cannot carry, which no node builds). `now_ms` is the adapter's clock.
    pub(crate) fn report(&self, frame: &Frame, now_ms: u64) -> Option<Vec<u8>> {
        if self.channel == Channel::Closed {
            return None;
        }
        let mut line = codec::encode_frame(frame).ok()?;
        if self.timestamps {
            line.pop();
            line.extend_from_slice(format!("{:04X}\r", now_ms % TIMESTAMP_WRAP).as_bytes());
        }
        Some(line)
    }

    fn on_line(&mut self, line: &[u8], fed: &mut Fed) {
        let closed = self.channel == Channel::Closed;
        let hex =
            |digits: &[u8], n: usize| digits.len() == n && digits.iter().all(u8::is_ascii_hexdigit);
        let ok: Result<&[u8], ()> = match line {
            [] => Ok(b"\r"),
            [b'S', b'0'..=b'8'] if closed => Ok(b"\r"),
            [b's', rest @ ..] if closed && hex(rest, 4) => Ok(b"\r"),
            [b'M' | b'm', rest @ ..] if closed && hex(rest, 8) => Ok(b"\r"),
            [b'Z', b'0' | b'1'] if closed => {
                self.timestamps = line[1] == b'1';
                Ok(b"\r")
            }
            [b'O'] if closed => {
                self.channel = Channel::Open;
                Ok(b"\r")
            }
            [b'L'] if closed => {
                self.channel = Channel::ListenOnly;
                Ok(b"\r")
            }
            [b'C'] if !closed => {
                self.channel = Channel::Closed;
                Ok(b"\r")
            }
            [b'V'] => Ok(b"V1013\r"),
            [b'N'] => Ok(b"NCL01\r"),
            [b'F'] => Ok(b"F00\r"),
            [k @ (b't' | b'T' | b'r' | b'R'), ..] if self.channel == Channel::Open => {
                match codec::parse_line(line) {
                    Event::Frame(frame) => {
                        fed.frames.push(frame);
                        Ok(if k.is_ascii_lowercase() {
                            b"z\r"
                        } else {
                            b"Z\r"
                        })
                    }
                    _ => Err(()),
                }
            }
            _ => Err(()),
        };
        match ok {
            Ok(answer) => fed.reply.extend_from_slice(answer),
            Err(()) => fed.reply.push(BEL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(a: &mut Adapter, bytes: &[u8]) -> (Vec<u8>, Vec<Frame>) {
        let fed = a.feed(bytes);
        (fed.reply, fed.frames)
    }

    #[test]
    fn the_host_handshake_is_answered_as_a_lawicel_adapter_would() {
        let mut a = Adapter::default();
        // closedloop's CanBus closes first, in case a session left the channel open.
        assert_eq!(feed(&mut a, b"C\r"), (b"\x07".to_vec(), vec![]));
        assert_eq!(feed(&mut a, b"S6\r"), (b"\r".to_vec(), vec![]));
        assert_eq!(feed(&mut a, b"O\r"), (b"\r".to_vec(), vec![]));
        assert_eq!(a.channel(), Channel::Open);
        assert_eq!(
            feed(&mut a, b"S6\r").0,
            b"\x07",
            "no bitrate change while open"
        );
        assert_eq!(feed(&mut a, b"O\r").0, b"\x07", "already open");
        assert_eq!(feed(&mut a, b"C\r").0, b"\r");
        assert_eq!(a.channel(), Channel::Closed);
        assert_eq!(feed(&mut a, b"S9\r").0, b"\x07", "no such bitrate code");
        assert_eq!(feed(&mut a, b"s031C\r").0, b"\r");
        assert_eq!(feed(&mut a, b"s03\r").0, b"\x07");
        assert_eq!(feed(&mut a, b"M00000000\rm FFFFFFFF\r").0, b"\r\x07");
    }

    #[test]
    fn frames_are_taken_only_while_open_and_acked_by_format() {
        let mut a = Adapter::default();
        assert_eq!(feed(&mut a, b"t1000\r"), (b"\x07".to_vec(), vec![]));
        feed(&mut a, b"O\r");
        let (reply, frames) = feed(&mut a, b"t10020102\rT18DAF1101AA\r");
        assert_eq!(reply, b"z\rZ\r");
        assert_eq!(
            frames,
            [
                Frame::data(0x100, false, [0x01, 0x02]),
                Frame::data(0x18DA_F110, true, [0xAA]),
            ]
        );
        let (reply, frames) = feed(&mut a, b"r1232\r");
        assert_eq!(reply, b"z\r");
        assert!(frames[0].rtr && frames[0].data.len() == 2);
        assert_eq!(feed(&mut a, b"t80000\r"), (b"\x07".to_vec(), vec![]));
        assert_eq!(feed(&mut a, b"t1002AA\r"), (b"\x07".to_vec(), vec![]));
        feed(&mut a, b"C\rL\r");
        assert_eq!(a.channel(), Channel::ListenOnly);
        assert_eq!(feed(&mut a, b"t1000\r"), (b"\x07".to_vec(), vec![]));
    }

    #[test]
    fn lines_split_across_reads_and_crlf_are_read_whole() {
        let mut a = Adapter::default();
        let mut reply = Vec::new();
        let mut frames = Vec::new();
        for chunk in [&b"S"[..], b"6\r\nO", b"\r\nt1", b"0010", b"1\r"] {
            let (r, f) = feed(&mut a, chunk);
            reply.extend(r);
            frames.extend(f);
        }
        assert_eq!(reply, b"\r\rz\r");
        assert_eq!(frames, [Frame::data(0x100, false, [0x01])]);
    }

    #[test]
    fn garbage_and_overlong_lines_get_one_bel_each() {
        let mut a = Adapter::default();
        assert_eq!(feed(&mut a, b"hello\r\x00\r").0, b"\x07\x07");
        assert!(feed(&mut a, &[b'7'; 200]).0.is_empty());
        assert_eq!(feed(&mut a, b"\rV\r").0, b"\x07V1013\r");
        assert_eq!(feed(&mut a, b"\r").0, b"\r");
        assert_eq!(feed(&mut a, b"N\rF\r").0, b"NCL01\rF00\r");
    }

    #[test]
    fn bus_frames_are_reported_only_while_open_with_timestamps_on_request() {
        let mut a = Adapter::default();
        let f = Frame::data(0x101, false, [0x03]);
        assert_eq!(a.report(&f, 5), None);
        feed(&mut a, b"Z1\rO\r");
        assert_eq!(a.report(&f, 60_001).unwrap(), b"t1011030001\r");
        feed(&mut a, b"C\rZ0\rL\r");
        assert_eq!(a.report(&f, 7).unwrap(), b"t101103\r");
        feed(&mut a, b"C\r");
        assert_eq!(a.report(&f, 7), None);
        assert_eq!(feed(&mut a, b"Z1\r").0, b"\r");
    }
}
