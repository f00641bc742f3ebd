//! The result object (docs/architecture.md): what an agent sees of a command.
//!
//! Built from the same rows the journal stores, so a result served from memory while the command
//! runs and one served from the journal after a restart are the same object.

use crate::clock::rfc3339;
use crate::contract::{ErrorCode, Status};
use closedloop_journal::{CommandRow, EventRow};
use serde::Serialize;

/// One entry of a command's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// RFC 3339 UTC with milliseconds.
    pub at: String,
    /// `received`, `accepted`, `dispatched`, `device_ack`, `signal`, `retry`, `cancel_sent`, or the
    /// terminal status.
    pub event: String,
    /// Event details (signal values, error text), flattened into the entry.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

/// The `structuredContent` of every action tool, `get_command_status` and `cancel_command`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandResult {
    /// UUIDv7.
    pub command_id: String,
    /// The server-minted id of the tool call that created the command.
    pub request_id: String,
    /// Device id.
    pub device: String,
    /// Action name.
    pub action: String,
    /// Validated parameters.
    pub params: serde_json::Value,
    /// Lifecycle status.
    pub status: Status,
    /// True only when feedback read after the acknowledged write decided the outcome.
    pub verified: bool,
    /// `feedback`, `readback` or `none`.
    pub verification: String,
    /// Present exactly for `rejected`, `failed`, `timeout`, `cancelled`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    /// What happened, present with `error_code`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What to do next: with an error code, with `sent`, and with readback completions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// For readback verification: whether the registers held the written value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readback_matched: Option<bool>,
    /// The signal values that decided the outcome: `{name: {value, at, source}}`.
    pub evidence: serde_json::Value,
    /// A number while `accepted`/`running`, else null.
    pub estimated_remaining_seconds: Option<f64>,
    /// With `RATE_LIMITED`: how many seconds until the call may succeed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<f64>,
    /// When the command was accepted (null for a rejected command).
    pub accepted_at: Option<String>,
    /// The last change.
    pub updated_at: String,
    /// Every journaled transition, oldest first.
    pub timeline: Vec<TimelineEntry>,
}

impl CommandResult {
    /// Builds the result object from journal rows.
    pub fn from_rows(
        row: &CommandRow,
        events: &[EventRow],
        remaining_s: Option<f64>,
    ) -> CommandResult {
        let status = Status::parse(&row.status).unwrap_or(Status::Failed);
        let accepted = status != Status::Rejected;
        CommandResult {
            command_id: row.command_id.clone(),
            request_id: row.request_id.clone(),
            device: row.device.clone(),
            action: row.action.clone(),
            params: row.params.clone(),
            status,
            verified: row.verified,
            verification: row.verification.clone(),
            error_code: row.error_code.as_deref().map(ErrorCode::parse),
            detail: row.detail.clone(),
            hint: row.hint.clone(),
            readback_matched: row.readback_matched,
            evidence: row.evidence.clone(),
            estimated_remaining_seconds: if status.is_terminal() {
                None
            } else {
                remaining_s.map(round_s)
            },
            retry_after_s: events
                .iter()
                .find(|e| e.event == "rejected")
                .and_then(|e| e.data.get("retry_after_s"))
                .and_then(|v| v.as_f64())
                .map(round_s),
            accepted_at: accepted.then(|| rfc3339(row.accepted_at_ms)),
            updated_at: rfc3339(row.updated_at_ms),
            timeline: events
                .iter()
                .map(|e| TimelineEntry {
                    at: rfc3339(e.at_ms),
                    event: e.event.clone(),
                    data: match &e.data {
                        serde_json::Value::Object(m) => m.clone(),
                        serde_json::Value::Null => serde_json::Map::new(),
                        other => {
                            let mut m = serde_json::Map::new();
                            m.insert("data".into(), other.clone());
                            m
                        }
                    },
                })
                .collect(),
        }
    }

