//! Readback dressed as feedback: an action with `verification = "feedback"` whose `done_when`
//! reads only what the action itself writes (`closedloop_plant::Action::readback_only`). Its
//! completion shows that the write landed, never that the device did anything, so it is
//! reported as readback (`verification: "readback"`, `verified: false`, "Completed by readback
//! only"); `closedloop check` warns so that the plant's author wires a sensing signal instead.

use super::sim_map::{Finding, Severity};
use closedloop_plant::{Plant, PlantError};

/// A warning for every action whose `done_when` reads only what it writes.
pub fn lint(plant: &Plant, file: &str) -> Vec<Finding> {
    let actions = plant
        .devices
        .iter()
        .flat_map(|d| d.actions.iter().map(move |a| (d, a)));
    actions
        .filter_map(|(device, action)| {
            let what = action.readback_only.as_ref()?;
            let message = format!(
                "{}'s done_when reads only what it writes ({what}): that shows the write landed, \
                 not that the device acted, so its completions are reported as readback \
                 (verified: false). Read a signal that senses the effect (a contact, an encoder, \
                 a current), or write verification = \"readback\" to say so",
                action.name
            );
            Some(Finding {
                severity: Severity::Warning,
                error: PlantError {
                    file: file.to_string(),
                    device: Some(device.id.clone()),
                    key: Some(format!("action.{}.done_when", action.name)),
                    line: None,
                    message,
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(signals: &str, write: &str, done_when: &str) -> Plant {
        let text = format!(
            r#"
[[device]]
id = "pump"
description = "a pump"
driver = {{ kind = "modbus-tcp", address = "127.0.0.1:502" }}
[device.signals]
{signals}
[[device.action]]
name = "run"
description = "Run the pump."
params = {{ on = {{ type = "bool" }} }}
write = [{write}]
done_when = "{done_when}"
"#
        );
        closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("valid")
    }

    #[test]
    fn a_done_when_on_the_coil_the_action_writes_is_readback_and_check_says_so() {
        let p = plant(
            "running = { coil = 4 }\ncontact = { discrete_input = 0 }",
            r#"{ coil = 4, value = "params.on" }"#,
            "running == params.on",
        );
        let action = &p.devices[0].actions[0];
        assert_eq!(
            action.readback_only.as_deref(),
            Some("running reads coil:4, which run writes")
        );
        let found = lint(&p, "t.toml");
        assert_eq!(found.len(), 1);
        let text = found[0].to_string();
        assert!(text.contains("action.run.done_when"), "{text}");
        assert!(text.contains("verification = \"readback\""), "{text}");
    }

    #[test]
    fn a_sensing_signal_anywhere_in_done_when_is_feedback() {
        let signals = "running = { coil = 4 }\ncontact = { discrete_input = 0 }\nspeed = { holding = 10, type = \"u32\" }";
        let coil = r#"{ coil = 4, value = "params.on" }"#;
        for done in [
            "contact == params.on",
            "running == params.on && contact == params.on",
        ] {
            let p = plant(signals, coil, done);
            assert_eq!(p.devices[0].actions[0].readback_only, None, "{done}");
            assert!(lint(&p, "t.toml").is_empty(), "{done}");
        }
        // A register block: the second word of a u32 written at 10 is read back too.
        let p = plant(
            "speed = { holding = 11 }",
            r#"{ holding = 10, type = "u32", value = "params.on ? 100 : 0" }"#,
            "speed >= 0",
        );
        assert!(p.devices[0].actions[0].readback_only.is_some());
        let p = plant(
            "speed = { holding = 12 }",
            r#"{ holding = 10, type = "u32", value = "params.on ? 100 : 0" }"#,
            "speed >= 0",
        );
        assert_eq!(p.devices[0].actions[0].readback_only, None);
    }
}
