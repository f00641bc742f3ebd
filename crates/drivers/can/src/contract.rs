//! A frame the adapter did not take, in the contract's words (code, whether it may be re-sent,
//! whether it may have gone out).

use crate::BusError;
use closedloop_contract::{ErrorCode, contract::WriteError};

/// Maps a CAN frame the adapter did not take to the contract.
pub fn write_error(e: &BusError, what: &str) -> WriteError {
    use BusError as B;
    let (code, transient, maybe_applied) = match e {
        // The adapter answered with an error: the frame did not go out.
        B::Refused { .. } => (ErrorCode::BusNak, false, false),
        B::Frame(_) | B::Bitrate(_) | B::Interface { .. } => {
            (ErrorCode::InvalidParams, false, false)
        }
        // No answer, or the link went away while sending: it may have gone out.
        B::NoAnswer { .. } | B::Closed { .. } => (ErrorCode::DeviceOffline, true, true),
        _ => (ErrorCode::DeviceOffline, true, false),
    };
    WriteError {
        code,
        detail: format!("{what}: {e}"),
        transient,
        maybe_applied,
    }
}
