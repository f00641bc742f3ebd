//! Each discovered entity onto its device (`ha.rs`): its state as a signal, its command as an
//! action confirmed on that state, by component.

use super::{Act, Board, Mapped, Param, Sig};
use crate::init::discovery::{Entity, pointer};
use crate::init::names::{fit, snake, unique};

/// A name unique among the device's signals (or actions).
fn fresh(base: &str, taken: &[String], max: usize) -> String {
    unique(&snake(base), max, |c| taken.iter().any(|t| t == c))
}

/// The entity's own words: its name, else the device's (a device's main entity).
fn label<'a>(e: &'a Entity, device: &'a str) -> &'a str {
    e.name().unwrap_or(device)
}

/// One entity onto its device.
pub(super) fn entity(b: &mut Board, e: &Entity, device: &str, m: &mut Mapped) {
    let what = format!("{} {} ({})", e.component, e.object_id, e.topic);
    match e.component.as_str() {
        _ if non_string_payload(e).is_some() => m.skipped.push(format!(
            "{what}: {} is not a string payload; write it by hand",
            non_string_payload(e).unwrap_or_default()
        )),
        "light" if !matches!(e.text("schema"), None | Some("default" | "basic" | "json")) => {
            m.skipped.push(format!(
                "{what}: a light of the {} schema speaks through templates closedloop init does not translate",
                e.text("schema").unwrap_or_default()
            ))
        }
        "switch" | "light" | "fan" => on_off(b, e, device, m),
        "binary_sensor" => match e.config.get("payload_on") {
            // A JSON bool decodes as itself; `false` would read the other way round.
            Some(serde_json::Value::Bool(true)) => {
                state_signal(b, e, device, ("value_template", ""), Words::default(), m);
            }
            Some(serde_json::Value::String(on)) => {
                let words = Words::two(on, e.text("payload_off").unwrap_or("OFF"));
                state_signal(b, e, device, ("value_template", ""), words, m);
            }
            None => {
                let words = Words::two("ON", e.text("payload_off").unwrap_or("OFF"));
                state_signal(b, e, device, ("value_template", ""), words, m);
            }
            Some(other) => m.skipped.push(format!(
                "{what}: payload_on is {other}, which a signal would read the other way round or not at all; write it by hand"
            )),
        },
        "sensor" => {
            state_signal(b, e, device, ("value_template", ""), Words::default(), m);
        }
        "number" => number(b, e, device, m),
        "button" => button(b, e, device, m),
        "cover" | "valve" => two_way(
            b,
            e,
            device,
            ("open", "payload_open", "OPEN", "payload_close", "CLOSE"),
            [("state_open", "open", ""), ("state_closed", "closed", "_closed")],
            m,
        ),
        "lock" => two_way(
            b,
            e,
            device,
            ("locked", "payload_lock", "LOCK", "payload_unlock", "UNLOCK"),
            [("state_locked", "LOCKED", ""), ("state_unlocked", "UNLOCKED", "_unlocked")],
            m,
        ),
        _ => m.skipped.push(format!(
            "{what}: closedloop init does not map the component {}",
            e.component
        )),
    }
}

/// The first command or state payload key (not `payload_on` of a binary sensor) whose value is
/// not a string: a payload closedloop would have to write or match as text.
fn non_string_payload(e: &Entity) -> Option<String> {
    const KEYS: [&str; 13] = [
        "payload_on",
        "payload_off",
        "state_on",
        "state_off",
        "payload_open",
        "payload_close",
        "payload_lock",
        "payload_unlock",
        "state_open",
        "state_closed",
        "state_locked",
        "state_unlocked",
        "payload_press",
    ];
    let skip = e.component == "binary_sensor";
    KEYS.iter()
        .filter(|k| !(skip && **k == "payload_on"))
        .find(|k| e.config.get(**k).is_some_and(|v| !v.is_string()))
        .map(|k| format!("{k} = {}", e.config[*k]))
}

