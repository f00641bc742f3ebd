//! Errors of the MQTT driver.

use thiserror::Error;

/// Why an MQTT operation did not happen.
///
/// "The broker said no" ([`Error::Refused`]) is kept apart from "could not reach the broker"
/// ([`Error::Disconnected`]): the first is an answer, the second is not.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// The broker URL is not `mqtt://host[:port]` or `mqtts://host[:port]` (or their aliases
    /// `tcp://`, `ssl://`).
    #[error("{why}")]
    InvalidUrl {
        /// The URL as written.
        url: String,
        /// What is wrong and how to fix it, quoting the URL.
        why: String,
    },
    /// The TLS settings cannot be used: a PEM file that cannot be read or holds no certificate or
    /// key, a client certificate without its key, TLS files on a plain `mqtt://` URL. Found when
    /// connecting starts, before any packet is sent, so a bad file never looks like a dead broker.
    /// (A handshake that fails later — wrong CA, host name not in the certificate — is a lost
    /// connection: see [`crate::MqttBroker::last_error`].)
    #[error("TLS: {0}")]
    Tls(String),
    /// The connection was lost (or never made) before the broker acknowledged the publish; it may
    /// or may not have been delivered, and it is never re-sent by this crate.
    #[error("not connected to the broker")]
    Disconnected,
    /// The request queue towards the broker is full (see [`crate::MqttBroker`]'s capacity).
    #[error("the request queue towards the broker is full")]
    Busy,
    /// The broker answered the publish with a failure reason code.
    #[error("the broker refused the publish: {0}")]
    Refused(String),
    /// The broker took the publish but no client subscribes to its topic (MQTT 5 PUBACK reason
    /// 0x10, "No matching subscribers"): nobody received it — a board that is powered off has
    /// no subscription, and the message is not kept for it.
    #[error(
        "the broker answered \"No matching subscribers\" (MQTT 5 reason 0x10): no client subscribes to this topic, so nobody received the message"
    )]
    NoSubscribers,
    /// A publish topic must be non-empty and free of `+`, `#` and NUL.
    #[error("\"{0}\" is not a valid topic to publish to (no wildcards, not empty)")]
    InvalidTopic(String),
    /// QoS 2 is not supported; use 0 or 1.
    #[error("QoS {0} is not supported; use 0 or 1")]
    UnsupportedQos(u8),
    /// The message expiry must be at least one second (MQTT 5 counts whole seconds).
    #[error("the message expiry has already passed")]
    Expired,
    /// The broker handle was shut down.
    #[error("the broker connection was shut down")]
    Closed,
}
