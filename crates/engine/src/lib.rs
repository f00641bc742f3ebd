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
//!   returns each write's fence. What differs between devices is the link's to say, never a
//!   protocol the engine names: by its `Reporting`, a `ChangesOnly` device (OPC UA) is asked for a
//!   read every `poll_ms` while a command runs, a `WhenItLikes` one (MQTT) is never asked, and
//!   "already so" on a device that is not `Polled` gets a wider deadline (`Action::deadline_s`).
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
//!   `closedloop_contract::contract`, beside the driver seam, so every protocol can name them).
//! - [`clock`]: one monotonic base mapped to wall-clock milliseconds, so timelines follow a
//!   paused test clock (defined in `closedloop-link`: links stamp samples with the same clock).
//! - `terminal`: the one place a terminal row is made from the machine's outcome (`Ending`).
//! - `recovery`: start-up recovery of what the journal says was unfinished.
//! - `raw`: raw register reads and writes for `raw_access` devices whose link has registers,
//!   outside the lifecycle, and the link of a `raw_access` device for the bridge tools of one
//!   protocol (`closedloop_connect::bridge`). A raw write takes every exclusive group the
//!   device's actions use with `try_acquire` (`DEVICE_BUSY` if one is held, so it never cuts
//!   into a command) and is journaled with its caller as action `raw_write`, ending `sent` or
//!   `failed`.
//! - `refusal`: a rejection journaled whole; [`crash`]: a supervisor that panicked ends on the
//!   record at once; `profile`: an action as the machine sees it.
//! - `alarms` (the board, indexed by the devices the alarms block) and `alarms/watch` (one task
//!   per distinct period; one alarm's judgement in `alarms/watch/one.rs`).
//! - `device_views`: what the API shows of devices (`devices`, `device_state`, `health`,
//!   `watch_device`), with the words of `state_text`.
//! - Several gateways on one PostgreSQL journal (docs/scale-out.md): [`ownership`] (the leases
//!   this instance holds; `ownership/keeper.rs`, `Engine::keep_leases`), `handover` (a call for
//!   a device another gateway drives), `adopt` (the journal's change feed, and a waiting command
//!   taken over), `dead_man_elsewhere` (renewals of a dead-man command another gateway runs),
//!   `owners_rounds` and `owners_values` (the device values owners publish for the others).
//! - [`metrics`]: commands ended and time to truth, through the `metrics` facade.
//!
//! The modules import each other one way only, readings → deciders → views: `device` and the
//! leaves `Context` holds (`alarms`, `owners_values`, `live`, `ownership`) import no decider; the
//! deciders (`admission`, `admit`, `judge`, `alarms/watch`) import `context`; the views and the
//! API (`device_views`, `owners_rounds`, `engine`, `submit`) import the deciders.
//! `tests/module_flow.rs` fails on any loop.
//!
//! # Rules the code adds where the contract is silent
//!
//! docs/architecture.md says in which file each rule lives; here is what each says.
//!
//! - Every device an expression reads is held to the same fence (`judge`): at the
//!   acknowledgement the supervisor notes, for every other device its criteria read
//!   (`devices.<id>.<signal>`), the number that device had issued, and asks it for a read; its
//!   values count only above that number and while it is online. Their samples wake the
//!   supervisor too (`others`). `requires` reads the devices it names afresh at submission and at
//!   dispatch; a device offline or without a fresh value refuses `INTERLOCK`, naming it. MQTT
//!   devices cannot be asked: their latest values count while they are online.
//! - Every sample is judged once: while a supervisor listens, every snapshot also goes on a
//!   broadcast (256 deep; a lagging supervisor is told and judges the latest), so a short
//!   `fail_when` pulse is not merged away; a republished snapshot is not judged again, so
//!   `hold_ms` needs distinct samples. A sample delivered in the deadline's own instant is judged
//!   before the deadline's verdict (`Supervisor::judge_delivered`).
//! - A latched fault is not a new failure: a `fail_when` that holds at submission is `rejected
//!   INTERLOCK` (naming the condition and how to clear it), on the fresh read at dispatch
//!   `failed INTERLOCK`; nothing is written either way.
//! - Admission takes the queue place atomically with the busy check (`Group::reserve`), so two
//!   concurrent `queue = false` calls are never both accepted.
//! - Operation-rate limits (`admit::rate_wait`): `max_rate` of the action and of its device, a
//!   generic cell rate algorithm over the `accepted_at` of the commands the journal holds for the
//!   last two bucket lengths, so a restart keeps the budget; a per-device lock from the count to
//!   the insert (on PostgreSQL an advisory lock, so gateways spend one budget); `RATE_LIMITED`
//!   with `retry_after_s`, the idempotency key left free.
//! - Idempotency keys are serialised per key from lookup to insert, and the journal's index on
//!   the key is unique. A key is looked up before anything but the caller's scope: the same
//!   device, action and arguments (as given or normalised: `150` and `150.0` are one) return the
//!   command or rejection it has; other arguments are `INVALID_PARAMS` and the key stays with its
//!   command.
//! - `confirm = true`: a submission the MCP layer's confirmation flow did not mark confirmed is
//!   `rejected INTERLOCK`.
//! - An expected duration that cannot be computed is not zero: an `expect_s` that is NaN,
//!   negative, infinite, over a day or reads a signal with no value is `rejected INVALID_PARAMS`
//!   with the expression and the values it read; at dispatch `failed INVALID_PARAMS`.
//! - No write without its record: if `dispatched` is not committed, nothing is sent (a restart
//!   would take the command for never sent). A device found offline at dispatch fails
//!   `DEVICE_OFFLINE`, "nothing was written", with no stop.
//! - Write answers of a register device: exceptions 1/2/3 → `REGISTER_INVALID`; 4 and unknown →
//!   `BUS_NAK`; 5 (Acknowledge) is accepted; 6 (busy) is retried for idempotent actions;
//!   0x0A/0x0B and timeouts → `DEVICE_OFFLINE`; a garbled answer → `CRC_MISMATCH`. Only
//!   idempotent actions are re-sent. When a write may have reached the device (no answer, a
//!   garbled one) and the action has a cancel plan, the stop is written.
//! - "Already so" needs time to prove itself: when `done_when` held on the values at dispatch, a
//!   read counts only if taken at least `expect_s` after the acknowledgement (`Reading::early`:
//!   a relay with swapped contacts reads "closed" before its coil pulled in), on every link, MQTT
//!   too; `fail_when` is never delayed. If it still holds and its signals never moved, the command
//!   ends `completed` with `already: true` (`Reason::AlreadySo`). If it held only on early reads,
//!   it ends `DEVICE_OFFLINE`, or `NO_FEEDBACK` when the device is online
//!   (`Reason::AlreadyUnconfirmed`).
//! - At the deadline, the `done_when` signals' fresh reads are compared with their values at
//!   dispatch: unchanged → `FEEDBACK_MISMATCH`, changed → `TIMEOUT`; no read taken at least
//!   `expect_s` after the acknowledgement (and none earlier showing movement) →
//!   `DEVICE_OFFLINE`, or `NO_FEEDBACK` when every device the criteria read reports when it likes
//!   and is online (`Supervisor::answering`). Reads from before the feedback could move cannot
//!   show it unmoved (`Reading::settled`). A `done_when` signal without a value at dispatch leaves
//!   no baseline: `timeout TIMEOUT` saying whether it moved cannot be told (`Reason::NoBaseline`);
//!   a recovered command has no baseline and ends `INTERRUPTED`.
//! - What is not a value is never a value: a criterion whose last report had no value makes the
//!   judge wait (`Event::NoValue`), ending at the deadline `NO_FEEDBACK` while its devices are
//!   online, else `DEVICE_OFFLINE` (`Machine::awaits_a_value`); a `fail_when` over the other
//!   fresh signals still fails it. A criterion signal whose read fails after the acknowledgement
//!   ends the command `failed` with that code, naming the signal (`Event::Unreadable`).
//! - Causal order in the journal: the reading on which a `fail_when` or `done_when` held goes into
//!   the same commit as the stop it triggers, ahead of it, else into the final status's commit; an
//!   alarm that stops a command is journaled as an `alarm` entry before the stop
//!   (`Supervisor::deciding`).
//! - Cancel answers with the stop: with a cancel plan and `stopped_when`, a cancelled command ends
//!   once the device reads stopped (bounded by 30 s and by the device going offline), that read
//!   its evidence. Without a cancel plan the detail says nothing was stopped; a stop that cannot
//!   be written ends `failed` with the driver's code. Cancel or shutdown while a write keeps
//!   failing ends the command instead of re-sending it.
//! - Safe state: after a failure, timeout or cancel of an action with a cancel plan, the stop is
//!   written and the exclusive group held until `stopped_when` holds on the device's own signals
//!   read after the stop (at most 30 s, then released with a warning).
//! - Dead-man motion (`keepalive_s`): every `Engine::status` of a live command renews it; the
//!   supervisor wakes at the last renewal plus `keepalive_s` and feeds `Event::KeepaliveLapsed`:
//!   the cancel plan is written and the command ends `cancelled DEADMAN`. `Engine::lapse` does
//!   the same at once when a transport knows the caller is gone (an HTTP session's end); a queued
//!   command whose session ended is never sent.
//! - Standing alarms are judged every poll period (the shortest of the devices they read) on
//!   usable values: an unreadable, stale or silent value makes `when` hold and `clear_when` not,
//!   unless `when_offline = "ignore"`; `for_ms` holds off glitches; a condition is evaluated
//!   again only when a value it reads changed, to the bit (`-0.0` is a change from `0.0`). Up to
//!   4,096 rows wait for the journal; shutdown waits up to 5 s for them. Admission and dispatch
//!   refuse a blocked device `INTERLOCK`; a running command's supervisor feeds
//!   `Event::AlarmRaised`, and the machine writes the stop and ends it `failed` with the alarm's
//!   name.
//! - Liveness: any answer of the device itself, a Modbus exception included, is a sign of life; a
//!   gateway's 0x0A/0x0B, timeouts, dropped requests and CRC failures are not. A device that has
//!   not answered in its first `max_silence_s` is `offline`, not `unknown` forever; answers that
//!   fail their checksum make a rejection `CRC_MISMATCH`. With a heartbeat
//!   (`liveness = { counter = { holding = N } }`) only a change of that register counts, so a
//!   controller whose firmware froze goes offline. Liveness is judged when it is asked for
//!   (`DeviceRuntime::current`).
//! - Journal writes of a command's changes are retried five times (50 ms doubling), then every
//!   second until the journal takes them (only a shutdown gives up), the device held meanwhile;
//!   readings on the timeline are notes, tried once (one that decides the outcome rides with the
//!   final status). Start-up recovery uses the quick retries only: a journal that takes no writes
//!   fails the start instead of hanging it.
//! - Shutdown: queued commands end `failed INTERRUPTED`; running ones with a cancel plan get it
//!   written and end `cancelled`; running ones without stay `running` for the next start.
//! - Readback compares the registers with the values written at dispatch; a device going offline
//!   during readback ends `DEVICE_OFFLINE`. A `fail_when` is judged on fresh values as with
//!   feedback, and a matching readback confirms only on failure signals read at least `expect_s`
//!   after the acknowledgement.
//! - Every log line about a command carries its `request_id` and `command_id`; rejected commands
//!   are journaled too, with their own `command_id`.

