//! Output schemas of the fixed tools, and the result object's schema shared by every action tool.
//!
//! Kept permissive where a result can legitimately lack a field (an unknown `command_id` has no
//! status), because clients validate `structuredContent` against these schemas.

use serde_json::{Value, json};

/// The result object (docs/architecture.md).
pub fn result_object() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command_id": {"type": "string", "description": "UUIDv7 of the command."},
            "request_id": {"type": "string", "description": "Server-minted id of the tool call that created it."},
            "device": {"type": "string"},
            "action": {"type": "string"},
            "params": {"type": "object"},
            "status": {"type": "string", "enum": ["rejected", "accepted", "running", "completed", "failed", "timeout", "sent", "cancelled", "needs_confirmation"]},
            "confirmation_token": {"type": "string", "description": "With needs_confirmation: pass it to confirm_command once the user agreed."},
            "expires_in_s": {"type": "number"},
            "verified": {"type": "boolean", "description": "True only when feedback read after the acknowledged write decided the outcome."},
            "verification": {"type": "string", "enum": ["feedback", "readback", "none"]},
            "error_code": {"type": "string"},
            "detail": {"type": "string"},
            "hint": {"type": "string"},
            "readback_matched": {"type": "boolean"},
            "already": {"type": "boolean", "description": "Completed, but the device was already in that state before the write and nothing shows it acted. Present only when true."},
            "evidence": {"type": "object", "description": "Signal values that decided the outcome: {name: {value, at, source}}."},
            "estimated_remaining_seconds": {"type": ["number", "null"]},
            "retry_after_s": {"type": "number", "description": "With RATE_LIMITED: seconds until the call may succeed."},
            "accepted_at": {"type": ["string", "null"]},
            "updated_at": {"type": "string"},
            "timeline": {"type": "array", "items": {"type": "object"}}
        }
    })
}

/// `list_commands`.
pub fn command_list() -> Value {
    json!({
        "type": "object",
        "properties": {
            "commands": {"type": "array", "items": result_object()},
            "omitted": {"type": "integer", "description": "Older commands left out to keep the answer under 4 KB."}
        },
        "required": ["commands"]
    })
}

/// `get_device_state`.
pub fn device_state() -> Value {
    json!({
        "type": "object",
        "properties": {
            "device": {"type": "string"},
            "liveness": {"type": "string", "enum": ["online", "offline", "unknown"]},
            "last_seen": {"type": ["string", "null"]},
            "signals": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "value": {},
                        "unit": {"type": "string"},
                        "at": {"type": ["string", "null"], "description": "When it was read (taken, for a retained message whose payload carries a time the plant names); null for a value known only from a retained message without one."},
                        "age_ms": {"type": ["integer", "null"], "description": "How old it is; null when its age is unknown (retained, no time in its payload)."},
                        "retained": {"type": "boolean", "description": "Only from a message the broker retained, sent at an earlier time (unknown unless its payload carries one): shown, never decided on."},
                        "source": {"type": "string"},
                        "unreadable": {"type": "boolean", "description": "The signal's last read failed (see unreadable): this is its last good value, as old as age_ms says, not a current one."}
                    },
                    "required": ["value", "at", "age_ms", "source"]
                }
            },
            "unreadable": {
                "type": "object",
                "description": "Declared signals whose last read failed (the device refused them), with why and since when: they have no current value.",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"error_code": {"type": "string"}, "detail": {"type": "string"}, "since": {"type": "string"}},
                    "required": ["error_code", "detail", "since"]
                }
            },
            "detail": {"type": "string"},
            "alarms": {"type": "array", "items": {"type": "string"}, "description": "Standing alarms that block the device now."},
            "owner": {"type": "string", "description": "The gateway holding the device's lease, when several share one journal: only it writes to the device."},
            "epoch": {"type": "integer", "description": "The epoch of that lease; it rises with every change of owner."},
            "read_by": {"type": "string", "description": "The gateway whose reads liveness and signals are, when not this one's: the owner's, shown because this gateway cannot read the device itself."}
        },
        "required": ["device", "liveness", "signals"]
    })
}

