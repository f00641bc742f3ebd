//! The contract's statuses and error codes (docs/architecture.md), with the hint each code gives
//! an agent.

use crate::{Answer, Exception, TransportError, Write};
use serde::{Serialize, Serializer};
use std::fmt;

/// Where a command is in its lifecycle. The serialised names are the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Never reached the device: bad params, interlock, offline, busy, no scope.
    Rejected,
    /// Journaled and queued (or being written); nothing confirmed.
    Accepted,
    /// The write plan was acknowledged; supervision against fresh reads is under way.
    Running,
    /// `done_when` held on fresh reads.
    Completed,
    /// A failure signal, a refusal, the device going offline, or the feedback never moving.
    Failed,
    /// The deadline passed; the feedback moved but `done_when` never held.
    Timeout,
    /// Delivered to a device that cannot report back (`verification = "none"`).
    Sent,
    /// Cancelled on request; the cancel plan was written.
    Cancelled,
}

impl Status {
    /// The contract spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Rejected => "rejected",
            Status::Accepted => "accepted",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
            Status::Sent => "sent",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses the contract spelling.
    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "rejected" => Status::Rejected,
            "accepted" => Status::Accepted,
            "running" => Status::Running,
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "timeout" => Status::Timeout,
            "sent" => Status::Sent,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }

    /// Terminal statuses never change again.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Accepted | Status::Running)
    }

    /// Whether a tool result with this status is an error result (`isError: true`).
    pub fn is_error(self) -> bool {
        matches!(self, Status::Rejected | Status::Failed | Status::Timeout)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A contract error code. `Signal` carries any code a plant file names in `fail_when`
/// (`MOTOR_STALL` among them).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// Parameter missing, wrong type, out of range, or not representable.
    InvalidParams,
    /// A `requires` precondition does not hold.
    Interlock,
    /// No valid answer within the liveness window.
    DeviceOffline,
    /// Another command holds the device and the action does not queue.
    DeviceBusy,
    /// The bus or device refused.
    BusNak,
    /// The device rejected the address or value.
    RegisterInvalid,
    /// A `fail_when` signal went active; the string is the plant's code (e.g. `MOTOR_STALL`).
    Signal(String),
    /// The feedback never moved toward the commanded state.
    FeedbackMismatch,
    /// The deadline passed; the feedback moved but never satisfied `done_when`.
    Timeout,
    /// The device is online but reported nothing on the criterion's signals after the
    /// acknowledgement before the deadline (a push device that did not report).
    NoFeedback,
    /// A frame's checksum did not verify.
    CrcMismatch,
    /// The gateway restarted (or stopped) and could not confirm the command.
    Interrupted,
    /// Cancelled on request.
    Cancelled,
    /// The caller lacks the scope.
    Unauthorized,
    /// No command has this id.
    UnknownCommand,
    /// No device has this id (tools that take a device).
    UnknownDevice,
    /// An operation-rate limit (`max_rate`) is spent; the result says when to retry.
    RateLimited,
    /// A `keepalive_s` action was not renewed in time; its cancel plan was written.
    Deadman,
}

