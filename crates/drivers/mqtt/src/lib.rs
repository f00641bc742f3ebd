//! MQTT for closedloop (docs/architecture.md, docs/plant-file.md): a shared MQTT 5 connection per
//! broker and the pure pieces the MQTT link (`closedloop-connect`) needs to turn messages into
//! signal values and actions into publishes.
//!
//! MQTT is push, not poll, so this crate does not implement the register-oriented
//! `closedloop_contract::Driver`; it offers [`MqttBroker`] (subscribe / publish-until-PUBACK /
//! connection state) and [`decode`] instead. A PUBACK moves a command to `running`, never to
//! `completed`; retained messages carry `retained = true` and a message's [`Message::seq`]
//! compared with [`Ack::seq`] tells whether it arrived after the write.
//!
//! Publishes are QoS 0 or 1 (the plant loader refuses QoS 2: its extra handshake confirms nothing
//! more about the device), never retained, carry an MQTT 5 message expiry, and are never re-sent
//! after a connection loss. [`write_error`] puts a publish that got no PUBACK in the contract's
//! words. [`decode`] gives a value or says why the payload holds none (a JSON pointer,
//! `true_values`/`false_values`); [`payload_time`] reads when a value was taken from its payload
//! (`time_json`): it dates what is shown (a retained message gets an age), never a decision. The
//! `testing` feature starts a real Mosquitto for every crate's tests.
//!
//! Payloads go out as the caller rendered them: the plant's `${...}` templates are rendered by
//! the engine's plan, which knows the plant, so this crate deals in bytes and typed values only. The
//! `mqtt-relay` simulated device lives in closedloop-sim-server, as a client of this crate.

mod broker;
mod codec;
mod contract;
mod error;
mod taken;
#[cfg(feature = "testing")]
pub mod testing;

pub use broker::{
    Ack, BrokerConfig, BrokerTls, Connection, Message, MqttBroker, Subscription, Will,
};
pub use codec::{Words, decode, expiry_secs, parse_broker_url, topic_matches};
pub use contract::write_error;
pub use error::Error;
pub use taken::payload_time;
