//! The one place a terminal row is made. Every command that ends after acceptance — judged,
//! cancelled, failed, or found unfinished at start-up — is journaled through [`Ending`], built
//! from the machine's [`Outcome`]; rejections are inserted whole by `admission/submit.rs`, from the
//! machine's outcome too.

use crate::contract::ErrorCode;
use crate::machine::Outcome;
use closedloop_journal::CommandRow;
use serde_json::{Value, json};

/// The timeline event that marks a command ended by closedloop's own failure.
pub const INTERNAL_ERROR: &str = "internal_error";

/// The `internal_error` timeline entry for a panic whose message is `why`.
pub(crate) fn internal_error_event(why: &str) -> (&'static str, serde_json::Value) {
    (INTERNAL_ERROR, json!({ "message": why }))
}

/// A command's terminal status with everything the journal keeps of it.
#[derive(Debug, Clone)]
pub(crate) struct Ending {
    outcome: Outcome,
    detail: Option<String>,
    hint: Option<String>,
    /// `None` keeps the row's evidence as it is (nothing was read to show).
    evidence: Option<Value>,
}

impl Ending {
    /// The ending of `outcome`, its `detail` already rendered; the hint follows from the outcome.
    pub(crate) fn new(outcome: Outcome, detail: Option<String>, evidence: Option<Value>) -> Ending {
        let hint = crate::views::detail::hint(&outcome);
        Ending {
            outcome,
            detail,
            hint,
            evidence,
        }
    }

    /// Writes the terminal fields into the row.
    pub(crate) fn apply(&self, r: &mut CommandRow) {
        let o = &self.outcome;
        r.status = o.status.as_str().into();
        r.verified = o.verified;
        r.error_code = o.code.as_ref().map(|c| c.as_str().to_string());
        r.detail = self.detail.clone();
        r.hint = self.hint.clone();
        r.readback_matched = o.readback_matched;
        if let Some(e) = &self.evidence {
            r.evidence = e.clone();
        }
    }

    /// The timeline entry: the status as the event, with the code and the detail.
    pub(crate) fn events(&self) -> Vec<(&'static str, Value)> {
        let o = &self.outcome;
        let mut data = data(o.code.as_ref(), self.detail.as_deref());
        if o.reason == crate::machine::Reason::AlreadySo {
            // What `CommandResult::already` is read from, here and after a restart.
            data["already"] = json!(true);
        }
        vec![(o.status.as_str(), data)]
    }
}

fn data(code: Option<&ErrorCode>, detail: Option<&str>) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(c) = code {
        m.insert("code".into(), json!(c.as_str()));
    }
    if let Some(d) = detail {
        m.insert("detail".into(), json!(d));
    }
    if m.is_empty() {
        Value::Null
    } else {
        Value::Object(m)
    }
}
