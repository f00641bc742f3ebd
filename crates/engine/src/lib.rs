//! closedloop's engine: the command lifecycle (docs/architecture.md), from a submission to an
//! outcome the journal holds and the hardware confirmed (or the reason it could not).
//!
//! The engine knows no MCP and no wire protocol. Everything it needs from a device goes through
//! the one seam of `closedloop-link`: a [`Link`] per device publishes numbered samples, returns a
//! fence when a write is acknowledged, reads afresh on request and encodes the write entries of an
//! action. `closedloop-connect` builds the links of a plant (the simulator, Modbus, MQTT, OPC UA,
//! CAN); a test can hand [`Engine::start`] a link of its own (`tests/fake_link.rs`).
//! [`Engine::start`] starts every link's reader and recovers the journal's unfinished commands.
//!
//! Modules, roughly in the order a command meets them (docs/architecture.md follows one tool
//! call through them, function by function):
//!
//! - `api`: the shapes the API takes and returns ([`Submission`], [`DeviceState`],
//!   [`DeviceInfo`]), apart from the result object.
//! - `engine`: the API the MCP layer and the CLI use: submit, status with a bounded wait,
//!   cancel, list, devices, device state, changes, shutdown.
//! - `envelope`: the safety envelope's API: the standing alarms, their change feed, and
//!   `Engine::lapse`, which ends a dead-man action whose caller is known to be gone.
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
//! - `finished`: the results of recently finished commands, so a status read of one costs no
//!   journal query.
//! - `live`: a command held in memory (its journaled row and timeline), the handles callers
//!   wait on (`wait_terminal`) and cancel through.
//! - `stop`: the cancel plan written, and the device held until `stopped_when` (bounded).
//! - `supervise`: the loop of a running command: what it waits on, set up once, and each
//!   wake turned into a machine event.
//! - `supervisor`: one task per command: queue for the exclusive group, dispatch, judge samples
//!   until a terminal status, carry out the machine's effects (cancel plan, safe state).
//! - `dispatch`: a fresh read, the `dispatched` record committed before anything is sent, then
//!   the write plan, re-sent only as the machine allows.
//! - `plan`: write plans: each entry's expressions evaluated to typed values (a payload template
//!   rendered), then encoded by the device's link, all before anything is sent.
//! - `device`: one device at run time: its declaration and its link; `DeviceRuntime::send`
//!   returns each write's fence.
//! - `judge`: which values may count (the fence of every device an expression reads) and what a
//!   fresh sample says (done, failed, started, stopped, moved, early); readback.
//! - `others`: wakes a supervisor when another device its criteria read delivers a sample.
//! - [`machine`]: the lifecycle as a pure state machine (event in, effects out); no I/O, no
//!   clock, so every transition is unit-tested.
//! - [`detail`]: the `detail` and `hint` of a result, in words, from the machine's reason and
//!   the evidence.
//! - `result`: the result object an agent sees, built from the journal's rows, and
//!   `CommandResult::into_model`, sized for a model.
//! - [`contract`]: the contract's statuses and error codes, each code with its hint (defined in
//!   `closedloop_driver::contract`, beside the driver seam, so every protocol can name them).
//! - [`clock`]: one monotonic base mapped to wall-clock milliseconds, so timelines follow a
//!   paused test clock (defined in `closedloop-link`: links stamp samples with the same clock).
//! - `terminal`: the one place a terminal row is made from the machine's outcome (`Ending`).
//! - `recovery`: start-up recovery of what the journal says was unfinished.
//! - `raw`: raw register reads and writes for `raw_access` devices whose link has registers,
//!   outside the lifecycle, and the link of a `raw_access` device for the bridge tools of one
//!   protocol (`closedloop_connect::bridge`).

mod admission;
mod admit;
mod adopt;
mod alarms;
mod api;
mod context;
pub mod crash;
mod dead_man_elsewhere;
pub mod detail;
mod device;
mod device_views;
mod dispatch;
mod engine;
mod envelope;
mod finished;
#[cfg(test)]
mod fixtures;
mod handover;
mod judge;
mod live;
pub mod machine;
pub mod metrics;
mod others;
mod owners_rounds;
mod owners_values;
pub mod ownership;
mod plan;
mod profile;
mod raw;
mod recovery;
mod refusal;
mod result;
mod state_text;
mod stop;
mod submit;
mod supervise;
mod supervisor;
mod terminal;

// The API the MCP layer and the CLI use; everything else stays inside the crate.
pub use alarms::AlarmInfo;
pub use api::{DeviceHealth, DeviceInfo, DeviceState, SignalState, Submission, UnreadableSignal};
pub use closedloop_driver::contract;
pub use closedloop_link::clock;
pub use closedloop_link::{Link, Links};
pub use context::Change;
pub use contract::{ErrorCode, Status};
pub use device::{Failure, Freshness, Liveness, Reading, SignalValue, Snapshot, Unusable};
pub use engine::{Engine, MAX_WAIT};
pub use raw::{MAX_RAW_COUNT, RawError, RawRead};
pub use result::{CommandResult, TimelineEntry};
pub use state_text::unknown_means;

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
    /// A device has no link.
    #[error("device {0:?} has no link; give Engine::start one link per device of the plant")]
    NoDriver(String),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] closedloop_journal::JournalError),
}
