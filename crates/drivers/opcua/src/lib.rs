//! OPC UA for closedloop (docs/architecture.md, docs/plant-file.md): the client the OPC UA link
//! (`closedloop-connect`) drives devices with.
//!
//! OPC UA is push-fed like MQTT, so this crate does not implement the register-oriented
//! `closedloop_contract::Driver`. [`OpcuaClient`] keeps one session per endpoint alive in the
//! background ([`SessionState`]), streams numbered values ([`Monitor`], [`Update`]), and answers
//! writes and method calls with an [`Ack`] whose `seq` is a fence: only an update with a greater
//! `seq` was read after the acknowledgement, so only it may count as evidence that the command
//! worked.
//!
//! How far the fence goes: reads and polls are numbered when they are issued, so a read in
//! flight at the acknowledgement never counts; data changes are numbered when the client
//! receives them. An OPC UA server queues samples between publishes, so a sample taken just
//! before the write can arrive just after its acknowledgement and be numbered above the fence.
//! A condition that could be satisfied by the old state (a command that changes nothing) needs
//! more than the fence: `Update::source_ms` / `Update::server_ms` against `Ack::server_ms` (the
//! same server's clock) tell when a subscription's sample was taken. Not a read's: a server may
//! answer a read with the stored value's own timestamps (asyncua does), older than the
//! acknowledgement of the write that set it, so a read (`Update::from_read`) issued after the
//! acknowledgement is fresh by its number alone.
//!
//! [`classify`] maps every [`Error`] onto the contract's error codes (`REGISTER_INVALID`,
//! `DEVICE_OFFLINE`, `BUS_NAK`); the OPC UA status name always stays in the text.
//!
//! Built on async-opcua 0.19 with pure-Rust crypto. A session reconnects and keeps itself alive;
//! monitored items fall back to polled reads where the server refuses subscriptions; writes go in
//! the node's own data type, refused, never saturated (`convert.rs`); browse is bounded
//! (`browse.rs`). Security is None or Basic256Sha256 (sign, or sign and encrypt) against a pinned
//! server certificate; the identity is anonymous or a user name sent under the user-token policy
//! the server names in GetEndpoints (`identity.rs`), and a refused identity is named in the
//! session state's reason. The `testing` feature gives every crate's tests a client with short
//! timeouts and bounded waits.
//!
//! The simulated OPC UA server that serves closedloop's simulated devices lives in
//! closedloop-sim-server (`opcua_sim::SimServer`), so this crate knows neither the simulator nor
//! the plant.

#![warn(missing_docs)]

mod browse;
mod client;
mod config;
mod contract;
mod convert;
mod error;
mod identity;
mod monitor;
mod session;
mod survey;
#[cfg(feature = "testing")]
pub mod testing;
mod update;
mod write;

pub use browse::{Browse, BrowseEntry};
pub use client::{OpcuaClient, SessionState};
pub use config::{DEFAULT_REQUEST_TIMEOUT, Identity, OpcuaConfig, Security, SecurityMode};
pub use contract::{no_answer, write_error};
pub use error::{Class, Error, classify, classify_status, status_name};
pub use monitor::{Monitor, MonitorMode};
pub use survey::{MethodArgument, Survey, Surveyed};
pub use update::{Ack, Update};
