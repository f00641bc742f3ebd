//! The result object (docs/architecture.md): what an agent sees of a command.
//!
//! Built from the same rows the journal stores, so a result served from memory while the command
//! runs and one served from the journal after a restart are the same object.

use crate::clock::rfc3339;
use crate::contract::{ErrorCode, Status};
use closedloop_journal::{CommandRow, EventRow};
use serde::Serialize;
use std::fmt::Write as _;

/// One entry of a command's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// RFC 3339 UTC with milliseconds.
    pub at: String,
    /// `received`, `accepted`, `dispatched`, `device_ack`, `signal`, `retry`, `cancel_sent`,
    /// `internal_error` (closedloop itself failed supervising it; `supervision/crash.rs`), or the terminal
    /// status.
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
    /// Completed, but `done_when` already held at dispatch and its signals never moved: the
    /// device was already in that state, and nothing shows it acted. Shown only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub already: bool,
    /// The signal values that decided the outcome: `{name: {value, at, source}}`.
    pub evidence: serde_json::Value,
    /// A number while `accepted`/`running`, else null: the time until the action is expected
    /// done (`expect_s` after dispatch), 0 once that has passed.
    pub estimated_remaining_seconds: Option<f64>,
    /// Seconds until the command's deadline, once dispatched: the text says how long it is
    /// still given when it takes longer than expected. Not part of the result object.
    #[serde(skip)]
    pub deadline_in_s: Option<f64>,
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
            already: events
                .iter()
                .any(|e| e.event == "completed" && e.data.get("already") == Some(&true.into())),
            evidence: row.evidence.clone(),
            estimated_remaining_seconds: if status.is_terminal() {
                None
            } else {
                remaining_s.map(round_s)
            },
            deadline_in_s: None,
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
    /// its first and last readings; each stretch of readings between them becomes one `omitted`
    /// entry counting it, stamped with its first reading's time, so the timeline stays in time
    /// order (a single marker before the last reading put a `recovered` ahead of readings the
    /// previous owner took before it). A 5 s move read every 20 ms would otherwise carry hundreds
    /// of readings (~40 KB) that a model reads in full; the whole timeline stays in the journal
    /// (`Engine::timeline`). Consumes the result: a finished command's answer is built on every
    /// `get_command_status`, and a copy of it made only to be cut down and dropped cost as much
    /// as the answer itself.
    pub fn into_model(mut self) -> CommandResult {
        let readings = self.timeline.iter().filter(|e| e.event == "signal").count();
        if readings <= 2 {
            return self;
        }
        let mut timeline = Vec::new();
        let mut seen = 0;
        // The stretch being left out: its first reading's time and how many it holds.
        let mut stretch: Option<(String, usize)> = None;
        for e in std::mem::take(&mut self.timeline) {
            if e.event == "signal" {
                seen += 1;
                if seen != 1 && seen != readings {
                    match &mut stretch {
                        Some((_, n)) => *n += 1,
                        None => stretch = Some((e.at, 1)),
                    }
                    continue;
                }
            }
            // The last reading is kept, so every stretch ends before the timeline does.
            if let Some((at, n)) = stretch.take() {
                let mut data = serde_json::Map::new();
                data.insert("omitted".into(), serde_json::json!(n));
                let event = "omitted".into();
                timeline.push(TimelineEntry { at, event, data });
            }
            timeline.push(e);
        }
        self.timeline = timeline;
        self
    }

    /// The device, the action and the parameters it was called with ("slide move_to with
    /// target_mm = 150"): the text names what the device confirmed, or is doing.
    fn what(&self) -> String {
        let mut what = format!("{} {}", self.device, self.action);
        let Some(params) = self.params.as_object().filter(|p| !p.is_empty()) else {
            return what;
        };
        for (i, (k, v)) in params.iter().enumerate() {
            what.push_str(if i == 0 { " with " } else { ", " });
            let _ = write!(what, "{k} = {v}");
        }
        what
    }

    /// The seconds until the deadline, for the text (see [`CommandResult::deadline_in_s`]).
    pub fn with_deadline_in(mut self, seconds: Option<f64>) -> CommandResult {
        self.deadline_in_s = seconds.filter(|_| !self.status.is_terminal()).map(round_s);
        self
    }

    /// " (about 1.5 s left)" while the action is expected to take longer; past that, how long
    /// the deadline still gives it — never "less than 0.1 s left" with seconds to go.
    fn time_left(&self) -> String {
        let expected = self.estimated_remaining_seconds;
        match (expected, self.deadline_in_s) {
            (Some(s), _) if s >= 0.1 => format!(" (about {s:.1} s left)"),
            (_, Some(d)) if d >= 0.1 => {
                format!(" (expected done by now; its deadline is in {d:.1} s)")
            }
            (_, Some(_)) => " (at its deadline)".to_string(),
            // Queued: nothing is due yet, so nothing is "left".
            (Some(_), None) if self.status == Status::Running => {
                " (less than 0.1 s left)".to_string()
            }
            (_, None) => String::new(),
        }
    }

    /// A short text for a model, saying what is known and what to do next.
    pub fn summary(&self) -> String {
        let what = format!("{} {}", self.device, self.action);
        // Failures and rejections name the arguments in their detail ("Asked for: …").
        let what_with_params = self.what();
        let detail = sentence(self.detail.as_deref().unwrap_or(""));
        let hint = sentence(self.hint.as_deref().unwrap_or(""));
        let code = self.error_code.as_ref().map(|c| c.as_str()).unwrap_or("");
        let text = match self.status {
            Status::Accepted | Status::Running => {
                let left = self.time_left();
                format!(
                    "{}, not yet done: {what_with_params} is {}{left}. Call get_command_status with command_id {} to learn whether the device confirmed it.",
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
            Status::Completed if self.already => {
                format!(
                    "Completed, but the device was already in that state: {what_with_params}. Nothing shows it acted. {}",
                    evidence_text(&self.evidence)
                )
            }
            Status::Completed if self.verified => {
                format!(
                    "Completed and confirmed by the device's feedback: {what_with_params}. {}",
                    evidence_text(&self.evidence)
                )
            }
            Status::Completed => format!("Completed by readback only: {what_with_params}. {hint}"),
            Status::Sent => format!("Sent, not confirmed: {what_with_params}. {hint}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at: u32, event: &str) -> TimelineEntry {
        TimelineEntry {
            at: format!("2026-12-02T10:00:{at:02}.000Z"),
            event: event.into(),
            data: serde_json::Map::new(),
        }
    }

    /// The regression: one `omitted` marker went just before the last reading, so a milestone
    /// among the readings (`recovered`, after an owner died mid-move) stood ahead of readings
    /// taken before it.
    #[test]
    fn a_milestone_among_readings_keeps_its_place_in_time() {
        let row = crate::fixtures::row("c", "completed");
        let mut r = CommandResult::from_rows(&row, &[], None);
        let events = [
            (1, "dispatched"),
            (2, "signal"),
            (3, "signal"),
            (4, "signal"),
            (5, "recovered"),
            (6, "signal"),
            (7, "signal"),
            (8, "signal"),
            (9, "completed"),
        ];
        r.timeline = events.iter().map(|&(at, e)| entry(at, e)).collect();
        let short = r.into_model();
        let shown: Vec<(&str, &str, Option<u64>)> = short
            .timeline
            .iter()
            .map(|e| {
                let omitted = e.data.get("omitted").and_then(|n| n.as_u64());
                (&e.at[17..19], e.event.as_str(), omitted)
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("01", "dispatched", None),
                ("02", "signal", None),
                ("03", "omitted", Some(2)),
                ("05", "recovered", None),
                ("06", "omitted", Some(2)),
                ("08", "signal", None),
                ("09", "completed", None),
            ]
        );
        let times: Vec<&str> = short.timeline.iter().map(|e| e.at.as_str()).collect();
        assert!(times.is_sorted(), "out of time order: {times:?}");
    }

    #[test]
    fn two_readings_or_fewer_are_all_kept() {
        let row = crate::fixtures::row("c", "completed");
        let mut r = CommandResult::from_rows(&row, &[], None);
        r.timeline = vec![
            entry(1, "signal"),
            entry(2, "signal"),
            entry(3, "completed"),
        ];
        assert_eq!(r.clone().into_model(), r);
    }
}
