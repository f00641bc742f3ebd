//! Refusals of keys, ids, tables, the environment, the server and the sim options: every one
//! names the file, the device and the key, and says what to do.

mod common;

use closedloop_plant::parse_with_env;
use common::{BASE, edit, env, errors, expect_one};
use std::path::Path;

#[test]
fn base_is_valid() {
    parse_with_env(BASE, "workshop.toml", Path::new("/srv"), &env).unwrap();
}

#[test]
fn unknown_keys_at_every_level() {
    expect_one(
        &edit("name = \"workshop\"", "nmae = \"workshop\""),
        None,
        "server.nmae",
        "did you mean \"name\"",
    );
    expect_one(
        &edit("description = \"Desk lamp\"", "descripton = \"Desk lamp\""),
        Some("lamp"),
        "descripton",
        "did you mean \"description\"",
    );
    expect_one(
        &edit(
            "contact = { discrete_input = 0 }",
            "contact = { discrete_input = 0, typ = \"bool\" }",
        ),
        Some("lamp"),
        "signals.contact.typ",
        "did you mean \"type\"",
    );
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\nexpect = 1"),
        Some("lamp"),
        "action.switch.expect",
        "unknown key \"expect\"",
    );
    expect_one(
        &edit(
            "{ coil = 0, value = \"params.on\" }",
            "{ coil = 0, valu = \"params.on\" }",
        ),
        Some("lamp"),
        "action.switch.write[0].valu",
        "did you mean \"value\"",
    );
    expect_one(
        &edit(
            "{ coil = 1, value = \"true\" }",
            "{ coil = 1, value = \"true\", qos = 1 }",
        ),
        Some("slide"),
        "action.move_to.cancel[0]",
        "\"qos\" does not go with coil",
    );
    expect_one(
        &edit("{ type = \"bool\" }", "{ type = \"bool\", default = true }"),
        Some("lamp"),
        "action.switch.params.on.default",
        "unknown key",
    );
    expect_one(
        &format!("{BASE}\n[plant]\nx = 1\n"),
        None,
        "plant",
        "unknown top-level key",
    );
}

#[test]
fn wrong_types_name_the_key() {
    expect_one(
        &edit("expect_s = 0.02", "expect_s = 0.02\nhold_ms = \"long\""),
        Some("lamp"),
        "action.switch.hold_ms",
        "hold_ms must be a whole number of milliseconds",
    );
    expect_one(
        &edit(
            "model = \"stepper\" }",
            "model = \"stepper\" }\npoll_ms = \"fast\"",
        ),
        Some("slide"),
        "poll_ms",
        "not \"fast\"",
    );
    expect_one(
        &edit("type = \"i32\", scale", "type = \"i33\", scale"),
        Some("slide"),
        "signals.position_mm.type",
        "write one of bool, u16",
    );
    expect_one(
        &edit("{ type = \"bool\" }", "{ type = \"boolean\" }"),
        Some("lamp"),
        "action.switch.params.on.type",
        "did you mean \"bool\"",
    );
}

#[test]
fn device_ids() {
    expect_one(
        &edit("id = \"lamp\"", "id = \"Desk-Lamp\""),
        Some("Desk-Lamp"),
        "id",
        "desk_lamp",
    );
    expect_one(
        &edit("id = \"slide\"", "id = \"lamp\""),
        Some("lamp"),
        "id",
        "used twice",
    );
    let e = expect_one(
        &edit("id = \"lamp\"\n", ""),
        None,
        "device[0].id",
        "missing key \"id\"",
    );
    assert!(e.to_string().contains("key device[0].id"));
}

#[test]
fn duplicate_signals_and_actions() {
    let e = expect_one(
        &edit(
            "contact = { discrete_input = 0 }",
            "contact = { discrete_input = 0 }\ncontact = { coil = 3 }",
        ),
        Some("lamp"),
        "signals.contact",
        "given twice",
    );
    assert_eq!(e.line, Some((12, 1)));
    let dup = edit(
        "stopped_when = \"!moving\"",
        "stopped_when = \"!moving\"\n[[device.action]]\nname = \"move_to\"\nwrite = [{ coil = 2, value = true }]\nverification = \"none\"",
    );
    expect_one(&dup, Some("slide"), "action.move_to.name", "declared twice");
}

#[test]
fn environment_variables() {
    let src = edit(
        "driver = { kind = \"sim\", model = \"stepper\" }",
        "driver = { kind = \"sim\", model = \"${env:SLIDE_MODEL}\" }",
    );
    let e = expect_one(
        &src,
        Some("slide"),
        "driver.model",
        "SLIDE_MODEL is not set",
    );
    assert!(
        e.to_string()
            .contains("workshop.toml: device \"slide\", key driver.model")
    );
    expect_one(
        &edit(
            "description = \"Move the slide.\"",
            "description = \"${env:NOPE}\"",
        ),
        Some("slide"),
        "action.move_to.description",
        "NOPE is not set",
    );
    let ok = edit(
        "description = \"Desk lamp\"",
        "description = \"Desk lamp ${env:SET}\"",
    );
    let plant = parse_with_env(&ok, "workshop.toml", Path::new("/srv"), &env).unwrap();
    assert_eq!(plant.devices[0].description, "Desk lamp value");
}