impl ErrorCode {
    /// The contract spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidParams => "INVALID_PARAMS",
            ErrorCode::Interlock => "INTERLOCK",
            ErrorCode::DeviceOffline => "DEVICE_OFFLINE",
            ErrorCode::DeviceBusy => "DEVICE_BUSY",
            ErrorCode::BusNak => "BUS_NAK",
            ErrorCode::RegisterInvalid => "REGISTER_INVALID",
            ErrorCode::Signal(s) => s,
            ErrorCode::FeedbackMismatch => "FEEDBACK_MISMATCH",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::NoFeedback => "NO_FEEDBACK",
            ErrorCode::CrcMismatch => "CRC_MISMATCH",
            ErrorCode::Interrupted => "INTERRUPTED",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::UnknownCommand => "UNKNOWN_COMMAND",
            ErrorCode::UnknownDevice => "UNKNOWN_DEVICE",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::Deadman => "DEADMAN",
        }
    }

    /// Every code of the contract except the plant's own `fail_when` codes ([`ErrorCode::Signal`]).
    pub const FIXED: [ErrorCode; 17] = [
        ErrorCode::InvalidParams,
        ErrorCode::Interlock,
        ErrorCode::DeviceOffline,
        ErrorCode::DeviceBusy,
        ErrorCode::BusNak,
        ErrorCode::RegisterInvalid,
        ErrorCode::FeedbackMismatch,
        ErrorCode::Timeout,
        ErrorCode::NoFeedback,
        ErrorCode::CrcMismatch,
        ErrorCode::Interrupted,
        ErrorCode::Cancelled,
        ErrorCode::Unauthorized,
        ErrorCode::UnknownCommand,
        ErrorCode::UnknownDevice,
        ErrorCode::RateLimited,
        ErrorCode::Deadman,
    ];

    /// Parses a stored code; anything not in the contract table is a plant `fail_when` code.
    pub fn parse(s: &str) -> ErrorCode {
        match s {
            "INVALID_PARAMS" => ErrorCode::InvalidParams,
            "INTERLOCK" => ErrorCode::Interlock,
            "DEVICE_OFFLINE" => ErrorCode::DeviceOffline,
            "DEVICE_BUSY" => ErrorCode::DeviceBusy,
            "BUS_NAK" => ErrorCode::BusNak,
            "REGISTER_INVALID" => ErrorCode::RegisterInvalid,
            "FEEDBACK_MISMATCH" => ErrorCode::FeedbackMismatch,
            "TIMEOUT" => ErrorCode::Timeout,
            "NO_FEEDBACK" => ErrorCode::NoFeedback,
            "CRC_MISMATCH" => ErrorCode::CrcMismatch,
            "INTERRUPTED" => ErrorCode::Interrupted,
            "CANCELLED" => ErrorCode::Cancelled,
            "UNAUTHORIZED" => ErrorCode::Unauthorized,
            "UNKNOWN_COMMAND" => ErrorCode::UnknownCommand,
            "UNKNOWN_DEVICE" => ErrorCode::UnknownDevice,
            "RATE_LIMITED" => ErrorCode::RateLimited,
            "DEADMAN" => ErrorCode::Deadman,
            other => ErrorCode::Signal(other.to_string()),
        }
    }

    /// Whether `code` is one closedloop itself reports (one of [`ErrorCode::FIXED`]): a plant's
    /// `fail_when` may not take it, or a model would read the plant's failure as closedloop's.
    pub fn is_reserved(code: &str) -> bool {
        !matches!(ErrorCode::parse(code), ErrorCode::Signal(_))
    }

    /// What the agent should do next, per the contract's table.
    pub fn hint(&self) -> &'static str {
        match self {
            ErrorCode::InvalidParams => {
                "Fix the parameter as the detail says and call the tool again; nothing was written."
            }
            ErrorCode::Interlock => {
                "Do what the precondition in the detail names first (or ask a person to), then try again."
            }
            ErrorCode::DeviceOffline => {
                "The device is not answering. Ask the user to check its power and network; do not retry blindly."
            }
            ErrorCode::DeviceBusy => {
                "Another command holds this device. Wait for it (get_command_status) or cancel it, then try again."
            }
            ErrorCode::BusNak => {
                "The bus or device refused the request. Check the address and the device's power."
            }
            ErrorCode::RegisterInvalid => {
                "The device rejected the address or value. Fix the parameter, or ask the user to check the plant file."
            }
            ErrorCode::Signal(_) => {
                "A failure signal went active. Ask a person to inspect the device; do not retry."
            }
            ErrorCode::FeedbackMismatch => {
                "The feedback never moved toward the commanded state. Ask the user to check wiring and supply; do not assume the action happened."
            }
            ErrorCode::Timeout => {
                "The device moved but did not confirm in time. Query the device state (get_device_state) before acting on it."
            }
            ErrorCode::NoFeedback => {
                "The device is online but did not report on the signals that confirm this action; it may have ignored the command. Query the device state (get_device_state), and check that the device reports its state after each command, before retrying."
            }
            ErrorCode::CrcMismatch => {
                "An answer was garbled on the line; the write may have taken effect. Query the device state before retrying."
            }
            ErrorCode::Interrupted => {
                "The gateway restarted and could not confirm this command. Query the device state before retrying."
            }
            ErrorCode::Cancelled => "The command was cancelled on request.",
            ErrorCode::Unauthorized => "The caller lacks the scope for this device or action.",
            ErrorCode::UnknownCommand => "Check the command_id, or call list_commands to find it.",
            ErrorCode::UnknownDevice => "Call list_devices for the device ids this gateway serves.",
            ErrorCode::Deadman => {
                "It was stopped because nobody kept asking about it. Start it again only if it is still wanted, and call get_command_status or keep_alive at least every keepalive_s while it runs."
            }
            ErrorCode::RateLimited => {
                "Wait retry_after_s seconds before trying again; do not loop. The limit protects contacts and motors rated for so many operations."
            }
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

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

impl WriteError {
    /// Refused before anything could reach the device (a plan that does not encode, a request
    /// for another link): not to be re-sent, certainly not applied.
    pub fn refused(code: ErrorCode, detail: impl Into<String>) -> WriteError {
        WriteError {
            code,
            detail: detail.into(),
            transient: false,
            maybe_applied: false,
        }
    }

    /// Sent, and no acknowledgement came before the command's time ran out: the device may
    /// have taken it (`DEVICE_OFFLINE`, not re-sent).
    pub fn unanswered(detail: impl Into<String>) -> WriteError {
        WriteError {
            code: ErrorCode::DeviceOffline,
            detail: detail.into(),
            transient: false,
            maybe_applied: true,
        }
    }
}

/// Maps one write answer: `Ok` for an acknowledgement (exception 5, "Acknowledge", means the
/// device took the request and is still working: the criterion decides the rest).
pub fn register_write(answer: Answer<()>, w: &Write) -> Result<(), WriteError> {
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

#[cfg(test)]
mod tests;
