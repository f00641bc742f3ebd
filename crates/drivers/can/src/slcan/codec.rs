//! The slcan (Lawicel) serial-line protocol, pure: bytes in, events out; frames in, bytes out.
//! No I/O, so every rule is tested byte by byte below.
//!
//! Host → adapter: `Sn\r` (bitrate), `O\r` (open), `C\r` (close), `tIIILDD..\r` (standard data
//! frame), `TIIIIIIIILDD..\r` (extended), `rIIIL\r` / `RIIIIIIIIL\r` (remote frames).
//! Adapter → host: `\r` (OK), BEL `\x07` (error), `z\r` / `Z\r` (OK to a transmit, in Lawicel's
//! own firmware), received frames in the same `t`/`T`/`r`/`R` form, optionally followed by a
//! 4-hex-digit millisecond timestamp, and replies such as `V1013\r`.

use crate::error::FrameError;
use crate::frame::Frame;

/// Opens the channel (after a bitrate command).
pub const OPEN: &[u8] = b"O\r";
/// Closes the channel; sent first when opening, in case an earlier session left it open.
pub const CLOSE: &[u8] = b"C\r";
/// The longest line the decoder keeps (the longest valid one, `T` + 8 + 1 + 16 + a 4-digit
/// timestamp, is 30 bytes). A longer run of bytes without `\r` is discarded as one error.
pub const MAX_LINE: usize = 64;

/// The `Sn\r` command for a bitrate in bit/s, or `None` if slcan has no code for it.
pub fn bitrate_command(bitrate: u32) -> Option<&'static [u8]> {
    Some(match bitrate {
        10_000 => b"S0\r",
        20_000 => b"S1\r",
        50_000 => b"S2\r",
        100_000 => b"S3\r",
        125_000 => b"S4\r",
        250_000 => b"S5\r",
        500_000 => b"S6\r",
        800_000 => b"S7\r",
        1_000_000 => b"S8\r",
        _ => return None,
    })
}

/// The line that transmits `frame`.
pub fn encode_frame(frame: &Frame) -> Result<Vec<u8>, FrameError> {
    frame.validate()?;
    let mut out = Vec::with_capacity(32);
    let kind = match (frame.extended, frame.rtr) {
        (false, false) => b't',
        (true, false) => b'T',
        (false, true) => b'r',
        (true, true) => b'R',
    };
    out.push(kind);
    let id = if frame.extended {
        format!("{:08X}", frame.id)
    } else {
        format!("{:03X}", frame.id)
    };
    out.extend_from_slice(id.as_bytes());
    // validate() bounds the length to 8, one hex digit.
    out.push(b'0' + frame.data.len() as u8);
    if !frame.rtr {
        for b in &frame.data {
            out.extend_from_slice(format!("{b:02X}").as_bytes());
        }
    }
    out.push(b'\r');
    Ok(out)
}

/// What one line (or BEL) from the adapter means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A frame received from the bus.
    Frame(Frame),
    /// `\r`, `z\r` or `Z\r`: the adapter accepted the last command or frame.
    Ack,
    /// BEL: the adapter refused the last command or frame.
    Nak,
    /// Any other well-formed reply (`V1013`, `N0001`, `F00`), as text.
    Reply(String),
    /// A line that is none of the above (noise, a half line after reconnecting, an unknown
    /// extension); the decoder counts it and resynchronises at the next `\r`.
    Invalid {
        /// The line, escaped for logs.
        line: String,
        /// Why it was rejected.
        reason: &'static str,
    },
}

/// Splits the adapter's byte stream into [`Event`]s, across reads of any size.
///
/// # Invariants
/// `line` holds the bytes since the last `\r` or BEL, at most [`MAX_LINE`] of them; when more
/// arrive, `overlong` is set and bytes are dropped until the next `\r`.
#[derive(Debug, Default)]
pub struct Decoder {
    line: Vec<u8>,
    overlong: bool,
    errors: u64,
}

