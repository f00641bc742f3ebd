//! closedloop's engine: the command lifecycle (docs/architecture.md), from a submission to an
//! outcome the journal holds and the hardware confirmed (or the reason it could not).
//!
//! The engine knows no MCP. It still knows the wire protocols, one module each under `device/`:
//! register devices (sim, Modbus) are [`closedloop_driver::Driver`]s read by a poller; MQTT
//! devices are clients of a shared [`closedloop_mqtt::MqttBroker`], OPC UA devices nodes of a
//! shared [`closedloop_opcua::OpcuaClient`] session, CAN devices nodes on a shared bus port, each
//! read by a listener: one `DeviceIo` variant each (`device.rs`). One device-link seam that would
//! let the engine depend on no protocol crate is planned, not built. [`build_drivers`] turns a
//! plant into a [`Connection`] per device; [`Engine::start`] opens them, starts every device's
//! poller or listener and recovers the journal's unfinished commands.
//!
//! Modules, roughly in the order a command meets them (docs/architecture.md follows one tool
//! call through them, function by function):
//!
//! - `api`: the shapes the API takes and returns ([`Submission`], [`DeviceState`],
//!   [`DeviceInfo`]), apart from the result object.
//! - `engine`: the API the MCP layer and the CLI use: submit, status with a bounded wait,
//!   cancel, list, devices, device state, changes, shutdown.
//! - `submit`: a submission in small steps (scope, idempotency key, parameters,
//!   `Engine::admit`), ending journaled `accepted` with its supervisor started, or `rejected`.
//! - `admission`: `Engine::admit`, one small function per check, in the order a refusal is
//!   reported (confirmation, alarm, liveness, unreadable criteria, plan dry-run, expected
//!   duration, `requires`, a failure already on, the queue).
//! - `admit`: admission checks shared by submission and dispatch (`requires` read afresh, a
//!   failure already on, the expected duration), each saying in words why nothing is written.
//! - `context`: what the engine's tasks share: devices, exclusive groups and their queues, live
//!   commands, the journal, a command's scope of other devices (`Context::scope_for`: only those its
//!   action reads), and `Context::record`, through which every change is journaled first.
//! - `live`: a command held in memory (its journaled row and timeline), the handles callers
//!   wait on (`wait_terminal`) and cancel through.
//! - `stop`: the cancel plan written, and the device held until `stopped_when` (bounded).
//! - `supervise`: the loop of a running command: what it waits on, set up once, and each
//!   wake turned into a machine event.
//! - `supervisor`: one task per command: queue for the exclusive group, dispatch, judge samples
//!   until a terminal status, carry out the machine's effects (cancel plan, safe state).
//! - `dispatch`: a fresh read, the `dispatched` record committed before anything is sent, then
//!   the write plan, re-sent only as the machine allows.
//! - `plan`: write plans from the plant's entries and CEL values to requests (register writes,
//!   publishes, OPC UA writes and calls, CAN frames), all encoded before anything is sent. A
//!   failed write is put in the contract's words by its protocol crate (`write_error`).
//! - `device`: one device at run time: its connection, poller or listener, signal cache,
//!   numbered samples and liveness; `DeviceRuntime::send` returns each write's fence. Submodules
//!   `device::mqtt`, `device::opcua` and `device::can` hold the push-fed protocols'
//!   listeners, `closedloop_driver::sample` the channel that lets a supervisor see every sample.
//! - `judge`: which values may count (the fence of every device an expression reads) and what a
//!   fresh sample says (done, failed, started, stopped, moved, early); readback.
//! - `others`: wakes a supervisor when another device its criteria read delivers a sample.
//! - [`machine`]: the lifecycle as a pure state machine (event in, effects out); no I/O, no
//!   clock, so every transition is unit-tested.
//! - [`detail`]: the `detail` and `hint` of a result, in words, from the machine's reason and
//!   the evidence.
//! - `result`: the result object an agent sees, built from the journal's rows, and
//!   `CommandResult::for_model`, sized for a model.
//! - [`contract`]: the contract's statuses and error codes, each code with its hint (defined in
//!   `closedloop_driver::contract`, beside the driver seam, so every protocol can name them).
//! - `connections`: the plant's driver tables (addresses already typed by the plant) to a
//!   [`Connection`] per device ([`build_drivers`]); devices sharing a broker, endpoint or bus must
//!   agree on how it is reached.
//! - [`clock`]: one monotonic base mapped to wall-clock milliseconds, so timelines follow a
//!   paused test clock.
//! - `terminal`: the one place a terminal row is made from the machine's outcome (`Ending`).
//! - `recovery`: start-up recovery of what the journal says was unfinished.
//! - `raw`: raw register reads and writes for `raw_access` devices, outside the lifecycle.
//! - `bridge`: read-only bridge tools for `raw_access` devices (`can_signals`, `can_decode`,
//!   `opcua_browse`, `opcua_read`).

mod admission;
mod admit;
mod alarms;
mod api;
mod bridge;
pub mod clock;
mod connections;
mod context;
pub mod detail;
mod device;
mod dispatch;
mod engine;
mod judge;
mod live;
pub mod machine;
mod others;
mod plan;
mod raw;
mod recovery;
mod result;
mod stop;
mod submit;
mod supervise;
mod supervisor;
mod terminal;

// The API the MCP layer and the CLI use; everything else stays inside the crate.
pub use alarms::AlarmInfo;
pub use api::{DeviceInfo, DeviceState, SignalState, Submission, UnreadableSignal};
pub use bridge::{CanDecoded, CanSignalState, MAX_BROWSE, MAX_READ, OpcuaValue};
pub use closedloop_driver::contract;
pub use connections::{Connection, Drivers, build_drivers};
pub use context::Change;
pub use contract::{ErrorCode, Status};
pub use device::{Liveness, SignalValue, Snapshot};
pub use engine::{Engine, MAX_WAIT};
pub use raw::{MAX_RAW_COUNT, RawError, RawRead};
pub use result::{CommandResult, TimelineEntry};

use thiserror::Error;

/// What the engine itself cannot do (as opposed to a command's outcome, which is a result).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No device of that id in the plant.
    #[error("no device {0:?} in the plant")]
    UnknownDevice(String),
    /// The device has no action of that name.
    #[error("device {0:?} has no action {1:?}")]
    UnknownAction(String, String),
    /// No command has this id (contract code `UNKNOWN_COMMAND`).
    #[error("no command has id {0:?}")]
    UnknownCommand(String),
    /// A device has no driver.
    #[error("device {0:?} has no driver")]
    NoDriver(String),
    /// A driver kind this build cannot run yet.
    #[error(
        "device {device:?}: driver kind {kind:?} is not available in this build; use kind = \"sim\", \"modbus-tcp\", \"modbus-rtu\", \"mqtt\", \"opcua\" or \"can\""
    )]
    UnsupportedDriver {
        /// Device id.
        device: String,
        /// Driver kind.
        kind: String,
    },
    /// A driver could not be set up (a bad address, a serial port opened twice with other settings).
    #[error("device {device:?}: {message}")]
    Driver {
        /// Device id.
        device: String,
        /// What is wrong.
        message: String,
    },
    /// A simulated device's options are invalid.
    #[error("device {device:?}: {message}")]
    Sim {
        /// Device id.
        device: String,
        /// What is wrong.
        message: String,
    },
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] closedloop_journal::JournalError),
}
