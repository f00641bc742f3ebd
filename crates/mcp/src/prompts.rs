//! Prompts `diagnose_device(device)` and `act_and_confirm(device, action)` (DESIGN §4), written
//! for a model: what the gateway knows right now, which tools to call next, and when to stop and
//! ask a person instead of acting again on real hardware.

use crate::Server;
use closedloop_engine::{CommandResult, DeviceState};
use closedloop_plant::{Action, Device, DriverConfig, Verification};
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, JsonObject, ListPromptsResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, Role,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::fmt::Write as _;

/// How many recent commands `diagnose_device` embeds.
const RECENT_COMMANDS: u32 = 5;

impl Server {
    pub(crate) async fn list_prompts_impl(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let plant = self.engine.plant();
        let devices = ids(plant.devices.iter().map(|d| d.id.as_str()));
        let actions = ids(plant.actions().map(|(d, a)| format!("{}.{}", d.id, a.name)));
        let device_arg = PromptArgument::new("device")
            .with_description(format!("Device id (list_devices names them): {devices}."))
            .with_required(true);
        let diagnose = Prompt::new(
            "diagnose_device",
            Some(
                "Find out why a device misbehaves, the way a technician would: gateway log, bus \
                 traffic, the device itself, then wiring and supply. Embeds the device's current \
                 state and its last commands.",
            ),
            Some(vec![device_arg.clone()]),
        )
        .with_title("Diagnose a device");
        let act = Prompt::new(
            "act_and_confirm",
            Some(
                "Run one action and report only what the hardware confirmed: how to call it, how \
                 to follow the command to a final status, and what each error code means for it.",
            ),
            Some(vec![
                device_arg,
                PromptArgument::new("action")
                    .with_description(format!("Action name of that device ({actions})."))
                    .with_required(true),
            ]),
        )
        .with_title("Act and confirm");
        Ok(ListPromptsResult::with_all_items(vec![diagnose, act]))
    }

    pub(crate) async fn get_prompt_impl(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&cx);
        if !caller.may_read() {
            return Err(crate::resources::forbidden(&caller, "read device prompts"));
        }
        let args = request.arguments.unwrap_or_default();
        let plant = self.engine.plant();
        match request.name.as_str() {
            "diagnose_device" => {
                let device = device_arg(plant, &args, "diagnose_device")?;
                self.diagnose(device).await.map(Into::into)
            }
            "act_and_confirm" => {
                let device = device_arg(plant, &args, "act_and_confirm")?;
                let name = string_arg(&args, "action", "act_and_confirm", || action_names(device))?;
                let action = device.action(name).ok_or_else(|| {
                    McpError::invalid_params(
                        format!(
                            "device {} has no action {name:?}; its actions are {}",
                            device.id,
                            action_names(device)
                        ),
                        Some(json!({"argument": "action", "device": device.id,
                                    "valid": device.actions.iter().map(|a| &a.name).collect::<Vec<_>>()})),
                    )
                })?;
                Ok(self.act_and_confirm(device, action).into())
            }
            other => Err(McpError::invalid_params(
                format!("no prompt {other:?}; the prompts are diagnose_device and act_and_confirm"),
                Some(json!({"prompt": other})),
            )),
        }
    }

    async fn diagnose(&self, device: &Device) -> Result<GetPromptResult, McpError> {
        let id = &device.id;
        let state = self
            .engine
            .device_state(id)
            .ok_or_else(|| McpError::internal_error(format!("no state for {id}"), None))?;
        let recent = self
            .engine
            .list(Some(id), None, RECENT_COMMANDS)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let mut t = String::new();
        let _ = writeln!(
            t,
            "Diagnose the device \"{id}\"{} the way a field technician would: from the gateway \
             outward — the gateway's log, the bus traffic, the device itself, then its wiring and \
             supply. Do not run its actions again to \"see what happens\": every call moves real \
             hardware.\n",
            about(device)
        );
        let _ = writeln!(t, "## What the gateway knows now ({})\n", now());
        state_text(&mut t, device, &state);
        recent_text(&mut t, &recent);
        findings(&mut t, device, &state, &recent);
        steps(&mut t, device);
        let state_json = serde_json::to_string_pretty(&state).unwrap_or_default();
        let messages = vec![
            PromptMessage::new_text(Role::User, t),
            PromptMessage::new_resource(
                Role::User,
                crate::resources::state_uri(id),
                Some("application/json".into()),
                Some(state_json),
                None,
                None,
                None,
            ),
        ];
        Ok(GetPromptResult::new(messages).with_description(format!("Diagnose {id}")))
    }

    fn act_and_confirm(&self, device: &Device, action: &Action) -> GetPromptResult {
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
                let _ = writeln!(t, "- {}", param_text(p));
            }
        }
        let _ = writeln!(
            t,
            "Optional: wait_s (0–10 s, default 0: answer at once) and idempotency_key (the same \
             key with the same arguments returns the same command instead of acting twice — use \
             one, so that repeating a call whose answer was lost is harmless).\n\
             JSON Schema of the arguments: {}\n",
            action.input_schema()
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

fn ids<S: AsRef<str>>(it: impl Iterator<Item = S>) -> String {
    it.map(|s| s.as_ref().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn action_names(d: &Device) -> String {
    ids(d.actions.iter().map(|a| a.name.as_str()))
}

fn string_arg<'a>(
    args: &'a JsonObject,
    name: &str,
    prompt: &str,
    valid: impl Fn() -> String,
) -> Result<&'a str, McpError> {
    match args.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(McpError::invalid_params(
            format!(
                "{prompt} needs the argument {name} (a string); one of: {}",
                valid()
            ),
            Some(json!({"argument": name})),
        )),
    }
}

