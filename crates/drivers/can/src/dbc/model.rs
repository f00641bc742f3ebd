//! closedloop's own model of a DBC message: only what decoding and encoding need, validated once
//! when the message is built, so the codec never meets a layout it would mis-decode.

/// How a signal's bits are laid out in the frame (DBC `@1` / `@0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// `@1`, Intel: the start bit is the least significant bit; bits ascend through the frame
    /// (bit `n` is bit `n % 8` of byte `n / 8`).
    Little,
    /// `@0`, Motorola: the start bit is the most significant bit, numbered as DBC files number
    /// it (bit 7 of byte 0 is 7, bit 0 of byte 1 is 8); less significant bits follow towards
    /// bit 0 of the same byte, then bit 7 of the next byte.
    Big,
}

/// A signal's place in the message's multiplexing (simple multiplexing only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mux {
    /// Present in every frame of the message.
    Plain,
    /// The multiplexer switch (`M`): its raw value says which multiplexed signals a frame holds.
    Switch,
    /// Present only in frames whose switch has this raw value (`m<N>`).
    When(u64),
}

/// One signal of a message, as the DBC file declares it.
///
/// Fields are plain data; [`Message::new`] checks them together (every bit inside the frame, no
/// two signals of one frame sharing a bit, lengths 1–64).
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// The signal's name (the DBC long name when the file gives one).
    pub name: String,
    /// The DBC start bit: the least significant bit for [`ByteOrder::Little`], the most
    /// significant bit (in DBC numbering) for [`ByteOrder::Big`].
    pub start_bit: u16,
    /// Width of the raw field in bits, 1–64.
    pub length: u8,
    /// Intel or Motorola layout.
    pub byte_order: ByteOrder,
    /// Two's complement raw value (`-`) rather than unsigned (`+`).
    pub signed: bool,
    /// physical = raw × factor + offset.
    pub factor: f64,
    /// physical = raw × factor + offset.
    pub offset: f64,
    /// The declared physical minimum. Informational: many files leave `[0|0]`, so neither
    /// decoding nor encoding enforces it; the raw field's range is what encoding enforces.
    pub min: f64,
    /// The declared physical maximum (see `min`).
    pub max: f64,
    /// The unit, possibly empty.
    pub unit: String,
    /// Where the signal stands in the message's multiplexing.
    pub mux: Mux,
    /// Raw values the file's `VAL_` table labels as "not available" (`SNA`, `Not Available`,
    /// `N/A`, `Invalid`, …), with their label: a frame carrying one of them carries no value for
    /// this signal, never a number (see [`crate::not_available`]).
    pub not_available: Vec<(i128, String)>,
}

impl Signal {
    /// The bits this signal occupies, as frame bit numbers `8 × byte + bit` (bit 0 = least
    /// significant bit of the byte), ordered from the raw value's least significant bit up.
    ///
    /// This one function is the whole of the layout: decoding reads these bits, encoding writes
    /// them. Big endian follows the DBC (and cantools) convention: the start bit is the most
    /// significant bit in "sawtooth" numbering.
    pub fn bits(&self) -> Vec<u32> {
        let len = u32::from(self.length);
        let start = u32::from(self.start_bit);
        match self.byte_order {
            ByteOrder::Little => (start..start + len).collect(),
            ByteOrder::Big => {
                // Network order numbers bits most significant first through the whole frame:
                // byte 0 bit 7 is 0, byte 0 bit 0 is 7, byte 1 bit 7 is 8, ...
                let msb = 8 * (start / 8) + (7 - start % 8);
                (0..len)
                    .map(|k| {
                        let network = msb + (len - 1 - k);
                        8 * (network / 8) + (7 - network % 8)
                    })
                    .collect()
            }
        }
    }

    /// The raw values the field can hold, as `(min, max)` in f64 (exact: both are integers of
    /// at most 64 bits, and the upper bound is returned as the exclusive power of two).
    ///
    /// Returned as `[min, max_exclusive)` because 2⁶⁴ − 1 has no f64 of its own.
    pub(crate) fn raw_bounds(&self) -> (f64, f64) {
        let n = i32::from(self.length);
        if self.signed {
            (-(2f64.powi(n - 1)), 2f64.powi(n - 1))
        } else {
            (0.0, 2f64.powi(n))
        }
    }