#[test]
fn server_tokens_and_journal() {
    let token = "[[server.token]]\nname = \"ops\"\nsha256 = \"abc\"\nscopes = [\"read\"]\n";
    expect_one(
        &edit("[[device]]", &format!("{token}\n[[device]]")),
        None,
        "server.token[0].sha256",
        "64 characters",
    );
    let scope = "[[server.token]]\nname = \"ops\"\nsha256 = \"".to_string()
        + &"0".repeat(64)
        + "\"\nscopes = [\"actuate:lamb\"]\n";
    expect_one(
        &edit("[[device]]", &format!("{scope}\n[[device]]")),
        None,
        "server.token[0].scopes[0]",
        "names no device \"lamb\"",
    );
    let e = expect_one(
        &edit(
            "name = \"workshop\"",
            "name = \"workshop\"\njournal = \"postgres://db.local\"",
        ),
        None,
        "server.journal",
        "a PostgreSQL journal names a host and a database",
    );
    assert!(e.message.contains("postgres://closedloop:"), "{e}");
    expect_one(
        &edit(
            "name = \"workshop\"",
            "name = \"workshop\"\njournal = \"redis://x\"",
        ),
        None,
        "server.journal",
        "sqlite://<file>",
    );
}

#[test]
fn sim_options_are_checked_by_the_simulator() {
    let e = expect_one(
        &edit(
            "model = \"relay\" }",
            "model = \"relay\", speed_mm_s = 5.0 }",
        ),
        Some("lamp"),
        "driver.speed_mm_s",
        "not an option of the sim model `relay`",
    );
    assert!(e.message.contains("remove"), "{e}");
    expect_one(
        &edit("model = \"relay\" }", "model = \"relais\" }"),
        Some("lamp"),
        "driver.model",
        "unknown sim model",
    );
    expect_one(
        &edit(
            "model = \"relay\" }",
            "model = \"relay\", colour = \"red\" }",
        ),
        Some("lamp"),
        "driver.colour",
        "unknown key \"colour\"",
    );
    expect_one(
        &edit(
            "model = \"relay\" }",
            "model = \"relay\" }\nsim = { model = \"relay\", listen = \"nowhere\" }",
        ),
        Some("lamp"),
        "sim.listen",
        "not an ip:port",
    );
    let can = |table: &str| {
        edit(
            "model = \"relay\" }",
            &format!("model = \"relay\" }}\nsim = {{ model = \"relay\", can = {table} }}"),
        )
    };
    expect_one(
        &can(r#"{ bus = "b", dbc = "nowhere.dbc", status = "S", command = "C" }"#),
        Some("lamp"),
        "sim.can.dbc",
        "nowhere.dbc does not exist",
    );
    expect_one(
        &can(r#"{ bus = "b", dbc = "x.dbc", status = "S" }"#),
        Some("lamp"),
        "sim.can.command",
        "missing key \"command\"",
    );
    expect_one(
        &can(r#"{ bus = "b", dbc = "x.dbc", status = "S", command = "C", period = 5 }"#),
        Some("lamp"),
        "sim.can.period",
        "did you mean \"period_ms\"",
    );
    expect_one(
        &edit(
            "kind = \"sim\", model = \"relay\"",
            "kind = \"simulator\", model = \"relay\"",
        ),
        Some("lamp"),
        "driver.kind",
        "unknown driver kind \"simulator\"",
    );
}

#[test]
fn syntax_errors_name_the_device_and_line() {
    let e = expect_one(
        &edit(
            "done_when = \"contact == params.on\"",
            "done_when = contact",
        ),
        Some("lamp"),
        "action.done_when",
        "TOML syntax error",
    );
    assert_eq!(e.line.map(|l| l.0), Some(17));
    assert!(e.to_string().starts_with("workshop.toml:17:"), "{e}");
}

#[test]
fn all_problems_are_reported_together() {
    let src = edit(
        "name = \"workshop\"",
        "name = \"workshop\"\njournal = \"postgres://x\"",
    )
    .replacen("contact == params.on", "contakt == params.on", 1)
    .replacen("MOTOR_STALL", "stall", 1);
    let errs = errors(&src);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let text = closedloop_plant::PlantErrors(errs).to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        text.lines().all(|l| l.starts_with("workshop.toml: ")),
        "{text}"
    );
}

#[test]
fn confirm_by_names_declared_tokens_only() {
    let with = |tokens: &str, by: &str| {
        edit(
            "name = \"workshop\"",
            &format!("name = \"workshop\"\nconfirm_by = {by}\n{tokens}"),
        )
    };
    expect_one(
        &with("", "[\"operator\"]"),
        None,
        "server.confirm_by[0]",
        "the plant declares no [[server.token]]",
    );
    let token = "[[server.token]]\nname = \"agent\"\nsha256 = \"".to_string()
        + &"0".repeat(64)
        + "\"\nscopes = [\"actuate:*\"]\n";
    expect_one(
        &with(&token, "[\"operatr\"]"),
        None,
        "server.confirm_by[0]",
        "\"operatr\" names no [[server.token]]; tokens are agent",
    );
    let plant = closedloop_plant::parse(
        &with(&token, "[\"agent\"]"),
        "workshop.toml",
        Path::new("/srv"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plant.server.confirm_by, vec!["agent".to_string()]);
}
