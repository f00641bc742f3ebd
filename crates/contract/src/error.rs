//! The two ways a request can go wrong: the device refused it, or nothing usable came back.

use std::fmt;
use thiserror::Error;

/// A Modbus exception code: the device answered, and said no.
///
/// An exception is a valid answer for liveness (the device is there); what it means for a
/// command is decided by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Exception(pub u8);

impl Exception {
    /// 1: the function is not supported.
    pub const ILLEGAL_FUNCTION: Exception = Exception(0x01);
    /// 2: the address does not exist.
    pub const ILLEGAL_DATA_ADDRESS: Exception = Exception(0x02);
    /// 3: the value is not acceptable.
    pub const ILLEGAL_DATA_VALUE: Exception = Exception(0x03);
    /// 4: an unrecoverable error while performing the request.
    pub const SERVER_DEVICE_FAILURE: Exception = Exception(0x04);
    /// 5: accepted, will take long (the request is being processed).
    pub const ACKNOWLEDGE: Exception = Exception(0x05);
    /// 6: busy with a long-duration command; the request was not performed.
    pub const SERVER_DEVICE_BUSY: Exception = Exception(0x06);
    /// 8: memory parity error.
    pub const MEMORY_PARITY_ERROR: Exception = Exception(0x08);
    /// 0x0A: a gateway had no path to the target.
    pub const GATEWAY_PATH_UNAVAILABLE: Exception = Exception(0x0A);
    /// 0x0B: a gateway got no answer from the target.
    pub const GATEWAY_TARGET_FAILED: Exception = Exception(0x0B);

    /// The name the Modbus specification gives the code, for `detail` texts.
    pub fn name(self) -> &'static str {
        match self.0 {
            0x01 => "Illegal Function",
            0x02 => "Illegal Data Address",
            0x03 => "Illegal Data Value",
            0x04 => "Server Device Failure",
            0x05 => "Acknowledge",
            0x06 => "Server Device Busy",
            0x08 => "Memory Parity Error",
            0x0A => "Gateway Path Unavailable",
            0x0B => "Gateway Target Device Failed to Respond",
            _ => "Unknown Exception",
        }
    }
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exception {} ({})", self.0, self.name())
    }
}

/// Nothing usable came back from the device.
///
/// None of these counts as an answer for liveness.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TransportError {
    /// No answer within the request timeout (applied by the engine or the driver).
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// A frame arrived but its checksum did not verify; the request may have taken effect.
    #[error("a frame's checksum did not verify")]
    Crc,
    /// The connection is not there (refused, reset, closed).
    #[error("not connected: {0}")]
    Disconnected(String),
    /// Any other I/O or framing failure.
    #[error("{0}")]
    Io(String),
}
