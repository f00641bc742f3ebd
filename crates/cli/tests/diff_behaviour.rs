//! `closedloop diff` on changes that keep the tool surface and change what happens next to the
//! machine: each reported with its place, key and class, and the exit code of each
//! `--fail-on`; a counterexample is checked by evaluating both expressions in it; an additive
//! change still exits 0. Plants written for these tests.

use closedloop_contract::Value as V;
use closedloop_plant::{Expr, ParamValue, Params, Scope};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

const OLD: &str = r#"
[server]
name = "cell"
journal = "sqlite://journal.db"

[[device]]
id = "oven"
description = "Curing oven"
driver = { kind = "sim", model = "heater" }
[device.signals]
temperature_c = { input = 0, type = "i16", scale = 0.1, unit = "°C" }
[[device.action]]
name = "set_temperature"
description = "Heat the oven to a setpoint."
params = { setpoint_c = { type = "number", min = 25.0, max = 90.0, unit = "°C" } }
write = [{ holding = 0, scale = 0.1, value = "params.setpoint_c" }, { coil = 0, value = "true" }]
done_when = "abs(temperature_c - params.setpoint_c) <= 1.0"
expect_s = 30.0

[[device]]
id = "lift"
description = "Lift"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01 }
moving = { discrete_input = 0 }
fault = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the lift."
params = { target_mm = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.5 && !moving"
fail_when = { MOTOR_STALL = "fault" }
expect_s = 3.0
"#;

/// `closedloop diff old.toml new.toml ARGS…`: (exit code, stdout).
fn diff(new: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old.toml"), OLD).unwrap();
    std::fs::write(dir.path().join("new.toml"), new).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .current_dir(dir.path())
        .args(["diff", "old.toml", "new.toml"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "{err}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The behaviour rows of the JSON report as (place, key, class), and the rows themselves.
fn rows(new: &str) -> (Vec<(String, String, String)>, Vec<Value>) {
    let (_, out) = diff(new, &["--json"]);
    let report: Value = serde_json::from_str(&out).unwrap();
    let rows = report["behaviour"].as_array().unwrap().clone();
    let keys = rows
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (s("place"), s("key"), s("class"))
        })
        .collect();
    (keys, rows)
}

fn row(place: &str, key: &str, class: &str) -> (String, String, String) {
    (place.into(), key.into(), class.into())
}

/// Exit codes under `--fail-on surface`, `behaviour` (the default) and `looser`.
fn exits(new: &str) -> [Option<i32>; 3] {
    ["surface", "behaviour", "looser"].map(|rule| diff(new, &["--fail-on", rule]).0)
}

/// `name = value` pairs of a counterexample (`e.g. a = 1, params.b = 2, moving = true`),
/// bools as 1 and 0.
fn state(meaning: &str) -> BTreeMap<String, f64> {
    let (_, s) = meaning.split_once("e.g. ").expect("a counterexample");
    s.split(", ")
        .map(|kv| {
            let (k, v) = kv.split_once(" = ").unwrap();
            let v = match v {
                "true" => 1.0,
                "false" => 0.0,
                n => n.parse().unwrap(),
            };
            (k.to_string(), v)
        })
        .collect()
}

/// Whether `src` holds in `state` (numbers; a name of `bools` as a bool).
fn holds(src: &str, state: &BTreeMap<String, f64>, bools: &[&str]) -> bool {
    let mut signals = BTreeMap::new();
    let mut params = Params::new();
    for (k, v) in state {
        match k.strip_prefix("params.") {
            Some(p) => {
                params.insert(p.to_string(), ParamValue::Number(*v));
            }
            None if bools.contains(&k.as_str()) => {
                signals.insert(k.clone(), V::Bool(*v != 0.0));
            }
            None => {
                signals.insert(k.clone(), V::Number(*v));
            }
        }
    }
    let devices = BTreeMap::new();
    let scope = Scope {
        signals: &signals,
        params: &params,
        devices: &devices,
        extra_strings: &[],
    };
    Expr::compile(src).unwrap().eval_bool(&scope).unwrap()
}

#[test]
fn a_wider_done_when_tolerance_is_looser_and_its_counterexample_evaluates_so() {
    let old_src = "abs(temperature_c - params.setpoint_c) <= 1.0";
    let new_src = "abs(temperature_c - params.setpoint_c) <= 40.0";
    let new = OLD.replacen(old_src, new_src, 1);
    let (keys, rows) = rows(&new);
    assert_eq!(keys, [row("oven.set_temperature", "done_when", "looser")]);
    let s = state(rows[0]["meaning"].as_str().unwrap());
    assert!(holds(new_src, &s, &[]) && !holds(old_src, &s, &[]), "{s:?}");
    assert_eq!(exits(&new), [Some(0), Some(1), Some(1)]);
}

#[test]
fn a_dropped_conjunct_is_looser_with_the_state_that_shows_it() {
    let new = OLD.replacen(" && !moving\"", "\"", 1);
    let (keys, rows) = rows(&new);
    assert_eq!(keys, [row("lift.move_to", "done_when", "looser")]);
    let s = state(rows[0]["meaning"].as_str().unwrap());
    let old_src = "abs(position_mm - params.target_mm) <= 0.5 && !moving";
    let new_src = "abs(position_mm - params.target_mm) <= 0.5";
    assert!(
        holds(new_src, &s, &["moving"]) && !holds(old_src, &s, &["moving"]),
        "{s:?}"
    );
    assert_eq!(exits(&new), [Some(0), Some(1), Some(1)]);
}

#[test]
fn a_removed_fail_when_code_is_looser() {
    let new = OLD.replacen("fail_when = { MOTOR_STALL = \"fault\" }\n", "", 1);
    let (keys, rows) = rows(&new);
    assert_eq!(
        keys,
        [row("lift.move_to", "fail_when.MOTOR_STALL", "looser")]
    );
    assert_eq!(rows[0]["old"], "fault");
    assert_eq!(rows[0]["new"], "none");
    assert_eq!(exits(&new), [Some(0), Some(1), Some(1)]);
}

#[test]
fn an_added_requires_and_an_added_rate_limit_are_stricter() {
    let new = OLD.replacen(
        "expect_s = 3.0\n",
        "expect_s = 3.0\nrequires = \"devices.oven.temperature_c < 60.0\"\nmax_rate = \"1/h\"\n",
        1,
    );
    let (keys, _) = rows(&new);
    assert_eq!(
        keys,
        [
            row("lift.move_to", "requires", "stricter"),
            row("lift.move_to", "max_rate", "stricter")
        ]
    );
    let [surface, behaviour, looser] = exits(&new);
    assert_eq!((behaviour, looser), (Some(1), Some(0)));
    assert!(surface.is_some());
}

#[test]
fn a_changed_word_order_and_a_changed_scale_are_changed() {
    let new = OLD
        .replacen(
            "{ holding = 0, type = \"i32\", value",
            "{ holding = 0, type = \"i32\", word_order = \"little\", value",
            1,
        )
        .replacen(
            "type = \"i16\", scale = 0.1, unit",
            "type = \"i16\", scale = 1.0, unit",
            1,
        );
    let (keys, rows) = rows(&new);
    assert_eq!(
        keys,
        [
            row("oven", "signal temperature_c", "changed"),
            row("lift.move_to", "write[0]", "changed")
        ]
    );
    let scale = rows[0]["meaning"].as_str().unwrap();
    assert!(
        scale.contains("scale 0.1 → 1: the same raw value reads as 10 × the old number"),
        "{scale}"
    );
    let order = rows[1]["meaning"].as_str().unwrap();
    assert!(order.starts_with("word order big → little"), "{order}");
    assert_eq!(exits(&new), [Some(0), Some(1), Some(0)]);
}

#[test]
fn a_new_alarm_blocking_a_device_is_stricter() {
    let new = format!(
        "{OLD}\n[[alarm]]\nname = \"OVERHEAT\"\nwhen = \"devices.oven.temperature_c > 80.0\"\nblocks = [\"lift\"]\ndescription = \"Too hot to move the lift.\"\n"
    );
    let (keys, rows) = rows(&new);
    assert_eq!(keys, [row("alarm OVERHEAT", "alarm", "stricter")]);
    assert!(
        rows[0]["meaning"]
            .as_str()
            .unwrap()
            .starts_with("added: blocks lift")
    );
    // `list_alarms` appears: a compatible surface change, so only the behaviour fails.
    assert_eq!(exits(&new), [Some(0), Some(1), Some(0)]);
}

#[test]
fn an_additive_change_exits_zero_under_every_rule() {
    let new = OLD.replacen("max = 90.0", "max = 120.0", 1).replacen(
        "Move the lift.",
        "Move the lift to an absolute height.",
        1,
    ) + "\n[[device.action]]\nname = \"home\"\ndescription = \"Home the lift.\"\nparams = {}\nwrite = [{ coil = 0, value = \"true\" }]\ndone_when = \"!moving\"\nexpect_s = 1.0\n";
    let (keys, _) = rows(&new);
    assert_eq!(keys, []);
    assert_eq!(exits(&new), [Some(0), Some(0), Some(0)]);
}

#[test]
fn a_rewritten_expression_that_means_the_same_is_changed_with_the_number_of_states() {
    let new = OLD.replacen(
        "abs(temperature_c - params.setpoint_c) <= 1.0",
        "abs(params.setpoint_c - temperature_c) <= 1.0",
        1,
    );
    let (keys, rows) = rows(&new);
    assert_eq!(keys, [row("oven.set_temperature", "done_when", "changed")]);
    let meaning = rows[0]["meaning"].as_str().unwrap();
    assert!(
        meaning.starts_with("written differently; no difference found in "),
        "{meaning}"
    );
    assert!(!meaning.contains("equivalent"));
}
