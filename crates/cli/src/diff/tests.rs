//! `closedloop diff`'s rules, one at a time: each test edits one key of a base plant and
//! checks the exact rows the comparison yields.

use super::Verdict::{self, Breaking, Compatible};
use super::{Change, compare};
use closedloop_plant::Plant;

pub(super) const BASE: &str = r#"
[server]
journal = "sqlite::memory:"

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
idempotent = true

[[device]]
id = "slide"
description = "Linear slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01, unit = "mm" }
moving = { discrete_input = 0 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0.0, max = 300.0, unit = "mm" }, speed = { type = "string", enum = ["slow", "fast"] } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "params.speed == 'fast' || true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving"
expect_s = 3.0
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
"#;

pub(super) fn plant(src: &str) -> Plant {
    closedloop_plant::parse(src, "plant.toml", std::path::Path::new("/tmp"))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The rows of comparing BASE with BASE after each `(from, to)` replacement.
pub(super) fn diff(edits: &[(&str, &str)]) -> Vec<(String, String, Verdict)> {
    let mut new = BASE.to_string();
    for (from, to) in edits {
        assert!(new.contains(from), "{from:?} is not in the plant");
        new = new.replacen(from, to, 1);
    }
    compare(&plant(BASE), &plant(&new))
        .into_iter()
        .map(
            |Change {
                 tool,
                 what,
                 verdict,
             }| (tool, what, verdict),
        )
        .collect()
}

pub(super) fn row(tool: &str, what: &str, verdict: Verdict) -> (String, String, Verdict) {
    (tool.into(), what.into(), verdict)
}

#[test]
fn the_same_plant_has_no_change() {
    assert_eq!(diff(&[]), vec![]);
}

#[test]
fn a_removed_tool_breaks_and_an_added_one_does_not() {
    assert_eq!(
        diff(&[("name = \"switch\"", "name = \"toggle\"")]),
        vec![
            row("lamp_switch", "removed", Breaking),
            row("lamp_toggle", "added", Compatible)
        ]
    );
}

#[test]
fn a_removed_parameter_and_a_new_one_both_break() {
    let speed = ", speed = { type = \"string\", enum = [\"slow\", \"fast\"] }";
    let write = "params.speed == 'fast' || true";
    assert_eq!(
        diff(&[(speed, ""), (write, "true")]),
        vec![row("slide_move_to", "parameter speed removed", Breaking)]
    );
    assert_eq!(
        diff(&[(
            "{ on = { type = \"bool\" } }",
            "{ on = { type = \"bool\" }, level = { type = \"integer\" } }"
        )]),
        vec![row(
            "lamp_switch",
            "new required parameter level (integer)",
            Breaking
        )]
    );
}

#[test]
fn a_changed_type_breaks_except_integer_to_number() {
    assert_eq!(
        diff(&[
            ("on = { type = \"bool\" }", "on = { type = \"string\" }"),
            ("contact == params.on", "contact == (params.on == 'on')"),
            ("value = \"params.on\"", "value = \"params.on == 'on'\"")
        ]),
        vec![row(
            "lamp_switch",
            "parameter on: type bool → string",
            Breaking
        )]
    );
    let integer = diff(&[(
        "type = \"number\", min = 0.0",
        "type = \"integer\", min = 0.0",
    )]);
    assert_eq!(
        integer,
        vec![row(
            "slide_move_to",
            "parameter target_mm: type number → integer",
            Breaking
        )]
    );
    let widened = compare(
        &plant(&BASE.replacen(
            "type = \"number\", min = 0.0",
            "type = \"integer\", min = 0.0",
            1,
        )),
        &plant(BASE),
    );
    assert_eq!(
        widened,
        vec![Change::new(
            "slide_move_to",
            "parameter target_mm: type integer → number (widened)",
            Compatible
        )]
    );
}

#[test]
fn a_changed_unit_breaks() {
    assert_eq!(
        diff(&[("max = 300.0, unit = \"mm\"", "max = 300.0, unit = \"cm\"")]),
        vec![row(
            "slide_move_to",
            "parameter target_mm: unit mm → cm",
            Breaking
        )]
    );
    assert_eq!(
        diff(&[("max = 300.0, unit = \"mm\"", "max = 300.0")]),
        vec![row(
            "slide_move_to",
            "parameter target_mm: unit mm → none",
            Breaking
        )]
    );
}

#[test]
fn a_narrowed_range_breaks_and_a_widened_one_does_not() {
    assert_eq!(
        diff(&[("max = 300.0", "max = 250.0"), ("min = 0.0", "min = -5.0")]),
        vec![
            row(
                "slide_move_to",
                "parameter target_mm: minimum 0 → -5 mm (widened)",
                Compatible
            ),
            row(
                "slide_move_to",
                "parameter target_mm: maximum 300 → 250 mm (narrowed)",
                Breaking
            ),
        ]
    );
    assert_eq!(
        diff(&[("min = 0.0, max = 300.0, ", "")]),
        vec![
            row(
                "slide_move_to",
                "parameter target_mm: minimum 0 mm removed (widened)",
                Compatible
            ),
            row(
                "slide_move_to",
                "parameter target_mm: maximum 300 mm removed (widened)",
                Compatible
            ),
        ]
    );
    let old = BASE.replacen("min = 0.0, ", "", 1);
    assert_eq!(
        compare(&plant(&old), &plant(BASE)),
        vec![Change::new(
            "slide_move_to",
            "parameter target_mm: minimum 0 mm added (narrowed)",
            Breaking
        )]
    );
}

#[test]
fn a_removed_choice_breaks_and_an_added_one_does_not() {
    assert_eq!(
        diff(&[("[\"slow\", \"fast\"]", "[\"slow\", \"medium\"]")]),
        vec![
            row(
                "slide_move_to",
                "parameter speed: choice \"fast\" removed",
                Breaking
            ),
            row(
                "slide_move_to",
                "parameter speed: choice \"medium\" added",
                Compatible
            ),
        ]
    );
    assert_eq!(
        diff(&[(
            "type = \"string\", enum = [\"slow\", \"fast\"]",
            "type = \"string\""
        )]),
        vec![row(
            "slide_move_to",
            "parameter speed: no longer restricted to a list",
            Compatible
        )]
    );
}

#[test]
fn changed_verification_breaks() {
    assert_eq!(
        diff(&[(
            "done_when = \"contact == params.on\"",
            "verification = \"readback\""
        )]),
        vec![row(
            "lamp_switch",
            "verification feedback → readback",
            Breaking
        )]
    );
}
