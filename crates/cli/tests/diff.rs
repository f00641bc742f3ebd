//! `closedloop diff OLD NEW` on pairs of plant files: the exact table, the summary line and
//! the exit code a plant repository's CI reads (1 on anything breaking, 0 otherwise), and a
//! file that does not load named as old or new.

mod common;

use common::run_in;

const OLD: &str = r#"
[server]
name = "cell"
journal = "sqlite://journal.db"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02

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
done_when = "abs(temperature_c - params.setpoint_c) <= 0.5"
expect_s = 30.0
"#;

/// A second lamp action, appended to a plant's lamp.
const PULSE: &str = r#"
[[device.action]]
name = "pulse"
description = "Flash the lamp once."
params = {}
write = [{ coil = 0, value = "true" }]
done_when = "contact"
expect_s = 0.02
"#;

/// `closedloop diff old.toml new.toml` in a folder holding both: (exit code, stdout, stderr).
fn diff(old: &str, new: &str) -> (Option<i32>, String, String) {
    diff_with(old, new, &[])
}

/// `closedloop diff old.toml new.toml ARGS…`.
fn diff_with(old: &str, new: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("old.toml", old), ("new.toml", new)] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let mut all = vec!["diff", "old.toml", "new.toml"];
    all.extend(args);
    run_in(dir.path(), &all)
}

/// OLD with the lamp's action followed by PULSE.
fn with_pulse(plant: &str) -> String {
    plant.replacen("expect_s = 0.02\n", &format!("expect_s = 0.02\n{PULSE}"), 1)
}

#[test]
fn a_narrowed_range_a_new_parameter_and_a_removed_tool_break() {
    let new = OLD.replacen("max = 90.0", "max = 80.0", 1).replacen(
        "{ on = { type = \"bool\" } }",
        "{ on = { type = \"bool\" }, level = { type = \"integer\", min = 0, max = 100 } }",
        1,
    );
    let (code, out, err) = diff(&with_pulse(OLD), &new);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(
        out,
        "\
tool                  change                                               verdict
lamp_switch           new required parameter level (integer)               breaking
lamp_pulse            removed                                              breaking
oven_set_temperature  parameter setpoint_c: maximum 90 → 80 °C (narrowed)  breaking

3 breaking, 0 compatible: a client written against old.toml may fail with new.toml

behaviour: 0 looser, 1 stricter, 0 changed
class     where       key     change
stricter  lamp.pulse  action  declared → none: removed: it can no longer be run

exit 1 (--fail-on behaviour)
"
    );
}

#[test]
fn an_added_tool_a_wider_range_and_new_words_are_compatible() {
    let new = with_pulse(OLD)
        .replacen("max = 90.0", "max = 120.0", 1)
        .replacen("Switch the lamp.", "Switch the desk lamp on or off.", 1);
    let (code, out, err) = diff(OLD, &new);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(
        out,
        "\
tool                  change                                               verdict
lamp_switch           description changed                                  compatible
oven_set_temperature  parameter setpoint_c: maximum 90 → 120 °C (widened)  compatible
lamp_pulse            added                                                compatible

0 breaking, 3 compatible: a client written against old.toml works with new.toml as before

no change to behaviour

exit 0 (--fail-on behaviour)
"
    );
}

#[test]
fn confirmation_and_verification_changes_break_and_raw_tools_follow_raw_access() {
    let new = OLD
        .replacen("expect_s = 0.02\n", "expect_s = 0.02\nconfirm = true\n", 1)
        .replacen(
            "done_when = \"abs(temperature_c - params.setpoint_c) <= 0.5\"",
            "verification = \"readback\"",
            1,
        )
        .replacen("id = \"lamp\"\n", "id = \"lamp\"\nraw_access = true\n", 1);
    let (code, out, err) = diff(OLD, &new);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(
        out,
        "\
tool                  change                                                    verdict
lamp_switch           confirm turned on: nothing moves until a person confirms  breaking
oven_set_temperature  verification feedback → readback                          breaking
modbus_read           added                                                     compatible
modbus_write          added                                                     compatible

2 breaking, 2 compatible: a client written against old.toml may fail with new.toml

behaviour: 2 looser, 1 stricter, 0 changed
class     where                 key           change
looser    lamp                  raw_access    false → true: raw register writes allowed beside its actions
stricter  lamp.switch           confirm       false → true: nothing moves until a person confirms
looser    oven.set_temperature  verification  feedback → readback: completed when the written registers read back, without sensing the effect

exit 1 (--fail-on behaviour)
"
    );
}

#[test]
fn the_same_surface_says_so_and_passes_unless_behaviour_counts() {
    // Only what clients never see changed: the polling period.
    let new = OLD.replacen("id = \"oven\"\n", "id = \"oven\"\npoll_ms = 200\n", 1);
    let behaviour = "\
behaviour: 0 looser, 0 stricter, 1 changed
class     where  key      change
changed   oven   poll_ms  100 ms → 200 ms: read every 200 ms: a criterion is judged on values up to that old
";
    let (code, out, err) = diff_with(OLD, &new, &["--fail-on", "surface"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let expected =
        format!("no change to the tool surface\n\n{behaviour}\nexit 0 (--fail-on surface)\n");
    assert_eq!(out, expected);
    let (code, out, err) = diff(OLD, &new);
    assert_eq!(code, Some(1), "{out}{err}");
    assert_eq!(
        out,
        expected.replace("exit 0 (--fail-on surface)", "exit 1 (--fail-on behaviour)")
    );
    let (code, out, err) = diff_with(OLD, &new, &["--fail-on", "looser"]);
    assert_eq!(
        code,
        Some(0),
        "a changed poll period lets nothing more through: {out}{err}"
    );
}

#[test]
fn a_plant_that_does_not_load_is_named_as_old_or_new() {
    let (code, out, err) = diff(OLD, &OLD.replacen("params.on\" }]", "params.of\" }]", 1));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.starts_with(
            "error: the new plant file new.toml does not load:\nnew.toml: device \"lamp\""
        ),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("new.toml"), OLD).unwrap();
    let (code, _, err) = run_in(dir.path(), &["diff", "missing.toml", "new.toml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("error: the old plant file missing.toml does not load:\nmissing.toml: cannot read the plant file"),
        "{err}"
    );
}
