//! MQTT for closedloop (docs/architecture.md, docs/plant-file.md): a shared MQTT 5 connection per
//! broker and the pure pieces the MQTT link (`closedloop-connect`) needs to turn messages into
//! signal values and actions into publishes.
//!
//! MQTT is push, not poll, so this crate does not implement the register-oriented
//! `closedloop_driver::Driver`; it offers [`MqttBroker`] (subscribe / publish-until-PUBACK /
//! connection state) and [`decode`] instead. A PUBACK moves a command to `running`, never to
//! `completed`; retained messages carry `retained = true` and a message's [`Message::seq`]
//! compared with [`Ack::seq`] tells whether it arrived after the write.
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

pub use broker::{Ack, BrokerConfig, BrokerTls, Link, Message, MqttBroker, Subscription, Will};
pub use codec::{Words, decode, expiry_secs, parse_broker_url, topic_matches};
pub use contract::write_error;
pub use error::Error;
pub use taken::payload_time;
