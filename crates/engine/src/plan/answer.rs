//! From a driver's answer to a write to the contract: which error code, whether the write may
//! have taken effect, whether it may be re-sent; and what a readback must match.

use super::{CanWrite, Publish};
use crate::contract::ErrorCode;
use closedloop_driver::{Answer, Data, Exception, TransportError, Value, Write};

/// A write that did not get a clean acknowledgement, mapped to the contract.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteError {
    /// The contract code.
    pub code: ErrorCode,
    /// The exception's or transport error's name and what was being written.
    pub detail: String,
    /// A transport error or a busy answer: an idempotent write may be re-sent.
    pub transient: bool,
    /// The request may have reached the device (no answer, or a garbled one).
    pub maybe_applied: bool,
}

/// Maps one write answer: `Ok` for an acknowledgement (exception 5, "Acknowledge", means the
/// device took the request and is still working: the criterion decides the rest).
pub fn interpret(answer: Answer<()>, w: &Write) -> Result<(), WriteError> {
    let err = |code, detail: String, transient, maybe_applied| {
        Err(WriteError {
            code,
            detail: format!("writing {w}: {detail}"),
            transient,
            maybe_applied,
        })
    };
    match answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(Exception::ACKNOWLEDGE)) => Ok(()),
        Ok(Err(e)) => match e.0 {
            1..=3 => err(
                ErrorCode::RegisterInvalid,
                format!("the device answered {e}"),
                false,
                false,
            ),
            6 => err(
                ErrorCode::BusNak,
                format!("the device answered {e}"),
                true,
                false,
            ),
            0x0A | 0x0B => err(
                ErrorCode::DeviceOffline,
                format!("the gateway answered {e}"),
                true,
                false,
            ),
            _ => err(
                ErrorCode::BusNak,
                format!("the device answered {e}"),
                false,
                false,
            ),
        },
        Err(TransportError::Crc) => err(
            ErrorCode::CrcMismatch,
            "the answer's checksum did not verify".into(),
            true,
            true,
        ),
        Err(TransportError::Disconnected(m)) => err(
            ErrorCode::DeviceOffline,
            format!("not connected: {m}"),
            true,
            false,
        ),
        Err(e) => err(ErrorCode::DeviceOffline, e.to_string(), true, true),
    }
}

/// Maps a publish that did not get the broker's acknowledgement to the contract. A PUBACK only
/// says the broker has the message; it never says the device acted.
pub fn interpret_publish(e: &closedloop_mqtt::Error, p: &Publish) -> WriteError {
    use closedloop_mqtt::Error as E;
    let (code, transient, maybe_applied) = match e {
        // Lost before the PUBACK: the broker may have taken it.
        E::Disconnected | E::Closed => (ErrorCode::DeviceOffline, true, true),
        // The request queue towards the broker is full: nothing was sent.
        E::Busy => (ErrorCode::BusNak, true, false),
        E::Expired => (ErrorCode::Timeout, false, false),
        _ => (ErrorCode::BusNak, false, false),
    };
    WriteError {
        code,
        detail: format!("publishing to {}: {e}", p.topic),
        transient,
        maybe_applied,
    }
}

/// Maps an OPC UA write or call the server did not accept to the contract, the status name in
/// the detail.
pub fn interpret_opcua(e: &closedloop_opcua::Error, what: &str) -> WriteError {
    use closedloop_opcua::{Class, Error as E};
    let (code, transient, maybe_applied) = match closedloop_opcua::classify(e) {
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
pub fn opcua_no_answer(what: &str) -> WriteError {
    WriteError {
        code: ErrorCode::DeviceOffline,
        detail: format!("{what}: the server did not answer in time"),
        transient: false,
        maybe_applied: true,
    }
}

/// Maps a CAN frame the adapter did not take to the contract.
pub fn interpret_can(e: &closedloop_can::BusError, c: &CanWrite) -> WriteError {
    use closedloop_can::BusError as B;
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
        detail: format!("sending {c}: {e}"),
        transient,
        maybe_applied,
    }
}

/// Whether a readback holds exactly what `w` wrote.
pub fn matches(data: &Data, w: &Write) -> bool {
    match (data, w) {
        (Data::Bits(b), Write::Coils { values, .. }) => b == values,
        (Data::Words(r), Write::Registers { values, .. }) => r == values,
        _ => false,
    }
}

/// A value as the JSON a timeline shows.
pub fn value_json(v: Value) -> serde_json::Value {
    match v {
        Value::Bool(b) => serde_json::Value::Bool(b),
        Value::Number(n) => serde_json::json!(n),
    }
}
