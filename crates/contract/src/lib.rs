//! What every protocol of closedloop shares: the register-level [`Driver`] of polled devices,
//! the register codec, the contract's codes, numbered samples, and typed device addresses.
//!
//! Register devices implement [`Driver`]: the in-process simulator (`closedloop_sim::SimDevice`)
//! and Modbus TCP and RTU units (`closedloop_modbus::ModbusDevice`). Their link reads blocks of
//! bits or registers, writes them, and publishes the answers as samples; keeping this seam narrow
//! is what lets the simulator stand in for a Modbus unit in every engine test.
//!
//! [`Driver`] is one kind of device, not the seam of every protocol: the engine reaches every
//! device, register-based or not, through `closedloop_link::Link`. A register device's link
//! (`closedloop_connect::registers::RegisterLink`) polls its `Driver`; MQTT, OPC UA and CAN links
//! listen to what their devices push.
//!
//! [`codec`] is the pure register codec (types, word order, byte swap, bit, scale, offset; refuses,
//! never saturates) that the plant loader, the register link and `closedloop check` share.
//!
//! [`contract`] holds the contract's statuses and error codes, [`sample`] what a device's reads
//! become (numbered values and liveness) and the channel that publishes them: protocol-neutral,
//! so a protocol crate can publish samples and name error codes without the engine.
//!
//! [`sample`] also holds the one rule of which values may be decided on. A signal's
//! [`sample::Reading`] keeps its last good value apart from a [`sample::Failure`] of its last read
//! (the contract's code, the device's answer, since when). Every decoder's value passes
//! `Snapshot::record`, which turns a number that is no number (NaN) into `Snapshot::no_value`; such
//! a failure is unreadable to every consumer, though admission does not refuse on it. A consumer
//! asks `Snapshot::read_after` (a value read after a write's fence: the judge, `stopped_when`),
//! `Snapshot::usable` or `usable_values` with a [`sample::Freshness`] (`requires`, alarms, the
//! scope of expressions), `readable_values` (the judge's and a stop plan's scope: there every value
//! is fenced by number, and a stop is written whatever the values' age), or `readings` and
//! `unreadable` (views, each value with its own age). With an unusable value an alarm's `when`
//! holds and its `clear_when` does not, `requires` refuses `INTERLOCK`, and views show the value
//! with its age and the failure. A transport failure is no answer rather than a refusal: it ages
//! the values and, past the liveness window, makes the device offline.
//!
//! [`endpoint`] says where a device is reached (a broker URL, an OPC UA security mode, a CAN
//! interface): parsed once by the plant loader, taken as typed values by the protocol crates.
//!
//! Answers have two layers, as in tokio-modbus: the outer `Result` says whether the device could
//! be reached at all ([`TransportError`]); the inner one whether the device accepted the request
//! ([`Exception`]). "The device said no" and "nothing answered" lead to different error codes and
//! different liveness verdicts, so they must never be folded together.

pub mod address;
pub mod calendar;
pub mod codec;
pub mod contract;
pub mod endpoint;
pub mod error;
pub mod sample;

use std::future::Future;
use std::pin::Pin;

pub use address::{Area, Data, Write};
pub use codec::{EncodeError, Encoding, Value, ValueType, WordOrder};
pub use contract::{ErrorCode, Status};
pub use endpoint::{BrokerUrl, CanInterface, OpcuaSecurity, Parity};
pub use error::{Exception, TransportError};

/// A boxed future, so that drivers can be used as `dyn Driver`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The two-layer answer of a device: reached or not, then accepted or refused.
pub type Answer<T> = Result<Result<T, Exception>, TransportError>;

/// One register device (sim, Modbus): something that answers register-level reads and writes.
/// MQTT, OPC UA and CAN devices are not `Driver`s (see the crate doc).
///
/// Implementations do not apply request timeouts of their own unless their protocol demands it:
/// the caller (the register link, a raw tool) wraps every call in the device's `timeout_ms`, so a device that never answers
/// (powered off, or a zombie whose TCP stack accepts and then says nothing) is simply a future
/// that never resolves. Dropping the future must be safe at any point.
pub trait Driver: Send + Sync + 'static {
    /// Reads `count` consecutive items of `area` starting at the 0-based PDU address `start`.
    ///
    /// Coils and discrete inputs answer [`Data::Bits`]; registers answer [`Data::Words`], each of
    /// exactly `count` items.
    fn read(&self, area: Area, start: u16, count: u16) -> BoxFuture<'_, Answer<Data>>;

    /// Writes one block of coils or holding registers in a single request.
    fn write(&self, write: Write) -> BoxFuture<'_, Answer<()>>;

    /// The answer [`Driver::read`] would give, when it can be had without waiting: an
    /// in-process device with nothing delaying, losing or corrupting it. `None` (the default,
    /// and any real bus) means: call `read`. A poller of thousands of simulated devices reads
    /// them this way without a boxed future and a timeout timer per read.
    fn read_now(&self, _area: Area, _start: u16, _count: u16) -> Option<Answer<Data>> {
        None
    }

    /// Whether [`Driver::read_now`] can ever answer (an in-process device): a poller does not
    /// number a cycle for a device that always has to be waited for.
    fn answers_at_once(&self) -> bool {
        false
    }

    /// A short human description for logs and `detail` texts, e.g. `sim relay` or
    /// `modbus-tcp 127.0.0.1:502 unit 1`.
    fn describe(&self) -> String;
}
