//! `act_and_confirm(device, action)`: how to run one action honestly — the call, following the
//! command to a final status, what counts as success, and what each error code means for it.

use super::words::in_words;
use super::{about, ids, json_str, signal_line};
use crate::Server;
use closedloop_plant::{Action, Device, Verification};
use rmcp::model::{GetPromptResult, PromptMessage, Role};
use serde_json::json;
use std::fmt::Write as _;

impl Server {
    pub(super) fn act_and_confirm(&self, device: &Device, action: &Action) -> GetPromptResult {
        let id = &device.id;
        let state = self.engine.device_state(id);
        let mut t = String::new();
        let _ = writeln!(
            t,
            "Run the action \"{}\" of the device \"{id}\"{} and tell the user only what the \
             hardware confirmed. {}\n",
            action.name,
            about(device),
            action.description.trim()
        );
        let _ = writeln!(t, "## The tool: {}\n", action.tool_name);
        if action.params.is_empty() {
            let _ = writeln!(t, "It takes no parameters of its own.");
        } else {
            let _ = writeln!(t, "Parameters (all required):");
            for p in &action.params {
                let _ = match &p.ask {
                    None => writeln!(t, "- {}", param_text(p)),
                    Some(q) => writeln!(
                        t,
                        "- {}: not yours to pass; the tool asks the person (\"{q}\")",
                        p.name
                    ),
                };
            }
        }
        let wait_s = self.engine.plant().server.default_wait_s;
        let max = closedloop_plant::limits::DEFAULT_WAIT_S.max;
        let _ = writeln!(
            t,
            "Optional: wait_s (0–{max} s, default {wait_s}; 0 answers at once) and idempotency_key \
             (the same key with the same arguments returns the same command instead of acting \
             twice — use one, so that repeating a call whose answer was lost is harmless).\n\
             JSON Schema of the arguments: {}\n",
            action.input_schema(wait_s)
        );
        confirm_text(&mut t, device, action);
        if let Some(s) = &state {
            let read = action.signals_read();
            let _ = writeln!(
                t,
                "## The device now\n\n{id} is {}.",
                json_str(&json!(s.liveness))
            );
            for (name, sig) in s.signals.iter().filter(|(n, _)| read.contains(*n)) {
                let _ = writeln!(t, "- {}", signal_line(name, sig));
            }
            if s.liveness != closedloop_engine::Liveness::Online {
                let _ = writeln!(
                    t,
                    "It is not online: the command will most likely be rejected DEVICE_OFFLINE. \
                     Ask a person to check its power and connection rather than calling the tool \
                     again and again."
                );
            }
            t.push('\n');
        }
        procedure_text(&mut t, action);
        codes_text(&mut t, device, action);
        let messages = vec![PromptMessage::new_text(Role::User, t)];
        GetPromptResult::new(messages)
            .with_description(format!("Run {} and confirm it", action.tool_name))
    }
}

fn param_text(p: &closedloop_plant::ParamSpec) -> String {
    let mut s = format!("{}: {}", p.name, p.ty.key());
    match (p.min, p.max) {
        (Some(lo), Some(hi)) => {
            let _ = write!(s, ", from {lo} to {hi}");
        }
        (Some(lo), None) => {
            let _ = write!(s, ", at least {lo}");
        }
        (None, Some(hi)) => {
            let _ = write!(s, ", at most {hi}");
        }
        (None, None) => {}
    }
    if let Some(u) = &p.unit {
        let _ = write!(s, " {u}");
    }
    if let Some(c) = &p.choices {
        let _ = write!(s, ", one of {}", c.join(", "));
    }
    if let Some(d) = &p.description {
        let _ = write!(s, " — {d}");
    }
    s
}

/// How the outcome is confirmed and how long it takes.
fn confirm_text(t: &mut String, d: &Device, a: &Action) {
    let _ = writeln!(t, "## How the outcome is confirmed\n");
    verification_text(t, a);
    conditions_text(t, a);
    deadline_text(t, d, a);
    if a.confirm {
        let _ = writeln!(
            t,
            "- It needs a person's confirmation: nothing moves until the command is confirmed."
        );
    }
    t.push('\n');
}

