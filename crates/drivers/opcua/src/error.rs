//! Errors of the OPC UA driver, and how the engine should read them.
//!
//! OPC UA answers every operation with a status code. The engine needs three verdicts from it,
//! the same ones a Modbus exception gives: the address or value is wrong (fix the plant file or
//! the parameter), the device cannot be reached (liveness), or the device refused for another
//! reason. [`classify`] makes that call; the status name always stays in the error's text so a
//! person reading `detail` sees exactly what the server said.

use opcua::types::StatusCode;
use thiserror::Error;

/// Why an OPC UA operation did not happen.
///
/// "The server said no" ([`Error::Status`]) is kept apart from "the server could not be reached"
/// ([`Error::NotConnected`]): the first is an answer, the second is not.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with a Bad status (for the whole request or for this node).
    #[error("{op}: {status}")]
    Status {
        /// What was attempted, naming the node (`write ns=2;s=slide.TargetMm`).
        op: String,
        /// The status name as OPC UA spells it (`Bad_OutOfRange`).
        status: String,
    },
    /// There is no session to the server right now; the text says why (the last status seen on
    /// the session, or the socket error).
    #[error("not connected: {0}")]
    NotConnected(String),
    /// The value cannot be represented in the node's data type (a 40000 for an Int16 node, NaN,
    /// a fraction for an integer argument); nothing was sent.
    #[error("{node}: {why} (the node's data type is {data_type}); nothing was written")]
    Value {
        /// The node (or `method argument N`) the value was meant for.
        node: String,
        /// The node's data type as the server declares it.
        data_type: String,
        /// What is wrong with the value.
        why: String,
    },
    /// A node id string that does not parse (`ns=2;s=...`, `i=85`, `ns=1;g=...`).
    #[error("\"{0}\" is not a valid OPC UA node id (examples: ns=2;s=Pump1.Speed, i=85)")]
    InvalidNodeId(String),
    /// The connection settings cannot be used: a bad endpoint URL, an unreadable certificate
    /// file, an unknown security policy. Found when the client is created, before any packet.
    #[error("OPC UA configuration: {0}")]
    Config(String),
    /// The client was shut down.
    #[error("the OPC UA client was shut down")]
    Closed,
}

impl Error {
    /// A Bad status answered for `op`.
    pub(crate) fn status(op: impl Into<String>, status: StatusCode) -> Error {
        Error::Status {
            op: op.into(),
            status: status_name(status),
        }
    }

    /// A failure reported by the OPC UA stack for `op`: a status that means the session is gone
    /// becomes [`Error::NotConnected`], anything else [`Error::Status`].
    pub(crate) fn from_stack(op: impl Into<String>, err: &opcua::types::Error) -> Error {
        let status = err.status();
        if is_offline_status(&status_name(status)) {
            Error::NotConnected(status_name(status))
        } else {
            Error::status(op, status)
        }
    }
}

/// What an error means for a command (the contract's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Class {
    /// `REGISTER_INVALID`: the server rejected the address or the value; fix the parameter or the
    /// plant file. Also configuration errors and values not representable in the node's type.
    RegisterInvalid,
    /// `DEVICE_OFFLINE`: no session, the connection dropped, or the request timed out.
    Offline,
    /// `BUS_NAK`: the server refused for any other reason (Bad_InternalError, Bad_DeviceFailure…).
    Nak,
}

/// Status names that say the node, the method or the value is wrong.
const REGISTER_INVALID: &[&str] = &[
    "Bad_NodeIdUnknown",
    "Bad_NodeIdInvalid",
    "Bad_OutOfRange",
    "Bad_TypeMismatch",
    "Bad_NotWritable",
    "Bad_MethodInvalid",
    "Bad_ArgumentsMissing",
    "Bad_InvalidArgument",
    // Same family, not in the contract's list: too many arguments, a write to an attribute that
    // does not exist, a value or index the node cannot take.
    "Bad_TooManyArguments",
    "Bad_AttributeIdInvalid",
    // What async-opcua's and asyncua's servers answer for a write to a read-only variable
    // (where the specification says Bad_NotWritable); otherwise a plant file's credentials.
    "Bad_UserAccessDenied",
    "Bad_IndexRangeInvalid",
    "Bad_WriteNotSupported",
];

