//! Rejections: a call refused before anything is written is still a command, journaled with
//! its code, detail and hint, so `get_command_status`, the audit trail and an idempotent replay
//! all see the same refusal the caller saw.

use crate::api::new_row;
use crate::contract::ErrorCode;
use crate::engine::Engine;
use crate::machine::{Event, Machine};
use crate::profile::profile;
use crate::result::CommandResult;
use crate::{EngineError, Submission};
use closedloop_journal::EventRow;
use closedloop_plant::{Action, Params};
use serde_json::json;

impl Engine {
    /// Journals `refusal` as a rejected command (nothing was written to the device) and returns
    /// its result object.
    pub(crate) async fn reject(
        &self,
        sub: &Submission,
        request_id: &str,
        action: &Action,
        refusal: Refusal,
    ) -> Result<CommandResult, EngineError> {
        let Refusal {
            code,
            detail,
            keep_key,
            retry_after_s,
            hint,
        } = refusal;
        // The machine decides what a rejection is (status, code, no verification), as it does
        // for every other outcome; this only journals it.
        let detail = crate::detail::tidy(&detail);
        let mut machine = Machine::new(profile(action));
        let reject = Event::Reject {
            code,
            detail: detail.clone(),
        };
        let Some(crate::machine::Effect::Finish(o)) = machine.on(reject).pop() else {
            unreachable!("a received command always ends on Reject");
        };
        let code = o.code.clone().unwrap_or(ErrorCode::InvalidParams);
        let now = self.ctx.clock.now_ms();
        // Normalised when they validate (a replay compares like with like), else as given.
        let params = action
            .check_params(&sub.args)
            .ok()
            .and_then(|p| serde_json::to_value(p).ok())
            .unwrap_or_else(|| serde_json::Value::Object(sub.args.clone()));
        let mut row = new_row(sub, request_id, action, &Params::new(), o.status, now);
        row.params = bounded(params);
        row.verified = o.verified;
        row.error_code = Some(code.as_str().into());
        row.hint = hint.map(Into::into).or_else(|| crate::detail::hint(&o));
        let detail = clipped(&detail, MAX_DETAIL);
        row.detail = Some(detail.clone());
        if !keep_key {
            row.idempotency_key = None;
        }
        let events = vec![
            EventRow {
                at_ms: now,
                event: "received".into(),
                data: json!({"request_id": request_id}),
            },
            EventRow {
                at_ms: now,
                event: "rejected".into(),
                data: match retry_after_s {
                    Some(s) => json!({"code": code.as_str(), "detail": detail, "retry_after_s": s}),
                    None => json!({"code": code.as_str(), "detail": detail}),
                },
            },
        ];
        self.ctx.journal.insert(&row, &events).await?;
        crate::metrics::ended(&row.device, &row.action, o.status, Some(&code), None);
        tracing::info!(request_id = %row.request_id, command_id = %row.command_id, device = %row.device,
                       action = %row.action, code = %code, detail = %detail, "command rejected");
        Ok(CommandResult::from_rows(&row, &events, None))
    }
}

/// Why a call is refused before anything is written, and how its journal row treats the key.
pub(crate) struct Refusal {
    code: ErrorCode,
    detail: String,
    /// Whether the idempotency key stays with the rejection (a replay returns it) or stays free.
    keep_key: bool,
    /// With `RATE_LIMITED`: seconds until the call may succeed.
    retry_after_s: Option<f64>,
    /// What to do next when the code's own hint would mislead (a `DEVICE_BUSY` that no other
    /// command causes: the device is another gateway's, or its lease is changing hands).
    hint: Option<&'static str>,
}

impl Refusal {
    /// Why, in words.
    pub(crate) fn detail(&self) -> &str {
        &self.detail
    }

    /// A refusal that keeps the idempotency key: a replay of the call returns it.
    pub(crate) fn kept(code: ErrorCode, detail: String) -> Refusal {
        Refusal {
            code,
            detail,
            keep_key: true,
            retry_after_s: None,
            hint: None,
        }
    }

    /// A refusal that leaves the key free (a caller's scope, a key used with other arguments).
    pub(crate) fn freed(code: ErrorCode, detail: String) -> Refusal {
        Refusal {
            keep_key: false,
            ..Refusal::kept(code, detail)
        }
    }

    /// A spent operation-rate limit: transient, so the key stays free for the retry.
    pub(crate) fn rate_limited(detail: String, wait_s: f64) -> Refusal {
        Refusal {
            retry_after_s: Some(wait_s),
            ..Refusal::freed(ErrorCode::RateLimited, detail)
        }
    }

    /// A refusal by a gateway that must not drive the device now: the key stays free, so the
    /// same call (same key) can be sent to the owner or made again once the lease settled.
    pub(crate) fn not_here(detail: String, hint: &'static str) -> Refusal {
        Refusal {
            hint: Some(hint),
            ..Refusal::freed(ErrorCode::DeviceBusy, detail)
        }
    }
}

/// Arguments of a rejected call kept in full up to this size; beyond it, a digest.
const MAX_ARGS: usize = 2048;
/// Longest `detail` journaled for a rejection (it may quote what the caller sent).
const MAX_DETAIL: usize = 1024;

/// The arguments as journaled: in full when small, else their size, SHA-256 and first 2 KB —
/// a caller sending megabytes of garbage cannot grow the journal with it.
fn bounded(args: serde_json::Value) -> serde_json::Value {
    let text = args.to_string();
    if text.len() <= MAX_ARGS {
        return args;
    }
    use sha2::Digest;
    let sha: String = sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"omitted": "arguments over 2 KB", "bytes": text.len(), "sha256": sha,
           "head": clipped(&text, MAX_ARGS)})
}

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
fn clipped(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
