//! `diagnose_device(device)`: the device's state and last commands, what stands out, and the
//! walk a technician would take — gateway log, bus traffic, device, wiring and supply.

use super::words::in_words;
use super::{about, json_str, signal_line};
use crate::Server;
use closedloop_engine::{CommandResult, DeviceState};
use closedloop_plant::{Device, DriverConfig};
use rmcp::ErrorData as McpError;
use rmcp::model::{GetPromptResult, PromptMessage, Role};
use serde_json::json;
use std::fmt::Write as _;

/// How many recent commands the prompt embeds.
const RECENT_COMMANDS: u32 = 5;

impl Server {
    pub(super) async fn diagnose(&self, device: &Device) -> Result<GetPromptResult, McpError> {
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
}

fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    closedloop_engine::clock::rfc3339(ms)
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
    let _ = match recent.len() {
        1 => writeln!(t, "- Last command:"),
        n => writeln!(t, "- Last {n} commands, newest first:"),
    };
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