    /// The physical values an encoding of this signal can reach, smallest first.
    pub fn physical_range(&self) -> (f64, f64) {
        let (lo, hi_excl) = self.raw_bounds();
        // The largest raw value is hi_excl − 1. Above 2^53 f64 cannot hold it, and rounding it
        // up gives hi_excl, which encoding refuses: the largest double below hi_excl is the end.
        let hi = if hi_excl <= 2f64.powi(53) {
            hi_excl - 1.0
        } else {
            hi_excl.next_down()
        };
        let (a, b) = (
            lo * self.factor + self.offset,
            hi * self.factor + self.offset,
        );
        if a <= b { (a, b) } else { (b, a) }
    }
}

/// Why a message cannot be built (or loaded): the offending signal, if one, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The signal at fault, or `None` when the message itself is.
    pub signal: Option<String>,
    /// What is wrong, worded for the person who wrote the plant file.
    pub reason: String,
}

impl Unsupported {
    fn message(reason: impl Into<String>) -> Unsupported {
        Unsupported {
            signal: None,
            reason: reason.into(),
        }
    }

    fn signal(signal: &str, reason: impl Into<String>) -> Unsupported {
        Unsupported {
            signal: Some(signal.to_string()),
            reason: reason.into(),
        }
    }
}

/// The longest payload closedloop models: a CAN FD frame. Classic CAN carries at most 8 bytes.
pub const MAX_SIZE: usize = 64;

/// One CAN message of a DBC file, ready to decode and encode.
///
/// # Invariants
/// - `id` fits 11 bits when `!extended`, 29 bits when `extended`; `size` ≤ [`MAX_SIZE`].
/// - Every signal has a length of 1–64 bits, all inside the first `size` bytes.
/// - Signal names are unique; at most one signal is the [`Mux::Switch`], and a switch exists
///   whenever a signal is [`Mux::When`]; the switch is not scaled (factor 1, offset 0), because
///   tools disagree on whether `m<N>` names a raw or a scaled value.
/// - No two signals that can be in the same frame (plain, switch, and one `m<N>` group) share a
///   bit, so decoding is unambiguous and encoding cannot overwrite one signal with another.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    name: String,
    id: u32,
    extended: bool,
    size: usize,
    fd: bool,
    signals: Vec<Signal>,
    switch: Option<usize>,
}

impl Message {
    /// Builds and checks a message (see the type's invariants); `fd` records that the file
    /// declares it a CAN FD frame (which a payload over 8 bytes must be anyway).
    pub fn new(
        name: &str,
        id: u32,
        extended: bool,
        size: usize,
        fd: bool,
        signals: Vec<Signal>,
    ) -> Result<Message, Unsupported> {
        check_frame(id, extended, size)?;
        let mut switch = None;
        for (i, s) in signals.iter().enumerate() {
            check_signal(&signals[..i], s, size)?;
            if s.mux == Mux::Switch {
                check_switch(switch.map(|first| &signals[first]), s)?;
                switch = Some(i);
            }
        }
        if switch.is_none()
            && let Some(s) = signals.iter().find(|s| matches!(s.mux, Mux::When(_)))
        {
            return Err(Unsupported::signal(
                &s.name,
                "multiplexed (m<N>) but the message has no multiplexer switch (M)",
            ));
        }
        check_overlaps(&signals)?;
        Ok(Message {
            name: name.to_string(),
            id,
            extended,
            size,
            fd: fd || size > 8,
            signals,
            switch,
        })
    }

    /// The message's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CAN identifier (11 or 29 bits, without the DBC's bit-31 flag).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// A 29-bit identifier rather than an 11-bit one.
    pub fn extended(&self) -> bool {
        self.extended
    }

    /// The payload length in bytes (the DBC's DLC field, as a byte count).
    pub fn size(&self) -> usize {
        self.size
    }

    /// A CAN FD frame (declared so by the file's `VFrameFormat`, or longer than 8 bytes): a
    /// classic CAN transport cannot carry it.
    pub fn fd(&self) -> bool {
        self.fd
    }