    /// The result sized for a model (docs/architecture.md): the timeline keeps its milestones and
    /// its first and last readings; the readings between become one `omitted` entry counting them.
    /// A 5 s move read every 20 ms would otherwise carry hundreds of readings (~40 KB) that a model
    /// reads in full; the whole timeline stays in the journal (`Engine::timeline`).
    pub fn for_model(&self) -> CommandResult {
        let readings: Vec<usize> = self
            .timeline
            .iter()
            .enumerate()
            .filter(|(_, e)| e.event == "signal")
            .map(|(i, _)| i)
            .collect();
        let (Some(&first), Some(&last)) = (readings.first(), readings.last()) else {
            return self.clone();
        };
        if readings.len() <= 2 {
            return self.clone();
        }
        let mut timeline = Vec::with_capacity(self.timeline.len() - readings.len() + 3);
        for (i, e) in self.timeline.iter().enumerate() {
            let between = e.event == "signal" && i != first && i != last;
            if i == last {
                let mut data = serde_json::Map::new();
                data.insert("omitted".into(), serde_json::json!(readings.len() - 2));
                let at = self.timeline[readings[1]].at.clone();
                timeline.push(TimelineEntry {
                    at,
                    event: "omitted".into(),
                    data,
                });
            }
            if !between {
                timeline.push(e.clone());
            }
        }
        CommandResult {
            timeline,
            ..self.clone()
        }
    }

    /// A short text for a model, saying what is known and what to do next.
    pub fn summary(&self) -> String {
        let what = format!("{} {}", self.device, self.action);
        let detail = sentence(self.detail.as_deref().unwrap_or(""));
        let hint = sentence(self.hint.as_deref().unwrap_or(""));
        let code = self.error_code.as_ref().map(|c| c.as_str()).unwrap_or("");
        let text = match self.status {
            Status::Accepted | Status::Running => {
                let left = self
                    .estimated_remaining_seconds
                    .map(|s| {
                        if s < 0.1 {
                            " (less than 0.1 s left)".to_string()
                        } else {
                            format!(" (about {s:.1} s left)")
                        }
                    })
                    .unwrap_or_default();
                format!(
                    "{}, not yet done: {what} is {}{left}. Call get_command_status with command_id {} to learn whether the device confirmed it.",
                    if self.status == Status::Accepted {
                        "Accepted"
                    } else {
                        "Running"
                    },
                    if self.status == Status::Accepted {
                        "queued or being written"
                    } else {
                        "in progress"
                    },
                    self.command_id
                )
            }
            Status::Completed if self.verified => {
                format!(
                    "Completed and confirmed by the device's feedback: {what}. {}",
                    evidence_text(&self.evidence)
                )
            }
            Status::Completed => format!("Completed by readback only: {what}. {hint}"),
            Status::Sent => format!("Sent, not confirmed: {what}. {hint}"),
            Status::Cancelled => format!("Cancelled: {what}. {detail}"),
            Status::Rejected => {
                format!("Rejected ({code}), nothing was sent: {what}. {detail} {hint}")
            }
            Status::Failed | Status::Timeout => {
                format!(
                    "{} ({code}): {what}. {detail} {hint}",
                    if self.status == Status::Failed {
                        "Failed"
                    } else {
                        "Timed out"
                    }
                )
            }
        };
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// The text as a sentence: trimmed, ending with a full stop (or its own ? or !), or empty.
fn sentence(s: &str) -> String {
    let s = s.trim();
    match s.chars().last() {
        None => String::new(),
        Some('.' | '!' | '?') => s.to_string(),
        Some(_) => format!("{s}."),
    }
}

fn round_s(s: f64) -> f64 {
    (s.max(0.0) * 1000.0).round() / 1000.0
}

/// `name = value unit, ...` from an evidence object.
pub fn evidence_text(evidence: &serde_json::Value) -> String {
    let Some(map) = evidence.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            let value = v.get("value").map(|x| x.to_string()).unwrap_or_default();
            let unit = v
                .get("unit")
                .and_then(|u| u.as_str())
                .map(|u| format!(" {u}"))
                .unwrap_or_default();
            format!("{k} = {value}{unit}")
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("Evidence: {}.", parts.join(", "))
    }
}
