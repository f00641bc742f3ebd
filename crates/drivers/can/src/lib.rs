//! CAN for closedloop (docs/plant-file.md `kind = "can"`): frames decoded through a DBC file into
//! named signals, and the buses that carry them.
//!
//! - [`Dbc`] loads a DBC file (parsed by `can-dbc`) into closedloop's own [`Message`] model.
//!   What closedloop does not decode exactly — IEEE float signals, extended multiplexing, a
//!   scaled multiplexer switch, ids or layouts that do not fit — is refused per message with an
//!   error naming the file, the message and the signal, never mis-decoded.
//! - [`decode`] and [`encode`] are written here, bit for bit as cantools lays signals out (the
//!   Python test `tests/python/test_dbc_cantools.py` holds them to that). Encoding never
//!   saturates: a value the field cannot hold is an [`EncodeError`]. [`read`] is the one reading
//!   of a received frame every consumer uses: each signal a value, or not available in this
//!   frame — a raw value the DBC labels not available ([`not_available`]) is no value.
//! - [`CanBus`] is one handle over every transport: [`slcan`] adapters on a serial port, and
//!   SocketCAN with the `socketcan` cargo feature. A transport failure ends the bus with an error
//!   that every waiting caller receives; nothing hangs.
//!
//! - [`CanPort`] keeps one interface open for every device on it (reopened after a failure with
//!   backoff from 100 ms up to 5 s), numbers its frames as they arrive, and returns a sent
//!   frame's fence.
//!
//! CAN is push, like MQTT: this crate does not implement the register-oriented
//! `closedloop_contract::Driver`; the CAN link of `closedloop-connect` listens to a [`CanPort`],
//! decodes each frame of a known [`Message`], and sends encoded frames through the port.

mod bus;
mod codec;
mod contract;
pub mod dbc;
mod error;
mod frame;
mod port;
pub mod slcan;
#[cfg(feature = "socketcan")]
mod socketcan;

pub use bus::{ANSWER_TIMEOUT, CanBus, FRAME_BUFFER, Frames, Interface, SEND_QUEUE, Stats};
pub use codec::{Field, decode, decode_signal, encode, not_available, read};
pub use contract::write_error;
pub use dbc::{ByteOrder, Dbc, Message, Mux, Signal};
pub use error::{BusError, DbcError, EncodeError, FrameError};
pub use frame::Frame;
pub use port::{CanPort, Received};