/// `list_devices`.
pub fn device_list() -> Value {
    json!({
        "type": "object",
        "properties": {
            "devices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "device": {"type": "string"},
                        "description": {"type": "string"},
                        "liveness": {"type": "string", "enum": ["online", "offline", "unknown"]},
                        "actions": {"type": "array", "items": {"type": "string"}},
                        "owner": {"type": "string", "description": "The gateway holding the device's lease, when several share one journal."},
                        "epoch": {"type": "integer"},
                        "signals": {"type": "array", "items": {"type": "string"}},
                        "unreadable": {"type": "array", "items": {"type": "string"}, "description": "Signals whose last read failed: get_device_state says why and since when."}
                    },
                    "required": ["device", "liveness"]
                }
            },
            "total": {"type": "integer", "description": "Devices in the plant."},
            "next_cursor": {"type": "string", "description": "Present when more devices follow: pass it as cursor for the next page."}
        },
        "required": ["devices", "total"]
    })
}

/// Input schema of `list_devices`.
pub fn device_page_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cursor": {"type": "string", "description": "The next_cursor of the page before; none for the first page."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20, "description": "Devices per page."}
        },
        "additionalProperties": false
    })
}

/// Input schema of `get_command_status`.
pub fn status_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command_id": {"type": "string", "description": "The command_id an action tool returned."},
            "wait_s": {"type": "number", "minimum": 0, "maximum": 10, "default": 3,
                       "description": "Wait up to this many seconds for a final status (progress notifications are sent while waiting when the request has a progress token)."}
        },
        "required": ["command_id"],
        "additionalProperties": false
    })
}

/// Input schema of `cancel_command`.
pub fn cancel_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command_id": {"type": "string"},
            "wait_s": {"type": "number", "minimum": 0, "maximum": 10, "default": 5,
                       "description": "Wait up to this many seconds for the stop to be confirmed (the device reads stopped) before returning."}
        },
        "required": ["command_id"],
        "additionalProperties": false
    })
}

/// Input schema of `list_commands`.
pub fn list_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "device": {"type": "string", "description": "Only this device."},
            "status": {"type": "string", "enum": ["rejected", "accepted", "running", "completed", "failed", "timeout", "sent", "cancelled"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 20}
        },
        "additionalProperties": false
    })
}

/// Input schema of `get_device_state`.
pub fn device_input() -> Value {
    json!({
        "type": "object",
        "properties": {"device": {"type": "string", "description": "A device id from list_devices."}},
        "required": ["device"],
        "additionalProperties": false
    })
}

/// Input schema of `keep_alive`.
pub fn keep_alive_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command_id": {"type": "string", "description": "The command_id of a running dead-man action."}
        },
        "required": ["command_id"],
        "additionalProperties": false
    })
}

/// Input schema of a tool without arguments (`list_alarms`).
pub fn empty_input() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// Input schema of `confirm_command`.
pub fn confirm_input(default_wait_s: f64) -> Value {
    json!({
        "type": "object",
        "properties": {
            "confirmation_token": {"type": "string", "description": "The token a needs_confirmation result returned."},
            "wait_s": closedloop_plant::wait_s_property(default_wait_s)
        },
        "required": ["confirmation_token"],
        "additionalProperties": false
    })
}

/// Input schema of `run_action` (generic tool mode).
pub fn run_action_input(devices: &[String], default_wait_s: f64) -> Value {
    json!({
        "type": "object",
        "properties": {
            "device": {"type": "string", "enum": devices, "description": "A device id (describe_device lists its actions)."},
            "action": {"type": "string", "description": "An action name of that device."},
            "params": {"type": "object", "description": "The action's parameters, as describe_device's input_schema says."},
            "wait_s": closedloop_plant::wait_s_property(default_wait_s),
            "idempotency_key": {"type": "string"},
            "confirmation_token": {"type": "string"}
        },
        "required": ["device", "action"],
        "additionalProperties": false
    })
}

/// Output schema of `describe_device`.
pub fn describe_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "device": {"type": "string"},
            "description": {"type": "string"},
            "liveness": {"type": "string"},
            "signals": {"type": "array", "items": {"type": "object"}},
            "actions": {"type": "array", "items": {"type": "object"}}
        },
        "required": ["device", "actions"]
    })
}
