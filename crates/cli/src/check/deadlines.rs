//! Deadlines a push device may not report within: an MQTT device reports when it likes, and the
//! only promise its plant entry makes is that it says something within `max_silence_s`. An
//! action whose deadline is shorter than that, and whose feedback comes from such a device, may
//! end `NO_FEEDBACK` although the device carried it out, because its next report came after
//! the deadline (a board that reports on a 2 s heartbeat, a 0.8 s deadline). `closedloop check`
//! warns; it does not refuse, since a device that reports after every command is fine.

use super::sim_map::{Finding, Severity};
use closedloop_plant::{Action, Device, DriverConfig, Params, Plant, PlantError, Scope};
use std::collections::BTreeMap;

/// A warning for every action (with a constant `expect_s`) whose deadline is shorter than the
/// liveness window of an MQTT device its `done_when` reads.
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for device in &plant.devices {
        for action in &device.actions {
            let Some(deadline_s) = constant_deadline_s(device, action) else {
                continue;
            };
            let Some(pusher) =
                reported_by(plant, device, action).find(|d| deadline_s < d.liveness.max_silence_s)
            else {
                continue;
            };
            out.push(Finding {
                severity: Severity::Warning,
                error: PlantError {
                    file: file.to_string(),
                    device: Some(device.id.clone()),
                    key: Some(format!("action.{}.expect_s", action.name)),
                    line: None,
                    message: message(action, deadline_s, pusher),
                },
            });
        }
    }
    out
}

fn message(action: &Action, deadline_s: f64, pusher: &Device) -> String {
    format!(
        "{}'s deadline ({deadline_s:.2} s) is shorter than {}'s max_silence_s ({} s), the longest \
         that MQTT device may go without reporting: unless it reports its state after every \
         command, {} may end NO_FEEDBACK before its report comes. Have the device report after \
         each command, or raise expect_s (or timeout_factor, timeout_floor_ms)",
        action.name, pusher.id, pusher.liveness.max_silence_s, action.name
    )
}

/// The deadline in seconds when `expect_s` reads no signal and no parameter.
fn constant_deadline_s(device: &Device, action: &Action) -> Option<f64> {
    let e = &action.expect_s;
    if !(e.signals().is_empty() && e.params().is_empty() && e.devices().is_empty()) {
        return None;
    }
    let (signals, params, devices) = (BTreeMap::new(), Params::new(), BTreeMap::new());
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    let expect_s = e.eval_f64(&scope).ok()?;
    Some(action.deadline_s(device, expect_s, false))
}

/// The MQTT devices whose reports `done_when` waits for: the action's own device, when it is
/// one and `done_when` reads its signals, and every `devices.<id>` it names that is one.
fn reported_by<'a>(
    plant: &'a Plant,
    device: &'a Device,
    action: &'a Action,
) -> impl Iterator<Item = &'a Device> {
    let done = action.done_when.as_ref();
    let own = done
        .filter(|d| !d.signals().is_empty())
        .map(|_| device)
        .into_iter();
    let others = done
        .into_iter()
        .flat_map(|d| d.devices().iter())
        .filter_map(|(id, _)| plant.device(id));
    // A device that reports right after every command it receives is heard after this one's
    // write whatever its silence window; another device receives nothing from it.
    own.chain(others).filter(move |d| {
        let answers = d.id == device.id && d.liveness.reports_after_command;
        matches!(d.driver, DriverConfig::Mqtt { .. }) && !answers
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(expect_s: &str, max_silence_s: f64) -> Plant {
        let text = format!(
            r#"
[[device]]
id = "lamp"
description = "A lamp on an ESP32 board"
driver = {{ kind = "mqtt", broker = "mqtt://127.0.0.1:1883", client_id = "t" }}
liveness = {{ status_topic = "lab/lamp/status", max_silence_s = {max_silence_s} }}
[device.signals]
power = {{ topic = "lab/lamp/tele", json = "/POWER", true_values = ["ON"], false_values = ["OFF"] }}
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = {{ on = {{ type = "bool" }} }}
write = [{{ topic = "lab/lamp/cmd", payload = "${{params.on}}" }}]
done_when = "power == params.on"
expect_s = {expect_s}
idempotent = true
"#
        );
        closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("parses")
    }

    #[test]
    fn a_deadline_shorter_than_a_push_devices_silence_window_is_warned_about() {
        let found = lint(&plant("0.2", 3.0), "t.toml");
        assert_eq!(found.len(), 1, "{found:?}");
        let text = found[0].to_string();
        assert!(
            text.starts_with(
                "warning: t.toml: device \"lamp\", key action.switch.expect_s: switch's deadline (0.80 s) is shorter than lamp's max_silence_s (3 s)"
            ),
            "{text}"
        );
        assert!(text.contains("may end NO_FEEDBACK"), "{text}");
    }

    #[test]
    fn a_deadline_longer_than_the_window_or_one_that_depends_on_values_is_not() {
        assert!(lint(&plant("1.0", 3.0), "t.toml").is_empty());
        assert!(lint(&plant("0.2", 0.5), "t.toml").is_empty());
        assert!(lint(&plant("\"params.on ? 0.2 : 0.3\"", 3.0), "t.toml").is_empty());
    }

    #[test]
    fn a_device_that_reports_after_every_command_is_not_warned_about() {
        let text = String::from(
            r#"[[device]]
id = "lamp"
description = "A lamp on an ESP32 board"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:1883", client_id = "t" }
liveness = { status_topic = "lab/lamp/status", max_silence_s = 3.0, reports_after_command = true }
[device.signals]
power = { topic = "lab/lamp/state", true_values = ["ON"], false_values = ["OFF"] }
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = { on = { type = "bool" } }
write = [{ topic = "lab/lamp/cmd", payload = "${params.on}" }]
done_when = "power == params.on"
expect_s = 0.2
"#,
        );
        let p = closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).unwrap();
        assert!(p.devices[0].liveness.reports_after_command);
        assert!(lint(&p, "t.toml").is_empty());
        let silent = text.replace(", reports_after_command = true", "");
        let p = closedloop_plant::parse(&silent, "t.toml", std::path::Path::new(".")).unwrap();
        assert_eq!(lint(&p, "t.toml").len(), 1);
    }
}
