//! An OPC UA write or call the server did not accept, in the contract's words (code, whether
//! it may be re-sent, whether it may have taken effect).

use crate::{Class, Error};
use closedloop_contract::{ErrorCode, contract::WriteError};

/// Maps an OPC UA write or call the server did not accept to the contract, the status name in
/// the detail.
pub fn write_error(e: &Error, what: &str) -> WriteError {
    use Error as E;
    let (code, transient, maybe_applied) = match crate::classify(e) {
        Class::RegisterInvalid => (ErrorCode::RegisterInvalid, false, false),
        // Not connected: nothing went out. Lost on the way (a timeout): it may have.
        Class::Offline => (
            ErrorCode::DeviceOffline,
            true,
            !matches!(e, E::NotConnected(_)),
        ),
        _ => (ErrorCode::BusNak, false, false),
    };
    WriteError {
        code,
        detail: format!("{what}: {e}"),
        transient,
        maybe_applied,
    }
}

/// An OPC UA request that got no answer before the command's deadline.
pub fn no_answer(what: &str) -> WriteError {
    WriteError::unanswered(format!("{what}: the server did not answer in time"))
}
