//! Refusals of expressions and plans: unknown names, type errors, verification rules,
//! read-only writes. Every one names the file, the device and the key.

mod common;

use common::{edit, expect_one};

#[test]
fn unknown_names_in_every_expression_key() {
    unknown_names_in_the_lamp_s_done_when_and_requires();
    unknown_names_in_the_slide_s_keys();
    misplaced_names_in_the_lamp_s_switch();
}

/// The lamp's `done_when`, with the names it could have meant, and its `requires`.
fn unknown_names_in_the_lamp_s_done_when_and_requires() {
    let e = expect_one(
        &edit(
            "done_when = \"contact == params.on\"",
            "done_when = \"contakt == params.on\"",
        ),
        Some("lamp"),
        "action.switch.done_when",
        "unknown name \"contakt\"",
    );
    assert_eq!(
        e.to_string(),
        "workshop.toml: device \"lamp\", key action.switch.done_when: unknown name \"contakt\" (did you mean contact?) — signals of lamp are commanded, contact; params are on"
    );
    expect_one(
        &edit(
            "expect_s = 0.02",
            "expect_s = 0.02\nrequires = \"!devices.slide.faulty\"",
        ),
        Some("lamp"),
        "action.switch.requires",
        "device slide has no signal \"faulty\" (did you mean fault?)",
    );
    expect_one(
        &edit(
            "expect_s = 0.02",
            "expect_s = 0.02\nrequires = \"!devices.slid.fault\"",
        ),
        Some("lamp"),
        "action.switch.requires",
        "unknown device \"slid\"",
    );
}

/// The slide's `fail_when`, `expect_s`, `stopped_when`, `started_when` and written value.
fn unknown_names_in_the_slide_s_keys() {
    expect_one(
        &edit("MOTOR_STALL = \"fault\"", "MOTOR_STALL = \"stall\""),
        Some("slide"),
        "action.move_to.fail_when.MOTOR_STALL",
        "unknown name \"stall\"",
    );
    expect_one(
        &edit("/ 100 + 0.05\"", "/ speed\""),
        Some("slide"),
        "action.move_to.expect_s",
        "unknown name \"speed\"",
    );
    expect_one(
        &edit("stopped_when = \"!moving\"", "stopped_when = \"!movin\""),
        Some("slide"),
        "action.move_to.stopped_when",
        "did you mean moving?",
    );
    expect_one(
        &edit(
            "stopped_when = \"!moving\"",
            "stopped_when = \"!moving\"\nstarted_when = \"params.go\"",
        ),
        Some("slide"),
        "action.move_to.started_when",
        "unknown name \"params.go\"",
    );
    expect_one(
        &edit(
            "value = \"params.target_mm * 100\"",
            "value = \"params.target * 100\"",
        ),
        Some("slide"),
        "action.move_to.write[0].value",
        "did you mean params.target_mm?",
    );
}

/// A parameter named without `params.`, and `command_id` outside an MQTT payload.
fn misplaced_names_in_the_lamp_s_switch() {
    expect_one(
        &edit(
            "done_when = \"contact == params.on\"",
            "done_when = \"contact == on\"",
        ),
        Some("lamp"),
        "action.switch.done_when",
        "\"on\" is a parameter; write params.on",
    );
    expect_one(
        &edit(
            "{ coil = 0, value = \"params.on\" }",
            "{ coil = 0, value = \"command_id\" }",
        ),
        Some("lamp"),
        "action.switch.write[0].value",
        "only known inside an MQTT payload",
    );
}

#[test]
fn type_errors() {
    expect_one(
        &edit(
            "stopped_when = \"!moving\"",
            "stopped_when = \"!position_mm\"",
        ),
        Some("slide"),
        "action.move_to.stopped_when",
        "'!' cannot be applied to a number",
    );
    expect_one(
        &edit(
            "done_when = \"contact == params.on\"",
            "done_when = \"contact == 1\"",
        ),
        Some("lamp"),
        "action.switch.done_when",
        "compares contact (a bool) with a number literal",
    );
    expect_one(
        &edit("MOTOR_STALL = \"fault\"", "MOTOR_STALL = \"position_mm\""),
        Some("slide"),
        "action.move_to.fail_when.MOTOR_STALL",
        "must yield true or false, but it yields the number 1",
    );
    expect_one(
        &edit("expect_s = 0.02", "expect_s = \"contact\""),
        Some("lamp"),
        "action.switch.expect_s",
        "must yield a number",
    );
    expect_one(
        &edit(
            "{ coil = 0, value = \"params.on\" }",
            "{ coil = 0, value = \"1\" }",
        ),
        Some("lamp"),
        "action.switch.write[0].value",
        "must yield true or false",
    );
    expect_one(
        &edit("value = \"params.target_mm * 100\"", "value = \"'far'\""),
        Some("slide"),
        "action.move_to.write[0].value",
        "must yield a number or a bool",
    );
    // Reached only when `fault` is true: the dry run tries both.
    expect_one(
        &edit(
            "MOTOR_STALL = \"fault\"",
            "MOTOR_STALL = \"fault && position_mm\"",
        ),
        Some("slide"),
        "action.move_to.fail_when.MOTOR_STALL",
        "'&&' cannot be applied",
    );
    expect_one(
        &edit("expect_s = 0.02", "expect_s = -1"),
        Some("lamp"),
        "action.switch.expect_s",
        "0 or more seconds",
    );
}

