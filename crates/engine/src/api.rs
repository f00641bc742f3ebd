//! The shapes the engine's API takes and returns (docs/architecture.md), apart from the result
//! object.

use crate::device::Liveness;
use closedloop_link::Shown;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// A request to run an action.
#[derive(Debug, Clone, Default)]
pub struct Submission {
    /// Device id.
    pub device: String,
    /// Action name.
    pub action: String,
    /// The tool call's arguments, without `wait_s` and `idempotency_key`.
    pub args: serde_json::Map<String, serde_json::Value>,
    /// The tool call's id; minted when absent.
    pub request_id: Option<String>,
    /// Same key + same arguments → the same command.
    pub idempotency_key: Option<String>,
    /// Who asked (token name, `stdio`), journaled for audit.
    pub caller: Option<String>,
    /// Wait up to this long for a terminal status before answering (capped at `MAX_WAIT`, 10 s).
    pub wait: Duration,
    /// The caller confirmed an action declared `confirm = true`.
    pub confirmed: bool,
    /// Who confirmed it (the caller itself, or a `[server] confirm_by` token): journaled in the
    /// data of the `accepted` event, for the audit trail.
    pub confirmed_by: Option<String>,
    /// The caller lacks the scope for this device: the command is journaled as rejected
    /// `UNAUTHORIZED` with this text, and nothing else is checked or sent.
    pub denied: Option<String>,
    /// Use this id for the command instead of minting one (a Tasks client was already told the
    /// id while the command waited for its confirmation). Must be a fresh UUIDv7.
    pub command_id: Option<String>,
    /// The caller's W3C `traceparent`, journaled on the `received` entry so that the command's
    /// trace span (OTLP) is a child of the caller's; the MCP layer passes only a valid one.
    pub traceparent: Option<String>,
}

/// `get_device_state`'s answer.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceState {
    /// Device id.
    pub device: String,
    /// `online`, `offline` or `unknown`.
    pub liveness: Liveness,
    /// When the device last gave a valid answer.
    pub last_seen: Option<String>,
    /// `last_seen` in wall-clock milliseconds, for `/metrics` (not serialised).
    #[serde(skip)]
    pub last_seen_ms: Option<i64>,
    /// Every signal read so far.
    pub signals: BTreeMap<String, SignalState>,
    /// Declared signals the device refuses to read (wrong address or width), with why: a
    /// signal that cannot be read is named here instead of silently missing from `signals`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unreadable: BTreeMap<String, UnreadableSignal>,
    /// The standing alarms that block the device now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<String>,
    /// In words: which signals cannot be read, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The gateway instance holding the device's lease, when several share one journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The epoch of that lease (it rises with every change of owner).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// The gateway whose reads `liveness` and `signals` are, when not this one's: the owner's
    /// published values, shown because this gateway cannot read the device itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_by: Option<String>,
}

/// A declared signal whose reads the device refuses.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnreadableSignal {
    /// `REGISTER_INVALID` (exception 1–3) or `BUS_NAK`.
    pub error_code: String,
    /// The request and the device's answer, e.g. `discrete_input:9 answered exception 2
    /// (Illegal Data Address)`.
    pub detail: String,
    /// When its reads began failing (RFC 3339): its value in `signals`, if any, is older.
    pub since: String,
}

/// One signal in [`DeviceState`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SignalState {
    /// The value.
    pub value: serde_json::Value,
    /// Its unit, if declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// When it was read, or taken when its payload says so (`time_json`); `None` for a value
    /// known only from a retained message without such a time, sent at a moment nobody can tell.
    pub at: Option<String>,
    /// How old it is now; `None` with `retained` and no time in its payload (its age is unknown,
    /// never the time since the gateway received it: a 21.7 s old retained value was once shown
    /// 1.4 s old).
    pub age_ms: Option<i64>,
    /// The value comes only from a retained message: shown, never decided on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub retained: bool,
    /// Where it came from.
    pub source: String,
    /// The signal's last read failed (see `unreadable`): this value is its last good one,
    /// history with its true age, not a current value. Shown only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unreadable: bool,
}

impl SignalState {
    /// A sample as a device state shows it at `now_ms` ([`Shown::dated`]): dated by its
    /// payload's time when it names one, undated when only a retained message without a time
    /// gave it (numbered 0: not read by this gateway).
    pub(crate) fn of(
        v: &crate::SignalValue,
        unit: Option<&str>,
        now_ms: i64,
        unreadable: bool,
    ) -> SignalState {
        SignalState::shown(&Shown::dated(v, unit), now_ms, unreadable)
    }