// The floors, one folder per stage of a command (docs/architecture.md has the map):
// admission (submission and its checks), dispatch (the write), supervision (judging fresh reads
// to an outcome), alarms (the standing envelope), ownership (several gateways), recovery (after
// a restart), views (what the engine shows: results, device states, their words).
mod admission;
mod alarms;
mod api;
mod context;
mod device;
mod dispatch;
mod engine;
#[cfg(test)]
mod fixtures;
pub mod machine;
pub mod metrics;
pub mod ownership;
mod raw;
mod recovery;
mod supervision;
mod views;

// The API the MCP layer and the CLI use; everything else stays inside the crate.
pub use alarms::AlarmInfo;
pub use api::{DeviceHealth, DeviceInfo, DeviceState, SignalState, Submission, UnreadableSignal};
pub use closedloop_contract::contract;
pub use closedloop_link::clock;
pub use closedloop_link::{Link, Links};
pub use context::Change;
pub use contract::{ErrorCode, Status};
pub use device::silent_means;
pub use device::{Failure, Freshness, Liveness, Reading, SignalValue, Snapshot, Unusable};
pub use engine::{Engine, MAX_WAIT};
pub use raw::{MAX_RAW_COUNT, RawError, RawRead};
pub use supervision::{crash, verdict};
pub use views::detail;
pub use views::result::{CommandResult, TimelineEntry};
pub use views::state_text::unknown_means;

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