/// Status names that say the server (or the device behind it) cannot be reached.
const OFFLINE: &[&str] = &[
    "Bad_NotConnected",
    "Bad_SessionClosed",
    "Bad_SessionIdInvalid",
    "Bad_ConnectionClosed",
    "Bad_Timeout",
    "Bad_CommunicationError",
    // Same family: the secure channel or the server went away, a gateway lost its device.
    "Bad_SecureChannelClosed",
    "Bad_SecureChannelIdInvalid",
    "Bad_ServerNotConnected",
    "Bad_ServerHalted",
    "Bad_Shutdown",
    "Bad_NoCommunication",
    "Bad_RequestTimeout",
    "Bad_ConnectionRejected",
    "Bad_TcpInternalError",
    "Bad_SessionNotActivated",
];

fn is_offline_status(name: &str) -> bool {
    OFFLINE.contains(&name)
}

/// Classifies an error for the engine: [`Class::RegisterInvalid`], [`Class::Offline`] or
/// [`Class::Nak`].
pub fn classify(err: &Error) -> Class {
    match err {
        Error::Status { status, .. } => classify_status(status),
        Error::NotConnected(_) | Error::Closed => Class::Offline,
        Error::Value { .. } | Error::InvalidNodeId(_) | Error::Config(_) => Class::RegisterInvalid,
    }
}

/// Classifies a status name (`Bad_OutOfRange`) the same way as [`classify`].
pub fn classify_status(name: &str) -> Class {
    if REGISTER_INVALID.contains(&name) {
        Class::RegisterInvalid
    } else if is_offline_status(name) {
        Class::Offline
    } else {
        Class::Nak
    }
}

/// The OPC UA name of a status code: `Good`, `Good_CompletesAsynchronously`,
/// `Uncertain_LastUsableValue`, `Bad_NodeIdUnknown`; a sub-code the stack does not know is shown
/// in hex (`0x80AB0000`). Info bits (overflow, limits) are not part of the name.
pub fn status_name(status: StatusCode) -> String {
    let sub = status.sub_code();
    let name = sub.name();
    if name == "Invalid" {
        return format!("0x{:08X}", status.bits() & 0xFFFF_0000);
    }
    for prefix in ["Good", "Uncertain", "Bad"] {
        if let Some(rest) = name.strip_prefix(prefix)
            && !rest.is_empty()
        {
            return format!("{prefix}_{rest}");
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_follow_the_specification_spelling() {
        assert_eq!(status_name(StatusCode::Good), "Good");
        assert_eq!(
            status_name(StatusCode::BadNodeIdUnknown),
            "Bad_NodeIdUnknown"
        );
        assert_eq!(
            status_name(StatusCode::GoodCompletesAsynchronously),
            "Good_CompletesAsynchronously"
        );
        assert_eq!(
            status_name(StatusCode::UncertainLastUsableValue),
            "Uncertain_LastUsableValue"
        );
        assert_eq!(status_name(StatusCode::from(0x8FFF_0000)), "0x8FFF0000");
    }

    #[test]
    fn classes_follow_the_contract() {
        for name in [
            "Bad_NodeIdUnknown",
            "Bad_OutOfRange",
            "Bad_TypeMismatch",
            "Bad_NotWritable",
        ] {
            assert_eq!(classify_status(name), Class::RegisterInvalid, "{name}");
        }
        for name in [
            "Bad_NotConnected",
            "Bad_Timeout",
            "Bad_ConnectionClosed",
            "Bad_SessionClosed",
        ] {
            assert_eq!(classify_status(name), Class::Offline, "{name}");
        }
        assert_eq!(classify_status("Bad_InternalError"), Class::Nak);
        assert_eq!(classify_status("Bad_DeviceFailure"), Class::Nak);
        assert_eq!(
            classify_status("Bad_UserAccessDenied"),
            Class::RegisterInvalid
        );
        let err = Error::status("write x", StatusCode::BadOutOfRange);
        assert_eq!(err.to_string(), "write x: Bad_OutOfRange");
        assert_eq!(classify(&err), Class::RegisterInvalid);
        assert_eq!(
            classify(&Error::NotConnected("Bad_ConnectionClosed".into())),
            Class::Offline
        );
    }

    #[test]
    fn stack_errors_that_mean_a_lost_session_are_not_connected() {
        let e = opcua::types::Error::new(StatusCode::BadConnectionClosed, "gone");
        assert_eq!(
            Error::from_stack("read", &e),
            Error::NotConnected("Bad_ConnectionClosed".into())
        );
        let e = opcua::types::Error::new(StatusCode::BadServiceUnsupported, "no");
        assert_eq!(classify(&Error::from_stack("call", &e)), Class::Nak);
    }
}