/// The entity's state as a signal: its name, or `None` (said why) when it has none usable.
fn state_signal(
    b: &mut Board,
    e: &Entity,
    device: &str,
    (template_key, suffix): (&str, &str),
    words: Words,
    m: &mut Mapped,
) -> Option<String> {
    let topic = e.text("state_topic")?.to_string();
    let json = match e.text(template_key).map(pointer) {
        None => None,
        Some(Ok(p)) => p,
        Some(Err(())) => {
            m.needs_person.push(format!(
                "{}: the {template_key} of {} ({}) is not a plain value_json path; its state is not read",
                b.id,
                e.topic,
                e.text(template_key).unwrap_or_default()
            ));
            return None;
        }
    };
    let taken: Vec<String> = b.signals.iter().map(|s| s.name.clone()).collect();
    let name = fresh(
        &format!("{}{suffix}", e.name().unwrap_or("state")),
        &taken,
        48,
    );
    let unit = e.text("unit_of_measurement").map(str::to_string);
    let description = format!("{} as {} reports it", label(e, device), device);
    b.signals.push(Sig {
        name: name.clone(),
        topic,
        json,
        true_values: words.on,
        false_values: words.off,
        unit,
        description,
    });
    Some(name)
}

fn action_name(b: &Board, verb: &str, e: &Entity) -> String {
    let taken: Vec<String> = b.actions.iter().map(|a| a.name.clone()).collect();
    let room = closedloop_plant::MAX_TOOL_NAME - b.id.len() - 1;
    // The device's own entity (no name of its own): the verb alone (`switch`).
    let base = match e.name() {
        Some(n) => format!("{verb}_{n}"),
        None => verb.to_string(),
    };
    fresh(&fit(&snake(&base), room), &taken, room)
}

/// switch, light and fan: a bool parameter `on`, its payloads, confirmed on its own state.
fn on_off(b: &mut Board, e: &Entity, device: &str, m: &mut Mapped) {
    let schema_json = e.text("schema") == Some("json");
    let (pl_on, pl_off) = (
        e.text("payload_on").unwrap_or("ON").to_string(),
        e.text("payload_off").unwrap_or("OFF").to_string(),
    );
    let state_on = e.text("state_on").map_or(pl_on.clone(), str::to_string);
    let state_off = e.text("state_off").map_or(pl_off.clone(), str::to_string);
    // A light's state template is `state_value_template`; Tasmota still announces its lights
    // with the legacy `value_template` (`val_tpl`) on `tele/.../STATE`: without it the whole
    // JSON document was read as the light's state, and every switch ended FEEDBACK_MISMATCH.
    let template = match e.component.as_str() {
        "switch" => "value_template",
        _ if e.text("state_value_template").is_none() && e.text("value_template").is_some() => {
            "value_template"
        }
        _ => "state_value_template",
    };
    let signal = match schema_json {
        true => json_state(b, e, device),
        false => state_signal(
            b,
            e,
            device,
            (template, ""),
            Words::two(&state_on, &state_off),
            m,
        ),
    };
    let Some(topic) = e.text("command_topic") else {
        return;
    };
    let payload = match schema_json {
        true => r#"{"state": "${params.on ? "ON" : "OFF"}"}"#.to_string(),
        false => format!("${{params.on ? {} : {}}}", cel(&pl_on), cel(&pl_off)),
    };
    let name = action_name(b, "switch", e);
    let what = label(e, device);
    let act = Act {
        description: format!("Switch {what} on or off."),
        params: vec![Param {
            name: "on".into(),
            range: None,
            description: "true to switch on, false to switch off".into(),
        }],
        topic: topic.to_string(),
        payload,
        done_when: signal.map(|s| format!("{s} == params.on")),
        fail_when: None,
        floor_ms: 5_000,
        idempotent: true,
        name,
    };
    confirmable(b, e, act, m);
}

