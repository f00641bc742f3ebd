//! A surveyed OPC UA address space as a plant: every object that directly holds variables or
//! methods is a device; its Boolean and numeric variables are signals (with their engineering
//! unit); those a client may write are also `set_<name>` actions confirmed on the same node; its
//! methods are call actions whose parameters are their input arguments. What cannot be mapped
//! is said, with why.

use super::names::{float, quote, snake, unique};
use closedloop_opcua::{MethodArgument, Survey, Surveyed};
use std::fmt::Write;

/// The plant's text and what went into it.
pub struct Mapped {
    pub text: String,
    pub devices: usize,
    pub signals: usize,
    pub actions: usize,
    pub skipped: Vec<String>,
    pub needs_person: Vec<String>,
}

/// A device id leaves room for `_set_<name>` in a 64-character tool name.
const MAX_ID: usize = closedloop_plant::MAX_TOOL_NAME - 24;

/// How a data type is read and written: `None` for types a plant cannot hold.
fn kind(data_type: &str) -> Option<&'static str> {
    match data_type {
        "Boolean" => Some("bool"),
        "Double" | "Float" => Some("number"),
        "SByte" | "Byte" | "Int16" | "UInt16" | "Int32" | "UInt32" | "Int64" | "UInt64" => {
            Some("integer")
        }
        _ => None,
    }
}

/// A node's Description when it says more than its name (many servers copy the display name
/// into it).
fn said(n: &Surveyed) -> Option<&str> {
    n.description
        .as_deref()
        .filter(|d| *d != n.display_name && *d != n.browse_name && d.len() >= 20)
}

/// The whole plant, `header` first.
pub fn map(s: &Survey, driver: &str, header: &str, server: &str) -> Mapped {
    let mut m = Mapped {
        text: String::new(),
        devices: 0,
        signals: 0,
        actions: 0,
        skipped: Vec::new(),
        needs_person: Vec::new(),
    };
    if s.truncated {
        m.needs_person.push(format!(
            "the survey stopped at {} nodes: start lower (--node) or go less deep (--depth)",
            super::opcua::MAX_NODES
        ));
    }
    let mut body = String::new();
    let mut ids: Vec<String> = Vec::new();
    for (i, object) in s.nodes.iter().enumerate() {
        let children: Vec<&Surveyed> = (s.nodes.iter())
            .filter(|n| n.parent == Some(i) && n.class != "Object")
            .collect();
        if object.class != "Object" || children.is_empty() {
            continue;
        }
        let id = unique(&snake(&object.display_name), MAX_ID, |c| {
            ids.iter().any(|i| i == c)
        });
        ids.push(id.clone());
        device(&mut body, &mut m, (&id, object, &children), driver);
    }
    for n in s
        .nodes
        .iter()
        .filter(|n| n.class != "Object" && n.parent.is_none())
    {
        m.skipped.push(format!(
            "{} ({}): not inside an object",
            n.display_name, n.node_id
        ));
    }
    m.text.push_str(header);
    super::names::review_and_server(&mut m.text, (&m.skipped, &m.needs_person), server);
    m.text.push_str(&body);
    m
}

