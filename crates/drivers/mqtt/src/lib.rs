//! MQTT for closedloop (DESIGN §2–§3): a shared MQTT 5 connection per broker and the pure pieces
//! the engine needs to turn messages into signal values and actions into publishes.
//!
//! MQTT is push, not poll, so this crate does not implement the register-oriented
//! `closedloop_driver::Driver`; it offers [`MqttBroker`] (subscribe / publish-until-PUBACK /
//! connection state) and [`decode`] / [`render_payload`] instead. A PUBACK moves a command to
//! `running`, never to `completed`; retained messages carry `retained = true` and a message's
//! [`Message::seq`] compared with [`Ack::seq`] tells whether it arrived after the write.
//!
//! [`relay`] is the `mqtt-relay` simulated device, an MQTT client of its own.

mod broker;
mod codec;
mod error;
pub mod relay;
#[cfg(feature = "testing")]
pub mod testing;

pub use broker::{Ack, BrokerConfig, BrokerTls, Link, Message, MqttBroker, Subscription, Will};
pub use codec::{decode, expiry_secs, parse_broker_url, render_payload, topic_matches};
pub use error::Error;