#[test]
fn verification_rules() {
    expect_one(
        &edit("done_when = \"contact == params.on\"\n", ""),
        Some("lamp"),
        "action.switch.done_when",
        "needs done_when",
    );
    expect_one(
        &edit(
            "done_when = \"contact == params.on\"",
            "done_when = \"params.on || !params.on\"",
        ),
        Some("lamp"),
        "action.switch.done_when",
        "reads no signal",
    );
    expect_one(
        &edit(
            "expect_s = 0.02",
            "expect_s = 0.02\nverification = \"none\"",
        ),
        Some("lamp"),
        "action.switch.verification",
        "remove done_when",
    );
}

#[test]
fn writes_to_read_only_addresses_are_refused() {
    expect_one(
        &edit(
            "{ coil = 0, value = \"params.on\" }",
            "{ discrete_input = 0, value = \"params.on\" }",
        ),
        Some("lamp"),
        "action.switch.write[0].discrete_input",
        "read-only",
    );
    expect_one(
        &edit(
            "{ holding = 0, type = \"i32\",",
            "{ input = 0, type = \"i32\",",
        ),
        Some("slide"),
        "action.move_to.write[0].input",
        "write a holding instead",
    );
    expect_one(
        &edit(
            "{ holding = 0, type = \"i32\",",
            "{ holding = 0, bit = 2, type = \"u16\",",
        ),
        Some("slide"),
        "action.move_to.write[0].bit",
        "whole register",
    );
    expect_one(
        &edit(
            "{ coil = 0, value = \"params.on\" }",
            "{ topic = \"lamp/set\", payload = \"1\" }",
        ),
        Some("lamp"),
        "action.switch.write[0]",
        "needs an mqtt driver",
    );
    expect_one(
        &edit(
            "contact = { discrete_input = 0 }",
            "contact = { topic = \"lamp/state\" }",
        ),
        Some("lamp"),
        "signals.contact",
        "this device's driver is sim",
    );
}

#[test]
fn fail_when_codes_and_stopped_when() {
    expect_one(
        &edit("MOTOR_STALL = \"fault\"", "motor_stall = \"fault\""),
        Some("slide"),
        "action.move_to.fail_when.motor_stall",
        "[A-Z][A-Z0-9_]*",
    );
    // Every code closedloop reports, from the one list (NO_FEEDBACK, UNKNOWN_DEVICE,
    // RATE_LIMITED and DEADMAN were once accepted).
    for code in closedloop_contract::ErrorCode::FIXED {
        let code = code.as_str();
        expect_one(
            &edit("MOTOR_STALL = \"fault\"", &format!("{code} = \"fault\"")),
            Some("slide"),
            &format!("action.move_to.fail_when.{code}"),
            "closedloop itself reports",
        );
    }
    expect_one(
        &edit("cancel = [{ coil = 1, value = \"true\" }]\n", ""),
        Some("slide"),
        "action.move_to.stopped_when",
        "add cancel",
    );
}

#[test]
fn payload_interpolations_and_cancel_values_are_checked() {
    let mqtt = r#"
[[device]]
id = "desk"
driver = { kind = "mqtt", broker = "mqtt://localhost:1883", client_id = "cl" }
[device.signals]
on = { topic = "desk/state", json = "/on", type = "bool" }
[[device.action]]
name = "switch"
params = { on = { type = "bool" } }
write = [{ topic = "desk/set", payload = '{"on": ${params.of}, "id": "${command_id}"}' }]
done_when = "on == params.on"
"#;
    let src = format!("{}{mqtt}", common::BASE);
    expect_one(
        &src,
        Some("desk"),
        "action.switch.write[0].payload",
        "unknown name \"params.of\" (did you mean params.on?)",
    );
    let src = src.replace("${params.of}", "${params.on");
    expect_one(
        &src,
        Some("desk"),
        "action.switch.write[0].payload",
        "no closing \"}\"",
    );
    expect_one(
        &edit(
            "cancel = [{ coil = 1, value = \"true\" }]",
            "cancel = [{ coil = 1, value = \"stop\" }]",
        ),
        Some("slide"),
        "action.move_to.cancel[0].value",
        "unknown name \"stop\"",
    );
}

#[test]
fn done_when_must_be_a_bool() {
    let e = expect_one(
        &edit(
            "done_when = \"abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault\"",
            "done_when = \"abs(position_mm - params.target_mm)\"",
        ),
        Some("slide"),
        "action.move_to.done_when",
        "must yield true or false",
    );
    assert!(e.message.contains("the number"), "{e}");
}
