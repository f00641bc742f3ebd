//! Errors found while typing the file (wrong TOML types, unknown keys and names) read like the
//! validation errors: file, device, full key path, what to write in plain words, and the closest
//! valid name. The exact texts are asserted, so a change of wording is a deliberate one.

mod common;

use common::{edit, errors, expect_one};

/// The one error of `src`, as `closedloop check` prints it.
#[track_caller]
fn shown(src: &str) -> String {
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    errs[0].to_string()
}

/// `BASE` with `extra` added to the slide device's own keys.
fn slide_with(extra: &str) -> String {
    edit(
        "model = \"stepper\" }",
        &format!("model = \"stepper\" }}\n{extra}"),
    )
}

#[test]
fn a_param_written_as_its_type_asks_for_a_table() {
    let src = edit(
        "params = { target_mm = { type = \"number\", min = 0, max = 300 } }",
        "params = { target_mm = \"number\" }",
    );
    assert_eq!(
        shown(&src),
        "workshop.toml: device \"slide\", key action.move_to.params.target_mm: params.target_mm \
         must be a table like { type = \"number\", min = 0.0 }, not \"number\""
    );
}

#[test]
fn a_quoted_number_is_shown_without_quotes() {
    assert_eq!(
        shown(&slide_with("poll_ms = \"20\"")),
        "workshop.toml: device \"slide\", key poll_ms: poll_ms must be a whole number of \
         milliseconds, like 20 (no quotes)"
    );
    assert_eq!(
        shown(&slide_with("poll_ms = 2.5")),
        "workshop.toml: device \"slide\", key poll_ms: poll_ms must be a whole number of \
         milliseconds, like 100, not 2.5"
    );
    assert_eq!(
        shown(&slide_with("liveness = { max_silence_s = \"3\" }")),
        "workshop.toml: device \"slide\", key liveness.max_silence_s: liveness.max_silence_s \
         must be a number of seconds, like 3 (no quotes)"
    );
    assert_eq!(
        shown(&slide_with("raw_access = \"yes\"")),
        "workshop.toml: device \"slide\", key raw_access: raw_access must be true or false (no \
         quotes), not \"yes\""
    );
}

#[test]
fn a_type_from_another_tool_gets_our_spelling() {
    assert_eq!(
        shown(&edit("type = \"i32\", scale", "type = \"int32\", scale")),
        "workshop.toml: device \"slide\", key signals.position_mm.type: type = \"int32\" is not \
         allowed (did you mean \"i32\"?); write one of bool, u16, i16, u32, i32, u64, i64, f32, \
         f64"
    );
    expect_one(
        &edit("{ type = \"bool\" }", "{ type = \"double\" }"),
        Some("lamp"),
        "action.switch.params.on.type",
        "type = \"double\" is not allowed (did you mean \"number\"?); write one of bool, number, \
         integer, string",
    );
    assert_eq!(
        shown(&edit("type = \"i32\", scale", "type = 32, scale")),
        "workshop.toml: device \"slide\", key signals.position_mm.type: type must be one of \
         \"bool\", \"u16\", \"i16\", \"u32\", \"i32\", \"u64\", \"i64\", \"f32\", \"f64\" (in \
         quotes), not 32"
    );
}

#[test]
fn an_unknown_device_key_lists_every_device_key() {
    assert_eq!(
        shown(&edit(
            "description = \"Desk lamp\"",
            "descripton = \"Desk lamp\""
        )),
        "workshop.toml: device \"lamp\", key descripton: unknown key \"descripton\" (did you \
         mean \"description\"?); the keys here are id, description, driver, poll_ms, liveness, \
         raw_access, max_rate, max_burst, gateways, sim, signals, action"
    );
    // A misspelt driver also leaves the device without one; both are said.
    let errs = errors(&edit(
        "driver = { kind = \"sim\", model = \"relay\" }",
        "drvier = { kind = \"sim\", model = \"relay\" }",
    ));
    let texts: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
    assert!(
        texts[0].starts_with("unknown key \"drvier\" (did you mean \"driver\"?)"),
        "{texts:#?}"
    );
    assert!(texts[1].starts_with("missing key \"driver\""), "{texts:#?}");
    expect_one(
        &edit(
            "kind = \"sim\", model = \"relay\"",
            "kind = \"modbus-tcp\", address = \"h:502\", unt = 1",
        ),
        Some("lamp"),
        "driver.unt",
        "unknown key \"unt\" (did you mean \"unit\"?); the keys here are kind, address, unit, \
         timeout_ms",
    );
}

#[test]
fn paths_keep_their_array_indices() {
    expect_one(
        &edit(
            "kind = \"sim\", model = \"relay\"",
            "kind = \"sim\", model = \"relay\", faults = [{ kind = \"nak\" }, { kind = \"stall\", after = 3 }]",
        ),
        Some("lamp"),
        "driver.faults[1].after",
        "unknown key \"after\" (did you mean \"after_ms\"?)",
    );
    let tokens = "[[server.token]]\nname = \"a\"\nsha256 = \"x\"\n[[server.token]]\nname = \"b\"\n";
    expect_one(
        &edit("[[device]]", &format!("{tokens}\n[[device]]")),
        None,
        "server.token[1].sha256",
        "missing key \"sha256\"; add it",
    );
    expect_one(
        &edit(
            "contact = { discrete_input = 0 }",
            "contact = { topic = \"t\", true_values = [\"on\", 1] }",
        ),
        Some("lamp"),
        "signals.contact.true_values[1]",
        "true_values[1] must be a string in quotes, like \"1\"",
    );
}

#[test]
fn whole_pieces_of_the_wrong_type() {
    expect_one(
        &edit("{ coil = 0, value = \"params.on\" }", "3"),
        Some("lamp"),
        "action.switch.write[0]",
        "write[0] must be a table like { coil = 0, value = \"true\" }, not 3",
    );
    expect_one(
        &edit(
            "MOTOR_STALL = \"fault\" }",
            "MOTOR_STALL = \"fault\" }\nhold_ms = []",
        ),
        Some("slide"),
        "action.move_to.hold_ms",
        "hold_ms must be a whole number of milliseconds, like 500, not a list",
    );
    expect_one(
        &slide_with("liveness = 3"),
        Some("slide"),
        "liveness",
        "liveness must be a table like { max_silence_s = 2.0 }, not 3",
    );
    expect_one(
        &edit("expect_s = 0.02", "expect_s = inf"),
        Some("lamp"),
        "action.switch.expect_s",
        "expect_s must be a finite number, not inf",
    );
    expect_one(
        &edit(
            "name = \"workshop\"",
            "name = \"workshop\"\ntools = \"generik\"",
        ),
        None,
        "server.tools",
        "tools = \"generik\" is not allowed (did you mean \"generic\"?); write one of \
         per_action, generic",
    );
    expect_one(
        &format!("{}\n[devices]\n", common::BASE),
        None,
        "devices",
        "unknown top-level key \"devices\" (did you mean \"device\"?)",
    );
}