    /// All signals, in file order.
    pub fn signals(&self) -> &[Signal] {
        &self.signals
    }

    /// The signal with this name.
    pub fn signal(&self, name: &str) -> Option<&Signal> {
        self.signals.iter().find(|s| s.name == name)
    }

    /// The multiplexer switch, if the message is multiplexed.
    pub fn switch(&self) -> Option<&Signal> {
        self.switch.map(|i| &self.signals[i])
    }
}

/// Refuses an identifier too wide for its format, or a payload longer than any CAN frame.
fn check_frame(id: u32, extended: bool, size: usize) -> Result<(), Unsupported> {
    if !extended && id > 0x7FF {
        return Err(Unsupported::message(format!(
            "id {id:#x} does not fit a standard 11-bit identifier (an extended id has bit 31 set in the DBC)"
        )));
    }
    if id > 0x1FFF_FFFF {
        return Err(Unsupported::message(format!(
            "id {id:#x} does not fit a 29-bit extended identifier"
        )));
    }
    if size > MAX_SIZE {
        return Err(Unsupported::message(format!(
            "{size} bytes is longer than any CAN frame ({MAX_SIZE} bytes for CAN FD)"
        )));
    }
    Ok(())
}

/// Refuses a signal that repeats the name of one `before` it, is not 1–64 bits long, has a
/// factor or offset that is not finite, or has a bit outside the `size`-byte frame.
fn check_signal(before: &[Signal], s: &Signal, size: usize) -> Result<(), Unsupported> {
    if before.iter().any(|o| o.name == s.name) {
        return Err(Unsupported::signal(&s.name, "the name is used twice"));
    }
    if s.length == 0 || s.length > 64 {
        return Err(Unsupported::signal(
            &s.name,
            format!("{} bits: signals must be 1 to 64 bits long", s.length),
        ));
    }
    if !(s.factor.is_finite() && s.offset.is_finite()) {
        return Err(Unsupported::signal(
            &s.name,
            "factor and offset must be finite",
        ));
    }
    let frame_bits = 8 * size as u32;
    if let Some(&outside) = s.bits().iter().find(|&&b| b >= frame_bits) {
        return Err(Unsupported::signal(
            &s.name,
            format!(
                "bit {outside} (byte {}) lies outside the {size}-byte message (start bit {}, {} bits, {:?} endian)",
                outside / 8,
                s.start_bit,
                s.length,
                s.byte_order
            ),
        ));
    }
    Ok(())
}

/// Refuses `switch_signal` as a multiplexer switch when the message already has one
/// (`earlier`) or when it is scaled: tools disagree on whether `m<N>` names a raw or a scaled
/// value, so only an unscaled switch is unambiguous.
fn check_switch(earlier: Option<&Signal>, switch_signal: &Signal) -> Result<(), Unsupported> {
    if let Some(first) = earlier {
        return Err(Unsupported::signal(
            &switch_signal.name,
            format!(
                "a second multiplexer switch besides {} (extended multiplexing is not supported)",
                first.name
            ),
        ));
    }
    if switch_signal.factor != 1.0 || switch_signal.offset != 0.0 {
        return Err(Unsupported::signal(
            &switch_signal.name,
            "a scaled multiplexer switch (factor must be 1, offset 0) is not supported",
        ));
    }
    Ok(())
}

/// Refuses two signals that can be in the same frame and share a bit.
fn check_overlaps(signals: &[Signal]) -> Result<(), Unsupported> {
    let together = |a: Mux, b: Mux| match (a, b) {
        (Mux::When(x), Mux::When(y)) => x == y,
        _ => true,
    };
    let bits: Vec<Vec<u32>> = signals.iter().map(Signal::bits).collect();
    for (i, a) in signals.iter().enumerate() {
        for (j, b) in signals.iter().enumerate().take(i) {
            if !together(a.mux, b.mux) {
                continue;
            }
            if let Some(shared) = bits[i].iter().find(|bit| bits[j].contains(bit)) {
                return Err(Unsupported::signal(
                    &a.name,
                    format!("shares bit {shared} with signal {}", b.name),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