/// What a completed command of this verification level proves, and what it does not.
fn verification_text(t: &mut String, a: &Action) {
    let _ = match a.effective_verification() {
        Verification::Feedback => writeln!(
            t,
            "Verification: feedback — an independent signal senses the effect, so a completed \
             command carries verified=true and evidence."
        ),
        Verification::Readback => writeln!(
            t,
            "Verification: readback — the written registers are read back; the effect itself is \
             not sensed. A completed command has verified=false and readback_matched=true: say \
             that the device holds the value, not that the effect happened."
        ),
        Verification::None => writeln!(
            t,
            "Verification: none — nothing can be read back. The best outcome is status \"sent\": \
             delivered, not confirmed. Never present it as done; ask the user to check."
        ),
    };
}

/// The conditions the engine checks: before the write, to see it done, and to see it fail.
fn conditions_text(t: &mut String, a: &Action) {
    if let Some(r) = &a.requires {
        let _ = writeln!(
            t,
            "- Only when {} (else rejected INTERLOCK; nothing is written).",
            in_words(r.source())
        );
    }
    if let Some(done) = &a.done_when {
        let _ = writeln!(
            t,
            "- Done when {} (`{}`), on values read after the write was acknowledged.",
            in_words(done.source()),
            done.source()
        );
    }
    if let Some(s) = &a.started_when {
        let _ = writeln!(
            t,
            "- It must first be seen started: {}.",
            in_words(s.source())
        );
    }
    if a.hold_ms > 0 {
        let _ = writeln!(
            t,
            "- The done condition must hold for {} ms in a row.",
            a.hold_ms
        );
    }
    for (code, e) in &a.fail_when {
        let _ = writeln!(
            t,
            "- Fails {code} as soon as {} (`{}`).",
            in_words(e.source()),
            e.source()
        );
    }
}

/// The expected duration and the deadline after which the command ends timeout or failed.
fn deadline_text(t: &mut String, d: &Device, a: &Action) {
    match a.expect_s.source().trim().parse::<f64>() {
        Ok(expect) => {
            let deadline = a.deadline_s(d, expect, false);
            let _ = writeln!(
                t,
                "- Expected duration: about {expect} s. Deadline: {deadline:.2} s after dispatch \
                 ({expect} s × {} + {} ms + one poll of {} ms); then it ends timeout or failed.",
                a.timeout_factor, a.timeout_floor_ms, d.poll_ms
            );
        }
        Err(_) => {
            let _ = writeln!(
                t,
                "- Expected duration: `{}` seconds, computed when it is dispatched. Deadline: \
                 that × {} + {} ms + one poll of {} ms after dispatch.",
                a.expect_s.source(),
                a.timeout_factor,
                a.timeout_floor_ms,
                d.poll_ms
            );
        }
    }
}