/// A JSON-schema light's `state` as a bool signal.
fn json_state(b: &mut Board, e: &Entity, device: &str) -> Option<String> {
    let topic = e.text("state_topic")?.to_string();
    let taken: Vec<String> = b.signals.iter().map(|s| s.name.clone()).collect();
    let name = fresh(e.name().unwrap_or("state"), &taken, 48);
    b.signals.push(Sig {
        name: name.clone(),
        topic,
        json: Some("/state".into()),
        true_values: vec!["ON".into()],
        false_values: vec!["OFF".into()],
        unit: None,
        description: format!("{} as {} reports it", label(e, device), device),
    });
    Some(name)
}

/// A string as a CEL string literal.
fn cel(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Pushes the action; one without `done_when` (an optimistic entity, or a state not read) is
/// `verification = "none"`, and a person is told.
fn confirmable(b: &mut Board, e: &Entity, act: Act, m: &mut Mapped) {
    if act.done_when.is_none() {
        let why = match e.text("state_topic") {
            None => "it reports no state (optimistic)",
            Some(_) => "its state could not be read",
        };
        m.needs_person.push(format!(
            "{}.{}: {why}, so nothing can confirm it: its commands end `sent`",
            b.id, act.name
        ));
    }
    b.actions.push(act);
}

/// number: a number parameter within its range, published through its command template.
fn number(b: &mut Board, e: &Entity, device: &str, m: &mut Mapped) {
    let signal = state_signal(b, e, device, ("value_template", ""), Words::default(), m);
    let Some(topic) = e.text("command_topic") else {
        return;
    };
    let num = |k: &str, d: f64| e.config.get(k).and_then(|v| v.as_f64()).unwrap_or(d);
    let (min, max, step) = (num("min", 1.0), num("max", 100.0), num("step", 1.0));
    let payload = match e.text("command_template").map(pointer) {
        None | Some(Ok(None)) => "${params.value}".to_string(),
        Some(_) => {
            m.needs_person.push(format!(
                "{}: the command_template of {} is not `{{{{ value }}}}`; the value is published as is",
                b.id, e.topic
            ));
            "${params.value}".to_string()
        }
    };
    let unit = e.text("unit_of_measurement").map(str::to_string);
    let what = label(e, device);
    let act = Act {
        name: action_name(b, "set", e),
        description: format!("Set {what}."),
        params: vec![Param {
            name: "value".into(),
            range: Some((min, max, unit)),
            description: format!("the new value of {what}, in steps of {step}"),
        }],
        topic: topic.to_string(),
        payload,
        done_when: signal.map(|s| {
            format!(
                "abs({s} - params.value) <= {}",
                crate::init::names::float(step / 2.0)
            )
        }),
        fail_when: None,
        floor_ms: 5_000,
        idempotent: true,
    };
    confirmable(b, e, act, m);
}

/// button: one publish, nothing to confirm it by.
fn button(b: &mut Board, e: &Entity, device: &str, m: &mut Mapped) {
    let Some(topic) = e.text("command_topic") else {
        return;
    };
    let what = label(e, device);
    let act = Act {
        name: action_name(b, "press", e),
        description: format!("Press {what}."),
        params: vec![],
        topic: topic.to_string(),
        payload: e.text("payload_press").unwrap_or("PRESS").to_string(),
        done_when: None,
        fail_when: None,
        floor_ms: 5_000,
        idempotent: false,
    };
    confirmable(b, e, act, m);
}

/// cover, valve and lock: a bool parameter between two payloads. Their state has more than
/// two values (`opening`, `stopped`, `JAMMED`…), so it is read as one signal per end state and
/// `done_when` asks for the one the command wants; a lock's `JAMMED` fails it.
fn two_way(
    b: &mut Board,
    e: &Entity,
    device: &str,
    (param, key_true, def_true, key_false, def_false): (&str, &str, &str, &str, &str),
    ends: [(&str, &str, &str); 2],
    m: &mut Mapped,
) {
    let [(yes_key, yes_default, _), (no_key, no_default, no_suffix)] = ends;
    let yes_state = e.text(yes_key).unwrap_or(yes_default).to_string();
    let no_state = e.text(no_key).unwrap_or(no_default).to_string();
    let states = end_states(e);
    let yes_signal = state_signal(
        b,
        e,
        device,
        ("value_template", ""),
        Words::one_of(&yes_state, &states),
        m,
    );
    let no_signal = yes_signal.as_ref().and_then(|_| {
        let words = Words::one_of(&no_state, &states);
        state_signal(b, e, device, ("value_template", no_suffix), words, m)
    });
    let jammed = (e.component == "lock" && yes_signal.is_some())
        .then(|| {
            let state = e.text("state_jammed").unwrap_or("JAMMED").to_string();
            let words = Words::one_of(&state, &states);
            state_signal(b, e, device, ("value_template", "_jammed"), words, m)
        })
        .flatten();
    let Some(topic) = e.text("command_topic") else {
        return;
    };
    let (yes, no) = (
        e.text(key_true).unwrap_or(def_true),
        e.text(key_false).unwrap_or(def_false),
    );
    let what = label(e, device);
    let act = Act {
        name: action_name(b, if param == "locked" { "lock" } else { "open" }, e),
        description: match param {
            "locked" => format!("Lock or unlock {what}."),
            _ => format!("Open or close {what}."),
        },
        params: vec![Param {
            name: param.into(),
            range: None,
            description: format!("true: {}; false: {}", yes.to_lowercase(), no.to_lowercase()),
        }],
        topic: topic.to_string(),
        payload: format!("${{params.{param} ? {} : {}}}", cel(yes), cel(no)),
        done_when: yes_signal
            .zip(no_signal)
            .map(|(y, n)| format!("params.{param} ? {y} : {n}")),
        fail_when: jammed.map(|j| ("LOCK_JAMMED".to_string(), j)),
        floor_ms: if e.component == "lock" {
            10_000
        } else {
            60_000
        },
        idempotent: true,
    };
    confirmable(b, e, act, m);
}

/// The words a bool signal is read from: `true_values` and `false_values` (both or neither; a
/// payload in neither — Home Assistant's `None`, `unknown` — is then no value).
#[derive(Default)]
struct Words {
    on: Vec<String>,
    off: Vec<String>,
}

impl Words {
    /// One word each way (`ON`/`OFF`).
    fn two(on: &str, off: &str) -> Words {
        Words {
            on: vec![on.to_string()],
            off: vec![off.to_string()],
        }
    }

    /// `state` true, every other state the entity reports false.
    fn one_of(state: &str, states: &[String]) -> Words {
        Words {
            on: vec![state.to_string()],
            off: states.iter().filter(|s| *s != state).cloned().collect(),
        }
    }
}

/// Every state a cover, valve or lock reports (its `state_*` keys, or Home Assistant's
/// defaults): each end-state signal is false on the others, and no value on anything else.
fn end_states(e: &Entity) -> Vec<String> {
    let keys: &[(&str, &str)] = match e.component.as_str() {
        "lock" => &[
            ("state_locked", "LOCKED"),
            ("state_locking", "LOCKING"),
            ("state_unlocked", "UNLOCKED"),
            ("state_unlocking", "UNLOCKING"),
            ("state_jammed", "JAMMED"),
            ("state_open", "OPEN"),
            ("state_opening", "OPENING"),
        ],
        _ => &[
            ("state_open", "open"),
            ("state_opening", "opening"),
            ("state_closed", "closed"),
            ("state_closing", "closing"),
            ("state_stopped", "stopped"),
        ],
    };
    let mut states: Vec<String> = (keys.iter())
        .map(|(k, d)| e.text(k).unwrap_or(d).to_string())
        .collect();
    states.dedup();
    states
}