fn device_arg<'a>(
    plant: &'a closedloop_plant::Plant,
    args: &JsonObject,
    prompt: &str,
) -> Result<&'a Device, McpError> {
    let all = || ids(plant.devices.iter().map(|d| d.id.as_str()));
    let id = string_arg(args, "device", prompt, all)?;
    plant.device(id).ok_or_else(|| {
        McpError::invalid_params(
            format!("no device {id:?}; the devices are {}", all()),
            Some(json!({"argument": "device",
                        "valid": plant.devices.iter().map(|d| &d.id).collect::<Vec<_>>()})),
        )
    })
}

fn about(d: &Device) -> String {
    let desc = d.description.trim();
    if desc.is_empty() {
        String::new()
    } else {
        format!(" ({desc})")
    }
}

fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    closedloop_engine::clock::rfc3339(ms)
}

fn json_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn signal_line(name: &str, s: &closedloop_engine::SignalState) -> String {
    let unit = s
        .unit
        .as_deref()
        .map(|u| format!(" {u}"))
        .unwrap_or_default();
    format!(
        "{name} = {}{unit} (from {}, read {} ms ago at {})",
        s.value, s.source, s.age_ms, s.at
    )
}

fn driver_text(d: &Device) -> String {
    match &d.driver {
        DriverConfig::Sim(c) => format!("the in-process simulator (model {})", c.model),
        DriverConfig::ModbusTcp { address, unit, .. } => {
            format!("Modbus TCP at {address}, unit {unit}")
        }
        DriverConfig::ModbusRtu {
            port, baud, unit, ..
        } => format!("Modbus RTU on {port} at {baud} baud, unit {unit}"),
        DriverConfig::Mqtt { broker, .. } => format!("MQTT through the broker {broker}"),
        DriverConfig::Opcua { endpoint, .. } => format!("OPC UA at {endpoint}"),
        DriverConfig::Can { interface, .. } => format!("CAN on {interface}"),
        other => format!("a {} driver", other.kind()),
    }
}

fn state_text(t: &mut String, d: &Device, s: &DeviceState) {
    let _ = writeln!(
        t,
        "- Liveness: {} (last valid answer: {}; offline after {} s without one).",
        json_str(&json!(s.liveness)),
        s.last_seen.as_deref().unwrap_or("never"),
        d.liveness.max_silence_s
    );
    let _ = writeln!(
        t,
        "- Reached through {}, polled every {} ms.",
        driver_text(d),
        d.poll_ms
    );
    if s.signals.is_empty() {
        let _ = writeln!(t, "- Signals: none has been read yet.");
    } else {
        let _ = writeln!(t, "- Signals:");
        for (name, sig) in &s.signals {
            let _ = writeln!(t, "  - {}", signal_line(name, sig));
        }
    }
}

fn recent_text(t: &mut String, recent: &[CommandResult]) {
    if recent.is_empty() {
        let _ = writeln!(t, "- Recent commands: none.\n");
        return;
    }
    let _ = writeln!(t, "- Last {} commands, newest first:", recent.len());
    for r in recent {
        let mut line = format!(
            "  - {} {}({}) → {}, verified={}",
            r.command_id, r.action, r.params, r.status, r.verified
        );
        if let Some(code) = &r.error_code {
            let _ = write!(line, ", error_code {code}");
        }
        if let Some(detail) = &r.detail {
            let _ = write!(line, ": {detail}");
        }
        let _ = writeln!(t, "{line} (updated {})", r.updated_at);
    }
    t.push('\n');
}