fn procedure_text(t: &mut String, a: &Action) {
    let tool = &a.tool_name;
    let _ = writeln!(
        t,
        "## Procedure\n\n\
         1. Call {tool} with the parameters (and an idempotency_key). Pass wait_s when you expect \
         it to finish within 10 s.\n\
         2. Read `status` in the result. \"accepted\" or \"running\" is NOT completion: call \
         get_command_status with the command_id (wait_s up to 10) until the status is final \
         (completed, failed, timeout, sent, cancelled or rejected). Do not call {tool} again \
         meanwhile.\n\
         3. Report:\n\
         - completed with verified=true: it happened. Quote `verified` and the evidence — each \
         signal's value, read time and source.\n\
         - completed with verified=false: only the written value was read back; say the effect \
         was not sensed.\n\
         - sent: delivered, nothing could confirm it; say so and ask the user to check.\n\
         - rejected, failed, timeout or cancelled: it did not (or may not have) happened. Quote \
         error_code, detail and hint, and follow the hint.\n\
         Never tell the user the action happened unless the status is \"completed\"."
    );
    if a.cancel.is_empty() {
        let _ = writeln!(
            t,
            "cancel_command on it drops it while queued; once written, nothing stops it (no \
             cancel plan)."
        );
    } else {
        let _ = writeln!(
            t,
            "cancel_command on it writes its stop ({}) and waits for the device to stand still.",
            a.cancel
                .iter()
                .map(|w| w.describe())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    t.push('\n');
}

/// What each error code means for this action.
fn codes_text(t: &mut String, d: &Device, a: &Action) {
    let _ = writeln!(t, "## Error codes for {}\n", a.tool_name);
    for (code, meaning) in codes(d, a) {
        let _ = writeln!(t, "- {code}: {meaning}");
    }
    let _ = writeln!(
        t,
        "\n{}",
        if a.idempotent {
            "This action is idempotent: the gateway itself re-sends it after a transport error. \
             After a failure, still read the device state before calling it again."
        } else {
            "This action is NOT idempotent: never call it again after failed, timeout or an \
             unanswered call without first reading the device state (get_device_state)."
        }
    );
}

/// The error codes this action can end with, each with what it means for it, in the order the
/// prompt lists them: the codes of its own conditions stand where they arise.
fn codes(d: &Device, a: &Action) -> Vec<(String, String)> {
    let mut codes: Vec<(String, String)> = vec![(
        "INVALID_PARAMS".into(),
        format!(
            "{}; nothing was written. Fix it and call again.",
            params_meaning(a)
        ),
    )];
    if let Some(r) = &a.requires {
        codes.push((
            "INTERLOCK".into(),
            format!(
                "{} did not hold. Bring that about first (or ask the user); do not retry as is.",
                in_words(r.source())
            ),
        ));
    }
    codes.push((
        "DEVICE_OFFLINE".into(),
        format!(
            "{} {} within {} s. Ask the user to check its power and network; do not retry \
             blindly.",
            d.id,
            closedloop_engine::silent_means(&d.driver),
            d.liveness.max_silence_s
        ),
    ));
    codes.push(("DEVICE_BUSY".into(), busy_meaning(a)));
    codes.push((
        "BUS_NAK / REGISTER_INVALID".into(),
        "the bus or device refused the request or the address/value. Check address and power, or \
         the plant file."
            .into(),
    ));
    for (code, e) in &a.fail_when {
        codes.push((
            code.clone(),
            format!(
                "{} went true: the device reports a failure. Ask a person to inspect it; do not retry.",
                in_words(e.source())
            ),
        ));
    }
    codes.extend(feedback_codes(d, a));
    codes.extend([
        (
            "CRC_MISMATCH".into(),
            "an answer was garbled; the write may have taken effect. Query the device state before \
             retrying."
                .into(),
        ),
        (
            "INTERRUPTED".into(),
            "the gateway restarted and could not confirm it. Query the device state.".into(),
        ),
        ("CANCELLED".into(), "cancelled on request.".into()),
        (
            "UNAUTHORIZED".into(),
            format!("the caller lacks the actuate:{} scope.", d.id),
        ),
    ]);
    codes
}

/// Which arguments INVALID_PARAMS can be about.
fn params_meaning(a: &Action) -> String {
    if a.params.is_empty() {
        "an argument was given that it does not take".to_string()
    } else {
        format!(
            "{} missing, of the wrong type or outside its range",
            ids(a.params.iter().map(|p| p.name.as_str()))
        )
    }
}

/// What DEVICE_BUSY means: the queue wait ran out, or the action does not queue at all.
fn busy_meaning(a: &Action) -> String {
    if a.queue {
        format!(
            "another command held {} longer than the {} s this one may wait in the queue. \
             Wait for it or cancel it, then call again.",
            a.exclusive, a.queue_timeout_s
        )
    } else {
        format!(
            "another command holds {} and this action does not queue. Wait for it or cancel it.",
            a.exclusive
        )
    }
}

/// FEEDBACK_MISMATCH and TIMEOUT, which only an action verified by feedback can end with, and
/// NO_FEEDBACK for a device that reports when it likes (MQTT) and may not report at all.
fn feedback_codes(d: &Device, a: &Action) -> Vec<(String, String)> {
    let (Verification::Feedback, Some(done)) = (a.verification, &a.done_when) else {
        return vec![];
    };
    let sigs = ids(done.signals().iter());
    let silent = matches!(d.driver, closedloop_plant::DriverConfig::Mqtt { .. }).then(|| {
        let meaning = format!(
            "{} stayed online but never reported {sigs} after the write: it may have ignored \
             the command. Call get_device_state before acting again.",
            d.id
        );
        ("NO_FEEDBACK".to_string(), meaning)
    });
    silent.into_iter().chain([
        (
            "FEEDBACK_MISMATCH".into(),
            format!(
                "{sigs} never changed after the write: the command reached the device but nothing \
                 physical followed. Ask the user to check wiring and supply; do not assume it happened."
            ),
        ),
        (
            "TIMEOUT".into(),
            format!(
                "{sigs} moved but the done condition never held before the deadline. Call \
                 get_device_state before acting again."
            ),
        ),
    ])
    .collect()
}
