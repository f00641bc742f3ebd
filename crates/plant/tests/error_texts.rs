//! Every text the loader can say about a wrongly typed key, read as the user reads it: each
//! scalar and list of every example plant replaced by a value of another type, and every
//! device's own key written below its `[device.signals]` header. No message says one thing
//! twice (two examples, a repeated phrase), and each names the key the user wrote.

use closedloop_plant::{PlantError, parse_with_env};
use std::path::Path;
use toml::Value;

/// The example plants and the test plants, each with its text.
fn plants() -> Vec<(String, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut out = Vec::new();
    for dir in ["examples", "crates/plant/tests/plants"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    out
}

/// `v` as TOML text, inline throughout (this crate's `toml` is built without its writer).
fn inline(v: &Value) -> String {
    match v {
        Value::String(s) => serde_json::Value::from(s.as_str()).to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Boolean(b) => b.to_string(),
        Value::Datetime(d) => d.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        Value::Table(t) => format!("{{ {} }}", pairs(t, ", ")),
    }
}

fn pairs(t: &toml::Table, sep: &str) -> String {
    let each: Vec<String> = t
        .iter()
        .map(|(k, v)| format!("{} = {}", serde_json::Value::from(k.as_str()), inline(v)))
        .collect();
    each.join(sep)
}

fn load(doc: &toml::Table) -> Vec<PlantError> {
    let text = pairs(doc, "\n");
    let env = |_: &str| Some("127.0.0.1:502".to_string());
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples"));
    parse_with_env(&text, "plant.toml", dir, &env).map_or_else(|e| e.0, |_| Vec::new())
}

/// A value of another TOML type than `v` (`None` for a table: its keys are mutated instead).
fn other_type(v: &Value) -> Option<Value> {
    Some(match v {
        Value::String(_) => Value::Integer(7),
        Value::Integer(_) | Value::Float(_) | Value::Boolean(_) => Value::String("seven".into()),
        Value::Array(_) => Value::Integer(3),
        Value::Datetime(_) | Value::Table(_) => return None,
    })
}

/// The paths of every scalar and list under `v`, each a list of keys and indices.
fn leaves(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Table(t) => {
            for (k, v) in t {
                path.push(k.clone());
                leaves(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) if items.iter().all(Value::is_table) && !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                leaves(v, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

fn at<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, seg| match v {
        Value::Table(t) => t.get_mut(seg).unwrap(),
        Value::Array(a) => &mut a[seg.parse::<usize>().unwrap()],
        _ => unreachable!(),
    })
}

/// What is wrong with one message, if anything: a phrase said twice in one clause, two
/// examples, doubled punctuation.
fn garbled(message: &str) -> Option<String> {
    for clause in message.split(['.', ';']) {
        if clause.matches(" like ").count() > 1 {
            return Some("two examples in one clause".into());
        }
        let words: Vec<&str> = clause.split_whitespace().collect();
        for n in [3, 4] {
            for (i, w) in words.windows(n).enumerate() {
                if words[i + 1..].windows(n).any(|x| x == w) && !w.iter().all(|s| s.len() < 3) {
                    return Some(format!("\"{}\" said twice", w.join(" ")));
                }
            }
        }
    }
    [", ,", "  ", ";;", ", ;", "..", " ,"]
        .iter()
        .find(|p| message.contains(**p))
        .map(|p| format!("{p:?} in it"))
}

/// The key a message names, its last key without indices: `write[0].value` → `value`.
fn last_key(e: &PlantError) -> String {
    let key = e.key.as_deref().unwrap_or("");
    let last = key.rsplit('.').next().unwrap_or(key);
    last.split('[').next().unwrap_or(last).to_string()
}

#[test]
fn every_wrongly_typed_key_is_named_as_written_and_said_once() {
    let (mut checked, mut said, mut problems) = (0, 0, Vec::new());
    let (mut accepted, mut invalid) = (std::collections::BTreeSet::new(), Vec::new());
    for (file, text) in plants() {
        let doc: toml::Table = toml::from_str(&text).unwrap();
        if !load(&doc).is_empty() {
            invalid.push(file.rsplit('/').next().unwrap_or(&file).to_string());
            continue;
        }
        let mut paths = Vec::new();
        leaves(&Value::Table(doc.clone()), &mut Vec::new(), &mut paths);
        for path in paths {
            let mut value = Value::Table(doc.clone());
            let slot = at(&mut value, &path);
            let Some(wrong) = other_type(slot) else {
                continue;
            };
            *slot = wrong;
            let Value::Table(changed) = value else {
                unreachable!()
            };
            let errors = load(&changed);
            checked += 1;
            said += errors.len();
            let leaf = path
                .iter()
                .rev()
                .find(|s| s.parse::<usize>().is_err())
                .unwrap();
            if errors.is_empty() {
                accepted.insert(leaf.clone());
            }
            if !errors.is_empty() && !errors.iter().any(|e| &last_key(e) == leaf) {
                problems.push(format!(
                    "{file} {path:?}: no message names {leaf}: {errors:#?}"
                ));
            }
            for e in &errors {
                if let Some(why) = garbled(&e.message) {
                    problems.push(format!("{file} {path:?}: {why}: {e}"));
                }
            }
        }
    }
    assert!(
        checked > 500 && said > 500,
        "only {checked} keys tried, {said} messages"
    );
    // Keys that take either type: expressions (a number is a constant one: `value`, `expect_s`,
    // a CAN write's signals), and a CAN `message` by name or by id. Any other key accepting a
    // value of the wrong type is a loader bug.
    let either = [
        "On", "Reset", "Start", "Stop", "TargetMm", "expect_s", "message", "value",
    ];
    assert_eq!(accepted, either.iter().map(|k| k.to_string()).collect());
    // The one plant this harness cannot load: its variables are not all addresses.
    assert_eq!(invalid, ["protocols.toml"]);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A device's own key below `[device.signals]` is a signal to TOML: the message says where it
/// belongs, with the one example of a signal.
#[test]
fn a_device_key_below_the_signals_header_is_told_where_it_belongs() {
    let base = "[[device]]\nid = \"lamp\"\ndriver = { kind = \"sim\", model = \"relay\" }\n\
                [device.signals]\ncontact = { discrete_input = 0 }\n";
    for (key, value) in [
        ("poll_ms", "20"),
        ("description", "\"Desk lamp\""),
        ("raw_access", "true"),
        ("max_rate", "\"6/min\""),
        ("max_burst", "2"),
        ("gateways", "[\"a\"]"),
    ] {
        let src = format!("{base}{key} = {value}\n");
        let errors = parse_with_env(&src, "w.toml", Path::new("."), &|_| None).unwrap_err();
        let text = errors.to_string();
        assert_eq!(errors.len(), 1, "{text}");
        let at = format!("w.toml: device \"lamp\", key signals.{key}");
        assert!(text.starts_with(&at), "{text}");
        assert!(
            text.contains(&format!(
                "{key} is a key of the device, not a signal: write it above"
            )),
            "{text}"
        );
        assert_eq!(garbled(&errors.0[0].message), None, "{text}");
    }
}