/// What stands out, in the order a technician would look at it.
fn findings(t: &mut String, d: &Device, s: &DeviceState, recent: &[CommandResult]) {
    let mut out = Vec::new();
    match s.liveness {
        closedloop_engine::Liveness::Offline => out.push(format!(
            "{} is offline: no valid answer for more than {} s. Every action is rejected \
             DEVICE_OFFLINE until it answers again; the signal values above are the last ones \
             read, not the present.",
            d.id, d.liveness.max_silence_s
        )),
        closedloop_engine::Liveness::Unknown => out.push(format!(
            "{} has not answered since the gateway started.",
            d.id
        )),
        closedloop_engine::Liveness::Online => {}
    }
    for a in &d.actions {
        for (code, e) in &a.fail_when {
            let name = e.source().trim();
            if s.signals.get(name).is_some_and(|v| v.value == json!(true)) {
                out.push(format!(
                    "The failure signal {name} is active now ({code} for {}): the device itself \
                     reports a fault.",
                    a.name
                ));
            }
        }
    }
    for r in recent.iter().filter(|r| r.error_code.is_some()) {
        out.push(format!(
            "Command {} ({} {}) ended {} {}: {}",
            r.command_id,
            r.action,
            r.params,
            r.status,
            r.error_code.as_ref().map(|c| c.as_str()).unwrap_or(""),
            r.hint.as_deref().unwrap_or("")
        ));
    }
    let _ = writeln!(t, "## What stands out\n");
    if out.is_empty() {
        let _ = writeln!(
            t,
            "Nothing yet: the device answers and none of its last commands failed. Ask the user \
             what they saw go wrong, and when.\n"
        );
    } else {
        for f in out {
            let _ = writeln!(t, "- {f}");
        }
        t.push('\n');
    }
}

