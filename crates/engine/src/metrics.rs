//! What the engine tells a metrics recorder, through the `metrics` facade: `closedloop serve`
//! installs a Prometheus recorder and serves it at `/metrics`; a program that embeds the engine
//! may install its own, or none, and then every call here costs next to nothing.
//!
//! - `closedloop_commands_total{device, action, status, code}`: every command that ended,
//!   rejected ones included; `code` is the error code, empty for `completed` and `sent`.
//! - `closedloop_command_time_to_truth_seconds{device, action}`: from the device's
//!   acknowledgement of the write to the final status, for commands the device acknowledged —
//!   how long the hardware took to show (or fail to show) what was asked.

use crate::contract::{ErrorCode, Status};

/// Counter of ended commands.
pub const COMMANDS: &str = "closedloop_commands_total";
/// Histogram of acknowledgement to final status, in seconds.
pub const TIME_TO_TRUTH: &str = "closedloop_command_time_to_truth_seconds";

/// Records a command that reached its final status; `ack_to_end_ms` when the device had
/// acknowledged its write.
pub(crate) fn ended(
    device: &str,
    action: &str,
    status: Status,
    code: Option<&ErrorCode>,
    ack_to_end_ms: Option<i64>,
) {
    let code = code.map(|c| c.as_str().to_string()).unwrap_or_default();
    metrics::counter!(COMMANDS,
        "device" => device.to_string(),
        "action" => action.to_string(),
        "status" => status.as_str(),
        "code" => code)
    .increment(1);
    if let Some(ms) = ack_to_end_ms {
        metrics::histogram!(TIME_TO_TRUTH,
            "device" => device.to_string(),
            "action" => action.to_string())
        .record(ms.max(0) as f64 / 1000.0);
    }
}