/// One object as a device: its signals, then its actions.
fn device(
    out: &mut String,
    m: &mut Mapped,
    (id, object, children): (&str, &Surveyed, &[&Surveyed]),
    driver: &str,
) {
    let description = said(object).map_or_else(
        || format!("{}, an object of the OPC UA server", object.display_name),
        str::to_string,
    );
    let _ = writeln!(
        out,
        "\n# {}",
        super::names::one_line(&format!("{} ({})", object.display_name, object.node_id))
    );
    let _ = writeln!(
        out,
        "[[device]]\nid = {}\ndescription = {}",
        quote(id),
        quote(&description)
    );
    let _ = writeln!(
        out,
        "driver = {driver}\nliveness = {{ max_silence_s = 5.0 }}"
    );
    let mut signals: Vec<(String, &Surveyed, &'static str)> = Vec::new();
    for v in children.iter().filter(|n| n.class == "Variable") {
        let dt = v.data_type.as_deref().unwrap_or("unknown");
        let Some(k) = kind(dt) else {
            m.skipped.push(format!(
                "{id}: {} ({}) is a {dt}, which a signal cannot hold",
                v.display_name, v.node_id
            ));
            continue;
        };
        let name = unique(&snake(&v.browse_name), 48, |c| {
            signals.iter().any(|s| s.0 == c)
        });
        signals.push((name, v, k));
    }
    if !signals.is_empty() {
        out.push_str("[device.signals]\n");
    }
    for (name, v, k) in &signals {
        let mut fields = vec![format!("node = {}", quote(&v.node_id))];
        if *k == "bool" {
            fields.push("type = \"bool\"".into());
        }
        if let Some(u) = &v.unit {
            fields.push(format!("unit = {}", quote(u)));
        }
        let what = said(v).map_or_else(
            || format!("{} of {}", v.display_name, object.display_name),
            str::to_string,
        );
        fields.push(format!("description = {}", quote(&what)));
        let _ = writeln!(out, "{name} = {{ {} }}", fields.join(", "));
    }
    m.devices += 1;
    m.signals += signals.len();
    let room = closedloop_plant::MAX_TOOL_NAME - id.len() - 1;
    let mut actions: Vec<String> = Vec::new();
    for (name, v, k) in signals.iter().filter(|s| s.1.writable) {
        let action = unique(&format!("set_{name}"), room, |c| {
            actions.contains(&c.to_string())
        });
        actions.push(action.clone());
        set_action(out, m, (id, &action), (v, k));
    }
    for method in children.iter().filter(|n| n.class == "Method") {
        let action = unique(&snake(&method.browse_name), room, |c| {
            actions.contains(&c.to_string())
        });
        if call_action(out, m, (id, &action), object, method) {
            actions.push(action);
        }
    }
    m.actions += actions.len();
}

/// A writable variable's `set_<name>`: the value written, read back from the same node
/// (`verification = "readback"`: the node holds it; nothing says the effect happened).
fn set_action(
    out: &mut String,
    m: &mut Mapped,
    (id, action): (&str, &str),
    (v, k): (&Surveyed, &str),
) {
    let mut p = vec![format!("type = {}", quote(k))];
    if let Some((lo, hi)) = v.range.filter(|_| k != "bool") {
        p.push(format!("min = {}, max = {}", float(lo), float(hi)));
    } else if k != "bool" {
        m.needs_person.push(format!(
            "{id}.{action}: {} has no EURange: give the value a min and a max",
            v.display_name
        ));
    }
    if let Some(u) = &v.unit {
        p.push(format!("unit = {}", quote(u)));
    }
    p.push(format!(
        "description = {}",
        quote(&format!("the new value of {}", v.display_name))
    ));
    let _ = writeln!(out, "[[device.action]]\nname = {}", quote(action));
    let what = format!(
        "Write {}; confirmed when the node reads the value back.",
        v.display_name
    );
    let _ = writeln!(out, "description = {}", quote(&what));
    let _ = writeln!(out, "params = {{ value = {{ {} }} }}", p.join(", "));
    let _ = writeln!(
        out,
        "write = [{{ node = {}, value = \"params.value\" }}]",
        quote(&v.node_id)
    );
    // The node it writes, read back: a readback, never feedback that the effect happened
    // (a done_when on the same node would be readback dressed as feedback).
    let _ = writeln!(
        out,
        "verification = \"readback\"\nexpect_s = 1.0\nidempotent = true"
    );
}

/// A method as a call action, its input arguments as parameters; `false` (said why) when an
/// argument's type cannot be a parameter.
fn call_action(
    out: &mut String,
    m: &mut Mapped,
    (id, action): (&str, &str),
    object: &Surveyed,
    method: &Surveyed,
) -> bool {
    let mut params: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for a in &method.arguments {
        match param(a) {
            Some(p) => {
                let name = unique(&snake(&a.name), 48, |c| names.iter().any(|n| n == c));
                if p.contains("\"integer\"") || p.contains("\"number\"") {
                    m.needs_person.push(format!(
                        "{id}.{action}: the argument {name} carries no unit (an input argument has none): add unit = \"...\""
                    ));
                }
                params.push(format!("{name} = {{ {p} }}"));
                names.push(name);
            }
            None => {
                m.skipped.push(format!(
                    "{id}: the method {} ({}): its argument {} is a{} {}, which a parameter cannot be",
                    method.display_name, method.node_id, a.name, if a.array { "n array of" } else { "" }, a.data_type
                ));
                return false;
            }
        }
    }
    let args: Vec<String> = names
        .iter()
        .map(|n| quote(&format!("params.{n}")))
        .collect();
    let what = said(method).map_or_else(
        || {
            format!(
                "Call the method {} of {}; nothing confirms its effect.",
                method.display_name, object.display_name
            )
        },
        str::to_string,
    );
    let _ = writeln!(out, "[[device.action]]\nname = {}", quote(action));
    let _ = writeln!(
        out,
        "description = {}",
        quote(&super::names::sentence(&what))
    );
    match params.is_empty() {
        true => out.push_str("params = {}\n"),
        false => {
            let _ = writeln!(out, "params = {{ {} }}", params.join(", "));
        }
    }
    let _ = writeln!(
        out,
        "write = [{{ method = {}, object = {}, args = [{}] }}]",
        quote(&method.node_id),
        quote(&object.node_id),
        args.join(", ")
    );
    out.push_str("verification = \"none\"\n");
    m.needs_person.push(format!(
        "{id}.{action}: nothing tells which variable the method changes, so its calls end `sent`: add done_when on it"
    ));
    true
}

/// A parameter's table from an argument, or `None` for an array or a type a parameter cannot be.
fn param(a: &MethodArgument) -> Option<String> {
    if a.array {
        return None;
    }
    let ty = match a.data_type.as_str() {
        "String" => "string",
        t => kind(t)?,
    };
    let mut p = vec![format!("type = {}", quote(ty))];
    if let Some(d) = &a.description {
        p.push(format!("description = {}", quote(d)));
    }
    Some(p.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, class: &str, parent: Option<usize>) -> Surveyed {
        Surveyed {
            node_id: format!("ns=2;s={id}"),
            browse_name: id.rsplit('.').next().unwrap_or(id).into(),
            display_name: id.rsplit('.').next().unwrap_or(id).into(),
            class: class.into(),
            parent,
            ..Surveyed::default()
        }
    }

    /// Two objects of one name, a folder with nothing of its own, a variable of a type no signal
    /// holds: distinct ids, no device for the folder, the variable skipped, and the text loads.
    #[test]
    fn objects_become_devices_and_what_cannot_be_held_is_said() {
        let var = |id: &str, parent, dt: &str, writable| Surveyed {
            data_type: Some(dt.into()),
            writable,
            ..node(id, "Variable", Some(parent))
        };
        let nodes = vec![
            node("Line", "Object", None),
            node("Line.Pump", "Object", Some(0)),
            node("Other.Pump", "Object", None),
            var("Line.Pump.Flow", 1, "Double", true),
            var("Line.Pump.Label", 1, "String", false),
            var("Other.Pump.Ready", 2, "Boolean", false),
        ];
        let survey = Survey {
            nodes,
            truncated: false,
        };
        let driver =
            r#"{ kind = "opcua", endpoint = "opc.tcp://127.0.0.1:4840/", security = "none" }"#;
        let m = map(&survey, driver, "# test\n", "t");
        assert_eq!((m.devices, m.signals, m.actions), (2, 2, 1), "{}", m.text);
        assert!(m.text.contains("id = \"pump\"") && m.text.contains("id = \"pump_2\""));
        assert!(!m.text.contains("id = \"line\""), "{}", m.text);
        assert_eq!(
            m.skipped,
            ["pump: Label (ns=2;s=Line.Pump.Label) is a String, which a signal cannot hold"]
        );
        assert!(
            m.needs_person
                .iter()
                .any(|n| n == "pump.set_flow: Flow has no EURange: give the value a min and a max")
        );
        let loaded = closedloop_plant::parse(&m.text, "t", std::path::Path::new("."));
        assert!(
            loaded.is_ok(),
            "{:?}\n{}",
            loaded.err().map(|e| e.to_string()),
            m.text
        );
    }
}