fn steps(t: &mut String, d: &Device) {
    let id = &d.id;
    let _ = writeln!(
        t,
        "## Walk through it\n\n\
         1. Gateway log. For each command above that did not complete, call get_command_status \
         with its command_id (wait_s 0) and read detail, hint and the timeline: was it \
         dispatched, did the device acknowledge it (device_ack), were there retries, which values \
         were read after the write? list_commands with device \"{id}\" shows more history. A \
         person at the gateway can print a command's whole story with `closedloop trace \
         COMMAND_ID`; the gateway's log carries the same request_id and command_id — ask for it \
         when the timeline is not enough.\n\
         2. Bus traffic. Call get_device_state with device \"{id}\" twice, a second or two \
         apart. If last_seen advances and the ages stay near {poll} ms, answers arrive. If it is \
         offline or last_seen stands still, nothing valid comes back from {drv}: unpowered, \
         unplugged, a wrong address, or a broken link. CRC_MISMATCH means answers arrive garbled \
         (cable, termination, baud rate); BUS_NAK or REGISTER_INVALID mean the device answers but \
         refuses the address or value — compare with the resource device://{id}/config.\n\
         3. The device. Compare the signals with what the last command asked for:",
        poll = d.poll_ms,
        drv = driver_text(d),
    );
    for a in &d.actions {
        if let Some(done) = &a.done_when {
            let _ = writeln!(
                t,
                "   - {} completes when {}.",
                a.name,
                in_words(done.source())
            );
        }
        for (code, e) in &a.fail_when {
            let _ = writeln!(
                t,
                "   - {} fails {code} when {}.",
                a.name,
                in_words(e.source())
            );
        }
    }
    let _ = writeln!(
        t,
        "   A feedback signal that never followed a command (FEEDBACK_MISMATCH) means the write \
         was accepted but nothing physical happened; an active failure signal means the device \
         itself reports a fault.\n\
         4. Wiring and supply. Power, fuses, a relay coil's supply, a loose connector, a jammed \
         mechanism: you cannot see them. Ask a person to check the specific thing your evidence \
         points at, and say what you observed. Do not retry the action to find out.\n\n\
         Tools: get_device_state, list_commands, get_command_status, list_devices; resources \
         device://{id}/state (subscribe to follow it) and device://{id}/config; for a person: \
         `closedloop trace COMMAND_ID`.\n\n\
         End with a short diagnosis: what you observed (values with their ages, command ids), the \
         most likely cause, what you ruled out, and what a person must check. Never say the \
         device works or an action happened unless one of its commands reached status \
         \"completed\"."
    );
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
    let _ = match a.verification {
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
    let extra_s = a.timeout_floor_ms as f64 / 1000.0 + d.poll_ms as f64 / 1000.0;
    match a.expect_s.source().trim().parse::<f64>() {
        Ok(expect) => {
            let deadline = expect * a.timeout_factor + extra_s;
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
    if a.confirm {
        let _ = writeln!(
            t,
            "- It needs a person's confirmation: nothing moves until the command is confirmed."
        );
    }
    t.push('\n');
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
    let params = if a.params.is_empty() {
        "an argument was given that it does not take".to_string()
    } else {
        format!(
            "{} missing, of the wrong type or outside its range",
            ids(a.params.iter().map(|p| p.name.as_str()))
        )
    };
    let mut codes: Vec<(String, String)> = vec![(
        "INVALID_PARAMS".into(),
        format!("{params}; nothing was written. Fix it and call again."),
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
            "{} gave no valid answer within {} s. Ask the user to check its power and network; do \
             not retry blindly.",
            d.id, d.liveness.max_silence_s
        ),
    ));
    codes.push((
        "DEVICE_BUSY".into(),
        if a.queue {
            format!(
                "another command held {} for more than {} s of queueing. Wait for it or cancel it.",
                a.exclusive, a.queue_timeout_s
            )
        } else {
            format!(
                "another command holds {} and this action does not queue. Wait for it or cancel it.",
                a.exclusive
            )
        },
    ));
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
    if let (Verification::Feedback, Some(done)) = (a.verification, &a.done_when) {
        let sigs = ids(done.signals().iter());
        codes.push((
            "FEEDBACK_MISMATCH".into(),
            format!(
                "{sigs} never changed after the write: the command reached the device but nothing \
                 physical followed. Ask the user to check wiring and supply; do not assume it happened."
            ),
        ));
        codes.push((
            "TIMEOUT".into(),
            format!(
                "{sigs} moved but the done condition never held before the deadline. Call \
                 get_device_state before acting again."
            ),
        ));
    }
    codes.push((
        "CRC_MISMATCH".into(),
        "an answer was garbled; the write may have taken effect. Query the device state before \
         retrying."
            .into(),
    ));
    codes.push((
        "INTERRUPTED".into(),
        "the gateway restarted and could not confirm it. Query the device state.".into(),
    ));
    codes.push(("CANCELLED".into(), "cancelled on request.".into()));
    codes.push((
        "UNAUTHORIZED".into(),
        format!("the caller lacks the actuate:{} scope.", d.id),
    ));
    let _ = writeln!(t, "## Error codes for {}\n", a.tool_name);
    for (code, meaning) in codes {
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

/// A CEL expression in plain words: `abs(x - params.t) <= 0.2 && !moving` →
/// `abs(x - the requested t) is at most 0.2 and moving is false`.
pub(crate) fn in_words(src: &str) -> String {
    let src = src.trim();
    if is_ident(src) {
        return format!("{} is true", names(src));
    }
    if let Some(rest) = src.strip_prefix('!')
        && is_ident(rest.trim())
    {
        return format!("{} is false", names(rest.trim()));
    }
    let mut out = String::new();
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            // A string literal stays as written.
            out.push(c);
            for q in chars.by_ref() {
                out.push(q);
                if q == c {
                    break;
                }
            }
            continue;
        }
        let (text, pair) = match (c, chars.peek().copied()) {
            ('&', Some('&')) => (" and ", true),
            ('|', Some('|')) => (" or ", true),
            ('=', Some('=')) => (" equals ", true),
            ('!', Some('=')) => (" differs from ", true),
            ('<', Some('=')) => (" is at most ", true),
            ('>', Some('=')) => (" is at least ", true),
            ('<', _) => (" is below ", false),
            ('>', _) => (" is above ", false),
            ('!', _) => ("not ", false),
            _ => {
                out.push(c);
                continue;
            }
        };
        out.push_str(text);
        if pair {
            chars.next();
        }
    }
    names(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `params.x` → `the requested x`; `devices.d.s` → `d.s`.
fn names(s: &str) -> String {
    s.replace("params.", "the requested ")
        .replace("devices.", "")
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::in_words;

    #[test]
    fn expressions_read_as_words() {
        assert_eq!(in_words("fault"), "fault is true");
        assert_eq!(in_words("!moving"), "moving is false");
        assert_eq!(
            in_words("abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"),
            "abs(position_mm - the requested target_mm) is at most 0.2 and not moving and not fault"
        );
        assert_eq!(
            in_words("contact == params.on"),
            "contact equals the requested on"
        );
        assert_eq!(
            in_words("!devices.slide.fault && !devices.slide.moving"),
            "not slide.fault and not slide.moving"
        );
        assert_eq!(in_words("a < 1 || b > 2"), "a is below 1 or b is above 2");
        assert_eq!(in_words("x != \"a==b\""), "x differs from \"a==b\"");
    }
}
