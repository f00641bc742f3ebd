//! Errors of the CAN crate: loading a DBC file, encoding signal values, talking to a bus.

use thiserror::Error;

/// Why a DBC file, or one of its messages, cannot be used. Every variant names the file, and the
/// message and signal where one is at fault, so the plant file's author can find the line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DbcError {
    /// The file could not be read.
    #[error("{file}: cannot read: {reason}")]
    Read {
        /// The file as given.
        file: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is not DBC syntax that `can-dbc` parses.
    #[error("{file}: cannot parse as DBC: {reason}")]
    Parse {
        /// The file as given.
        file: String,
        /// The parser's message, with line and column.
        reason: String,
    },
    /// A message closedloop does not decode (its layout or id does not fit, or it is a
    /// duplicate).
    #[error("{file}: message {message}: {reason}")]
    Message {
        /// The file as given.
        file: String,
        /// The message's name.
        message: String,
        /// What is wrong.
        reason: String,
    },
    /// A message refused because of one of its signals (a float, extended multiplexing, a bit
    /// outside the frame, an overlap).
    #[error("{file}: message {message}, signal {signal}: {reason}")]
    Signal {
        /// The file as given.
        file: String,
        /// The message's name.
        message: String,
        /// The signal's name.
        signal: String,
        /// What is wrong.
        reason: String,
    },
    /// The file has no message of that name.
    #[error("{file}: no message named {message}")]
    UnknownMessage {
        /// The file as given.
        file: String,
        /// The name asked for.
        message: String,
    },
}

/// Why signal values could not be encoded into a frame. Nothing is ever saturated or guessed:
/// each variant names the message and the signal.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A value for a signal the message does not have.
    #[error("message {message} has no signal {signal}")]
    UnknownSignal {
        /// The message's name.
        message: String,
        /// The name given.
        signal: String,
    },
    /// A signal the frame must carry has no value.
    #[error("message {message}: no value for signal {signal}")]
    Missing {
        /// The message's name.
        message: String,
        /// The signal without a value.
        signal: String,
    },
    /// A multiplexed signal given while the switch selects other signals.
    #[error(
        "message {message}: signal {signal} is sent only when {switch} = {when}, but {switch} = {value}"
    )]
    NotSelected {
        /// The message's name.
        message: String,
        /// The multiplexed signal.
        signal: String,
        /// The multiplexer switch.
        switch: String,
        /// The switch value that selects `signal`.
        when: u64,
        /// The switch value given.
        value: f64,
    },
    /// The switch value selects no multiplexed signals of the file.
    #[error(
        "message {message}: {switch} = {value} selects no multiplexed signals (the file defines {defined})"
    )]
    UnknownMuxValue {
        /// The message's name.
        message: String,
        /// The multiplexer switch.
        switch: String,
        /// The value given.
        value: f64,
        /// The values the file defines, comma-separated.
        defined: String,
    },
    /// NaN has no raw value.
    #[error("message {message}, signal {signal}: NaN cannot be encoded")]
    NotANumber {
        /// The message's name.
        message: String,
        /// The signal.
        signal: String,
    },
    /// The value's raw form does not fit the signal's bit field.
    #[error(
        "message {message}, signal {signal}: {value} is outside what the field can hold ({min} to {max})"
    )]
    OutOfRange {
        /// The message's name.
        message: String,
        /// The signal.
        signal: String,
        /// The physical value given.
        value: f64,
        /// The smallest physical value the field can hold.
        min: f64,
        /// The largest physical value the field can hold.
        max: f64,
    },
}

/// A frame that the CAN format (or the transport) cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The identifier does not fit 11 (standard) or 29 (extended) bits.
    #[error("id {id:#x} does not fit {}", if *extended { "a 29-bit extended identifier" } else { "an 11-bit standard identifier" })]
    Id {
        /// The identifier.
        id: u32,
        /// Whether it was meant as extended.
        extended: bool,
    },
    /// More data than a classic CAN frame holds.
    #[error("{len} data bytes: a classic CAN frame carries at most 8")]
    TooLong {
        /// The payload length.
        len: usize,
    },
}

/// Why a CAN bus operation did not happen. Kept apart: "the adapter said no"
/// ([`BusError::Refused`]) is an answer; the others are not.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BusError {
    /// The `interface` string is not `socketcan:NAME` or `slcan:PATH`, or names a transport this
    /// build lacks.
    #[error("interface \"{interface}\": {reason}")]
    Interface {
        /// The string as written.
        interface: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The bitrate is not one the transport can set.
    #[error(
        "bitrate {0}: slcan adapters offer 10000, 20000, 50000, 100000, 125000, 250000, 500000, 800000 and 1000000"
    )]
    Bitrate(u32),
    /// The port or socket could not be opened.
    #[error("{interface}: cannot open: {reason}")]
    Open {
        /// What was opened.
        interface: String,
        /// The operating system's or adapter's reason.
        reason: String,
    },
    /// The frame cannot be sent as given.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The adapter answered a command or frame with an error (slcan's BEL).
    #[error("{interface}: the adapter refused {what}")]
    Refused {
        /// The adapter.
        interface: String,
        /// The command or frame refused.
        what: String,
    },
    /// The adapter did not answer within the bound; the link was closed so that later answers
    /// cannot be taken for answers to later requests.
    #[error("{interface}: no answer from the adapter to {what} within {ms} ms")]
    NoAnswer {
        /// The adapter.
        interface: String,
        /// What went unanswered.
        what: String,
        /// The bound.
        ms: u64,
    },
    /// The link is gone (port unplugged or closed, socket error, or the bus handle shut down).
    /// The bus must be opened again.
    #[error("{interface}: link closed: {reason}")]
    Closed {
        /// The adapter or socket.
        interface: String,
        /// Why.
        reason: String,
    },
}