impl Decoder {
    /// A decoder at the start of a line.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Feeds bytes as they came; complete events are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        for &b in bytes {
            match b {
                b'\r' => {
                    let event = if self.overlong {
                        invalid(&self.line, "longer than any slcan line")
                    } else {
                        parse_line(&self.line)
                    };
                    self.emit(event, out);
                    self.line.clear();
                    self.overlong = false;
                }
                0x07 => {
                    if !self.line.is_empty() || self.overlong {
                        let e = invalid(&self.line, "cut short by BEL");
                        self.emit(e, out);
                        self.line.clear();
                        self.overlong = false;
                    }
                    out.push(Event::Nak);
                }
                // Some adapters end lines with "\r\n": a newline starting a line is nothing.
                b'\n' if self.line.is_empty() && !self.overlong => {}
                _ if self.line.len() >= MAX_LINE => self.overlong = true,
                _ => self.line.push(b),
            }
        }
    }

    /// How many invalid lines were seen so far.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    fn emit(&mut self, event: Event, out: &mut Vec<Event>) {
        if matches!(event, Event::Invalid { .. }) {
            self.errors += 1;
        }
        out.push(event);
    }
}

fn invalid(line: &[u8], reason: &'static str) -> Event {
    Event::Invalid {
        line: line.escape_ascii().to_string(),
        reason,
    }
}

/// Parses one line (without its `\r`).
pub fn parse_line(line: &[u8]) -> Event {
    match line.first() {
        None => Event::Ack,
        Some(b'z' | b'Z') if line.len() == 1 => Event::Ack,
        Some(&k @ (b't' | b'T' | b'r' | b'R')) => {
            parse_frame(k, &line[1..]).unwrap_or_else(|r| invalid(line, r))
        }
        Some(b'V' | b'v' | b'N' | b'F') if line.iter().all(u8::is_ascii_alphanumeric) => {
            Event::Reply(String::from_utf8_lossy(line).into_owned())
        }
        Some(_) => invalid(line, "not an slcan reply"),
    }
}

fn parse_frame(kind: u8, rest: &[u8]) -> Result<Event, &'static str> {
    let extended = kind.is_ascii_uppercase();
    let rtr = kind.eq_ignore_ascii_case(&b'r');
    let id_len = if extended { 8 } else { 3 };
    if rest.len() < id_len + 1 {
        return Err("too short for a frame");
    }
    let id = hex(&rest[..id_len]).ok_or("identifier is not hex")? as u32;
    let max = if extended { 0x1FFF_FFFF } else { 0x7FF };
    if id > max {
        return Err("identifier out of range");
    }
    let dlc = match rest[id_len] {
        d @ b'0'..=b'8' => usize::from(d - b'0'),
        _ => return Err("length is not 0-8"),
    };
    let rest = &rest[id_len + 1..];
    let payload_len = if rtr { 0 } else { 2 * dlc };
    // After the payload: nothing, or a 4-hex-digit timestamp (adapters with timestamps on).
    let tail = rest
        .len()
        .checked_sub(payload_len)
        .ok_or("payload shorter than its length")?;
    if tail != 0 && tail != 4 {
        return Err("payload does not match its length");
    }
    hex(&rest[payload_len..]).ok_or("timestamp is not hex")?;
    let data = if rtr {
        vec![0; dlc]
    } else {
        rest[..payload_len]
            .chunks(2)
            .map(|p| hex(p).map(|v| v as u8))
            .collect::<Option<Vec<u8>>>()
            .ok_or("payload is not hex")?
    };
    Ok(Event::Frame(Frame {
        id,
        extended,
        rtr,
        data,
    }))
}

/// Parses up to 8 hex digits (either case); `None` if any is not hex. Empty is 0.
fn hex(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | u64::from(v))
    })
}

#[cfg(test)]
mod tests;
