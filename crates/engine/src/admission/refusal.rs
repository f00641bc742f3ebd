//! Rejections: a call refused before anything is written is still a command, journaled with
//! its code, detail and hint, so `get_command_status`, the audit trail and an idempotent replay
//! all see the same refusal the caller saw.

use crate::api::new_row;
use crate::contract::ErrorCode;
use crate::engine::Engine;
use crate::machine::profile::profile;
use crate::machine::{Event, Machine};
use crate::views::result::CommandResult;
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
        let detail = crate::views::detail::tidy(&detail);
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
        let mut row = new_row(sub, request_id, action, &Params::new(), o.status, now);
        row.params = journaled_args(action, &sub.args);
        row.verified = o.verified;
        row.error_code = Some(code.as_str().into());
        row.hint = hint
            .map(Into::into)
            .or_else(|| crate::views::detail::hint(&o));
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

/// Longest `detail` journaled for a rejection (it may quote what the caller sent).
const MAX_DETAIL: usize = 1024;

/// A rejected call's arguments as journaled: normalised when they validate — declared, typed
/// parameters, as an accepted command's are (and a replay compares like with like) — else a
/// digest: their SHA-256, their size and which declared parameters were among them, never the
/// text. Arguments that do not validate may hold anything a caller typed: a caller once pasted
/// `api_key=…` into one, and the refusal kept it for every reader of the journal; another sent
/// megabytes, which must not grow the journal.
pub(crate) fn journaled_args(
    action: &closedloop_plant::Action,
    args: &serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    if let Some(valid) = (action.check_params(args).ok()).and_then(|p| serde_json::to_value(p).ok())
    {
        return valid;
    }
    use sha2::Digest;
    let text = serde_json::Value::Object(args.clone()).to_string();
    let sha: String = (sha2::Sha256::digest(text.as_bytes()).iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    let declared: Vec<&String> = (args.keys())
        .filter(|k| action.params.iter().any(|p| &p.name == *k))
        .collect();
    let undeclared = args.len() - declared.len();
    json!({"omitted": "arguments that do not validate are kept as a digest", "bytes": text.len(),
           "sha256": sha, "parameters": declared, "undeclared": undeclared})
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
