//! Readback dressed as feedback: a `done_when` that reads only what its own action writes — the
//! coil it sets, the node it writes, the topic it publishes to, the frame it sends — shows that
//! the write landed, never that the device did anything. A pump's `running` wired to the coil
//! the action writes reads `true` while the motor's breaker is open. Such an action is
//! `readback` whatever it declares: `check` warns, and its completion says "readback only",
//! never "confirmed by the device's feedback".

use crate::action::{Action, Verification, WriteEntry};
use crate::plant::{Signal, Source};

/// When `action`'s `done_when` reads only points the action itself writes (at least one, and no
/// other device's signal), the words for it: `running reads coil 0, which switch writes`.
pub fn readback_only(signals: &[Signal], action: &Action) -> Option<String> {
    if action.verification != Verification::Feedback {
        return None;
    }
    let done = action.done_when.as_ref()?;
    if done.signals().is_empty() || !done.devices().is_empty() {
        return None;
    }
    let mut read = Vec::new();
    for name in done.signals() {
        let signal = signals.iter().find(|s| s.name == *name)?;
        let written = action
            .write
            .iter()
            .find_map(|w| writes(w, &signal.source))?;
        read.push(format!("{name} reads {written}"));
    }
    Some(format!("{}, which {} writes", read.join(", "), action.name))
}

/// The point `w` writes that `source` reads, in words, if it reads one.
fn writes(w: &WriteEntry, source: &Source) -> Option<String> {
    match (w, source) {
        (
            WriteEntry::Register {
                area,
                address,
                encoding,
                ..
            },
            Source::Register {
                area: a,
                address: at,
                encoding: e,
            },
        ) if area == a => {
            let width = |n: u16| if area.is_bit() { 1 } else { n.max(1) };
            let (w_end, r_end) = (
                u32::from(*address) + u32::from(width(encoding.words())),
                u32::from(*at) + u32::from(width(e.words())),
            );
            (u32::from(*at) < w_end && u32::from(*address) < r_end).then(|| format!("{a}:{at}"))
        }
        (WriteEntry::OpcuaNode { node, .. }, Source::Node { node: n, .. }) if node == n => {
            Some(format!("node {n}"))
        }
        (WriteEntry::Mqtt { topic, .. }, Source::Topic { topic: t, .. })
            if filter_matches(t, topic) =>
        {
            Some(format!("topic {t}"))
        }
        (
            WriteEntry::Can {
                message, signals, ..
            },
            Source::Can {
                message: m, signal, ..
            },
        ) if message == m && signals.iter().any(|(s, _)| s == signal) => {
            Some(format!("CAN {m} {signal}"))
        }
        _ => None,
    }
}

/// Whether the MQTT filter `filter` (`+` one level, `#` the rest) matches `topic`.
fn filter_matches(filter: &str, topic: &str) -> bool {
    let mut levels = topic.split('/');
    for f in filter.split('/') {
        match (f, levels.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (f, Some(t)) if f == t => {}
            _ => return false,
        }
    }
    levels.next().is_none()
}

#[cfg(test)]
mod tests {
    fn action(signals: &str, driver: &str, write: &str, done: &str) -> crate::Action {
        let text = format!(
            r#"
[[device]]
id = "d"
description = "a device"
driver = {driver}
[device.signals]
{signals}
[[device.action]]
name = "set"
description = "Set it."
params = {{ on = {{ type = "bool" }} }}
write = [{write}]
done_when = "{done}"
"#
        );
        let plant = crate::parse(&text, "t.toml", std::path::Path::new(".")).expect("valid");
        plant.devices[0].actions[0].clone()
    }

    #[test]
    fn a_topic_or_node_the_action_writes_is_readback_another_is_feedback() {
        let mqtt = r#"{ kind = "mqtt", broker = "mqtt://127.0.0.1", client_id = "c" }"#;
        let publish = r#"{ topic = "desk/lamp/set", payload = "${params.on}" }"#;
        let echo = action(
            "on = { topic = \"desk/lamp/+\", type = \"bool\" }",
            mqtt,
            publish,
            "on == params.on",
        );
        assert_eq!(
            echo.readback_only.as_deref(),
            Some("on reads topic desk/lamp/+, which set writes")
        );
        let state = action(
            "on = { topic = \"desk/lamp/state\", type = \"bool\" }",
            mqtt,
            publish,
            "on == params.on",
        );
        assert_eq!(state.readback_only, None);
        let opcua = r#"{ kind = "opcua", endpoint = "opc.tcp://127.0.0.1:4840/" }"#;
        let node = r#"{ node = "ns=2;s=Lamp.Cmd", value = "params.on" }"#;
        let cmd = action(
            "cmd = { node = \"ns=2;s=Lamp.Cmd\", type = \"bool\" }",
            opcua,
            node,
            "cmd == params.on",
        );
        assert!(cmd.readback_only.is_some());
        let sensed = action(
            "lit = { node = \"ns=2;s=Lamp.Lit\", type = \"bool\" }",
            opcua,
            node,
            "lit == params.on",
        );
        assert_eq!(sensed.readback_only, None);
        // Declared readback already says so: nothing to add.
        assert!(super::filter_matches("a/#", "a/b/c") && !super::filter_matches("a/+", "a/b/c"));
    }

    #[test]
    fn the_tool_description_says_readback_for_it() {
        let sim = r#"{ kind = "sim", model = "relay" }"#;
        let coil = r#"{ coil = 0, value = "params.on" }"#;
        let text = format!(
            "[[device]]\nid = \"d\"\ndescription = \"x\"\ndriver = {sim}\n[device.signals]\n\
             commanded = {{ coil = 0 }}\n[[device.action]]\nname = \"set\"\n\
             description = \"Set it.\"\nparams = {{ on = {{ type = \"bool\" }} }}\n\
             write = [{coil}]\ndone_when = \"commanded == params.on\"\n"
        );
        let plant = crate::parse(&text, "t.toml", std::path::Path::new(".")).expect("valid");
        assert!(plant.devices[0].actions[0].readback_only.is_some());
        let surface = crate::render_surface(&plant);
        assert!(
            surface.contains("the physical effect is not sensed"),
            "{surface}"
        );
    }
}

#[cfg(test)]
mod repository {
    /// Which of the repository's plants have an action that reads back only what it writes:
    /// each is listed here on purpose, so a new one is a decision, not an accident.
    #[test]
    fn the_repository_s_plants_dress_no_readback_as_feedback_unless_listed() {
        let (mut found, mut parsed) = (Vec::new(), 0);
        for (path, text) in crate::repository_plants::all() {
            let base = path.parent().unwrap();
            let env = |_: &str| Some("x".to_string());
            let Ok(plant) = crate::parse_with_env(&text, "p.toml", base, &env) else {
                continue;
            };
            parsed += 1;
            for d in &plant.devices {
                for a in d.actions.iter().filter(|a| a.readback_only.is_some()) {
                    let file = path.file_name().unwrap().to_string_lossy().into_owned();
                    found.push(format!("{file} {}.{}", d.id, a.name));
                }
            }
        }
        assert!(parsed > 10, "only {parsed} plants parsed");
        assert_eq!(found, Vec::<String>::new());
    }
}
