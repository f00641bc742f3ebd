//! A publish the broker did not acknowledge, in the contract's words (code, whether it may be
//! re-sent, whether it may have reached the broker).

use crate::Error;
use closedloop_contract::{ErrorCode, contract::WriteError};

/// Maps a publish that did not get the broker's acknowledgement to the contract. A PUBACK only
/// says the broker has the message; it never says the device acted.
pub fn write_error(e: &Error, topic: &str) -> WriteError {
    use Error as E;
    let (code, transient, maybe_applied) = match e {
        // Lost before the PUBACK: the broker may have taken it.
        E::Disconnected | E::Closed => (ErrorCode::DeviceOffline, true, true),
        // The request queue towards the broker is full: nothing was sent.
        E::Busy => (ErrorCode::BusNak, true, false),
        E::Expired => (ErrorCode::Timeout, false, false),
        // Nobody listens on the topic: the device is not there to receive it.
        E::NoSubscribers => (ErrorCode::DeviceOffline, false, false),
        _ => (ErrorCode::BusNak, false, false),
    };
    WriteError {
        code,
        detail: format!("publishing to {topic}: {e}"),
        transient,
        maybe_applied,
    }
}