    /// A shown value as a device state at `now_ms`: here ([`SignalState::of`]) or from the
    /// owner's published values (`ownership::values::from_owner`), the same fields by one rule.
    pub(crate) fn shown(s: &Shown, now_ms: i64, unreadable: bool) -> SignalState {
        SignalState {
            value: s.value.clone(),
            unit: s.unit.map(str::to_string),
            at: s.at_ms.map(crate::clock::rfc3339),
            age_ms: s.at_ms.map(|t| (now_ms - t).max(0)),
            retained: s.retained,
            source: s.source.to_string(),
            unreadable,
        }
    }
}

/// A device's health as `/metrics` reports it at each scrape (`Engine::health`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceHealth<'a> {
    /// The device id.
    pub device: &'a str,
    /// Its liveness judged now.
    pub liveness: crate::Liveness,
    /// How many milliseconds ago it last answered; `None` before its first answer.
    pub age_ms: Option<i64>,
    /// How long its last poll cycle took; `None` for a device that is not polled.
    pub last_poll: Option<std::time::Duration>,
    /// Poll ticks at which its previous cycle still ran, so none was issued: its reads come less
    /// often than its `poll_ms` says (0 for a device that is not polled).
    pub polls_missed: u64,
    /// How many of its signals' last reads failed.
    pub unreadable: usize,
}

/// `list_devices`'s entries.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceInfo {
    /// Device id.
    pub device: String,
    /// The plant's business description.
    pub description: String,
    /// `online`, `offline` or `unknown`.
    pub liveness: Liveness,
    /// Action names.
    pub actions: Vec<String>,
    /// Signal names.
    pub signals: Vec<String>,
    /// The signals whose last read failed (`get_device_state` says why and since when).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// The gateway instance holding the device's lease, when several share one journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The epoch of that lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
}

impl DeviceInfo {
    /// The same JSON as serialising it, made by moving its strings instead of copying them: a
    /// `list_devices` page is built, sent and dropped on every call.
    pub fn into_json(self) -> serde_json::Value {
        use serde_json::Value;
        let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
        let mut m = serde_json::Map::new();
        m.insert("device".into(), Value::String(self.device));
        m.insert("description".into(), Value::String(self.description));
        m.insert("liveness".into(), self.liveness.as_str().into());
        m.insert("actions".into(), strings(self.actions));
        m.insert("signals".into(), strings(self.signals));
        if !self.unreadable.is_empty() {
            m.insert("unreadable".into(), strings(self.unreadable));
        }
        if let Some(owner) = self.owner {
            m.insert("owner".into(), Value::String(owner));
        }
        if let Some(epoch) = self.epoch {
            m.insert("epoch".into(), epoch.into());
        }
        Value::Object(m)
    }
}

/// The journal row of a command made from `sub`: accepted, or refused (`status`).
pub(crate) fn new_row(
    sub: &Submission,
    request_id: &str,
    action: &closedloop_plant::Action,
    params: &closedloop_plant::Params,
    status: crate::contract::Status,
    now: i64,
) -> closedloop_journal::CommandRow {
    closedloop_journal::CommandRow {
        command_id: sub
            .command_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
        request_id: request_id.to_string(),
        device: sub.device.clone(),
        action: sub.action.clone(),
        params: serde_json::to_value(params).unwrap_or(serde_json::Value::Null),
        status: status.as_str().into(),
        verified: false,
        // A feedback criterion that reads only what the action writes verifies by readback.
        verification: action.effective_verification().as_str().into(),
        error_code: None,
        detail: None,
        hint: None,
        evidence: serde_json::json!({}),
        readback_matched: None,
        accepted_at_ms: now,
        updated_at_ms: now,
        deadline_ms: None,
        dispatched: false,
        caller: sub.caller.clone(),
        idempotency_key: sub.idempotency_key.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_entry_moved_into_json_equals_its_serialisation() {
        let plain = DeviceInfo {
            device: "lamp".into(),
            description: "The desk \"lamp\".".into(),
            liveness: Liveness::Online,
            actions: vec!["switch".into()],
            signals: vec!["contact".into(), "coil".into()],
            unreadable: vec!["coil".into()],
            owner: None,
            epoch: None,
        };
        let leased = DeviceInfo {
            owner: Some("gw-a".into()),
            epoch: Some(7),
            liveness: Liveness::Offline,
            ..plain.clone()
        };
        for d in [plain, leased] {
            assert_eq!(serde_json::to_value(&d).unwrap(), d.clone().into_json());
        }
    }
}
