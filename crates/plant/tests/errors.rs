//! Every refusal names the file, the device and the key, and says what to do.

use closedloop_plant::{PlantError, parse_with_env};
use std::path::Path;

/// A small valid plant; tests replace parts of it.
const BASE: &str = r#"
[server]
name = "workshop"

[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
commanded = { coil = 0 }
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Turn the lamp on or off."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02

[[device]]
id = "slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 2, type = "i32", scale = 0.01 }
moving = { discrete_input = 0 }
fault = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move the slide."
params = { target_mm = { type = "number", min = 0, max = 300 } }
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100" }, { coil = 0, value = "true" }]
done_when = "abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"
fail_when = { MOTOR_STALL = "fault" }
expect_s = "abs(params.target_mm - position_mm) / 100 + 0.05"
cancel = [{ coil = 1, value = "true" }]
stopped_when = "!moving"
"#;

fn env(name: &str) -> Option<String> {
    (name == "SET").then(|| "value".to_string())
}

fn errors(src: &str) -> Vec<PlantError> {
    match parse_with_env(src, "workshop.toml", Path::new("/srv"), &env) {
        Ok(_) => panic!("the plant was accepted:\n{src}"),
        Err(e) => e.0,
    }
}

/// `BASE` with `from` replaced by `to` (which must occur).
fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

/// Asserts that exactly one error is reported, at `device`/`key`, with `needle` in its message,
/// and that its Display names file, device and key.
#[track_caller]
fn expect_one(src: &str, device: Option<&str>, key: &str, needle: &str) -> PlantError {
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = errs.into_iter().next().unwrap();
    assert_eq!(e.device.as_deref(), device, "{e}");
    assert_eq!(e.key.as_deref(), Some(key), "{e}");
    assert!(e.message.contains(needle), "{e}");
    let shown = e.to_string();
    assert!(shown.starts_with("workshop.toml"), "{shown}");
    if let Some(d) = device {
        assert!(shown.contains(&format!("device \"{d}\"")), "{shown}");
    }
    assert!(shown.contains(&format!("key {key}")), "{shown}");
    e
}

#[test]
fn base_is_valid() {
    parse_with_env(BASE, "workshop.toml", Path::new("/srv"), &env).unwrap();
}

#[test]
fn unknown_keys_at_every_level() {
    expect_one(&edit("name = \"workshop\"", "nmae = \"workshop\""), None, "server.nmae", "did you mean \"name\"");
    expect_one(&edit("description = \"Desk lamp\"", "descripton = \"Desk lamp\""), Some("lamp"), "descripton", "did you mean \"description\"");
    expect_one(&edit("contact = { discrete_input = 0 }", "contact = { discrete_input = 0, typ = \"bool\" }"), Some("lamp"), "signals.contact.typ", "did you mean \"type\"");
    expect_one(&edit("expect_s = 0.02", "expect_s = 0.02\nexpect = 1"), Some("lamp"), "action.switch.expect", "unknown key \"expect\"");
    expect_one(&edit("{ coil = 0, value = \"params.on\" }", "{ coil = 0, valu = \"params.on\" }"), Some("lamp"), "action.switch.write[0].valu", "did you mean \"value\"");
    expect_one(&edit("{ coil = 1, value = \"true\" }", "{ coil = 1, value = \"true\", qos = 1 }"), Some("slide"), "action.move_to.cancel[0]", "\"qos\" does not go with coil");
    expect_one(&edit("{ type = \"bool\" }", "{ type = \"bool\", default = true }"), Some("lamp"), "action.switch.params.on.default", "unknown key");
    expect_one(&format!("{BASE}\n[plant]\nx = 1\n"), None, "plant", "unknown top-level key");
}

#[test]
fn wrong_types_name_the_key() {
    expect_one(&edit("expect_s = 0.02", "expect_s = 0.02\nhold_ms = \"long\""), Some("lamp"), "action.switch.hold_ms", "expected u64");
    expect_one(&edit("model = \"stepper\" }", "model = \"stepper\" }\npoll_ms = \"fast\""), Some("slide"), "poll_ms", "expected u64");
    expect_one(&edit("type = \"i32\", scale", "type = \"i33\", scale"), Some("slide"), "signals.position_mm.type", "write one of bool, u16");
    expect_one(&edit("{ type = \"bool\" }", "{ type = \"boolean\" }"), Some("lamp"), "action.switch.params.on.type", "did you mean \"bool\"");
}

#[test]
fn device_ids() {
    expect_one(&edit("id = \"lamp\"", "id = \"Desk-Lamp\""), Some("Desk-Lamp"), "id", "desk_lamp");
    expect_one(&edit("id = \"slide\"", "id = \"lamp\""), Some("lamp"), "id", "used twice");
    let e = expect_one(&edit("id = \"lamp\"\n", ""), None, "device[0].id", "missing key \"id\"");
    assert!(e.to_string().contains("key device[0].id"));
}

#[test]
fn duplicate_signals_and_actions() {
    let e = expect_one(&edit("contact = { discrete_input = 0 }", "contact = { discrete_input = 0 }\ncontact = { coil = 3 }"), Some("lamp"), "signals.contact", "given twice");
    assert_eq!(e.line, Some((12, 1)));
    let dup = edit("stopped_when = \"!moving\"", "stopped_when = \"!moving\"\n[[device.action]]\nname = \"move_to\"\nwrite = [{ coil = 2, value = true }]\nverification = \"none\"");
    expect_one(&dup, Some("slide"), "action.move_to.name", "declared twice");
}

#[test]
fn unknown_names_in_every_expression_key() {
    let e = expect_one(&edit("done_when = \"contact == params.on\"", "done_when = \"contakt == params.on\""), Some("lamp"), "action.switch.done_when", "unknown name \"contakt\"");
    assert_eq!(
        e.to_string(),
        "workshop.toml: device \"lamp\", key action.switch.done_when: unknown name \"contakt\" (did you mean contact?) — signals of lamp are commanded, contact; params are on"
    );
    expect_one(&edit("expect_s = 0.02", "expect_s = 0.02\nrequires = \"!devices.slide.faulty\""), Some("lamp"), "action.switch.requires", "device slide has no signal \"faulty\" (did you mean fault?)");
    expect_one(&edit("expect_s = 0.02", "expect_s = 0.02\nrequires = \"!devices.slid.fault\""), Some("lamp"), "action.switch.requires", "unknown device \"slid\"");
    expect_one(&edit("MOTOR_STALL = \"fault\"", "MOTOR_STALL = \"stall\""), Some("slide"), "action.move_to.fail_when.MOTOR_STALL", "unknown name \"stall\"");
    expect_one(&edit("/ 100 + 0.05\"", "/ speed\""), Some("slide"), "action.move_to.expect_s", "unknown name \"speed\"");
    expect_one(&edit("stopped_when = \"!moving\"", "stopped_when = \"!movin\""), Some("slide"), "action.move_to.stopped_when", "did you mean moving?");
    expect_one(&edit("stopped_when = \"!moving\"", "stopped_when = \"!moving\"\nstarted_when = \"params.go\""), Some("slide"), "action.move_to.started_when", "unknown name \"params.go\"");
    expect_one(&edit("value = \"params.target_mm * 100\"", "value = \"params.target * 100\""), Some("slide"), "action.move_to.write[0].value", "did you mean params.target_mm?");
    expect_one(&edit("done_when = \"contact == params.on\"", "done_when = \"contact == on\""), Some("lamp"), "action.switch.done_when", "\"on\" is a parameter; write params.on");
    expect_one(&edit("{ coil = 0, value = \"params.on\" }", "{ coil = 0, value = \"command_id\" }"), Some("lamp"), "action.switch.write[0].value", "only known inside an MQTT payload");
}

#[test]
fn type_errors() {
    expect_one(&edit("stopped_when = \"!moving\"", "stopped_when = \"!position_mm\""), Some("slide"), "action.move_to.stopped_when", "'!' cannot be applied to a number");
    expect_one(&edit("done_when = \"contact == params.on\"", "done_when = \"contact == 1\""), Some("lamp"), "action.switch.done_when", "compares contact (a bool) with a number literal");
    expect_one(&edit("MOTOR_STALL = \"fault\"", "MOTOR_STALL = \"position_mm\""), Some("slide"), "action.move_to.fail_when.MOTOR_STALL", "must yield true or false, but it yields the number 1");
    expect_one(&edit("expect_s = 0.02", "expect_s = \"contact\""), Some("lamp"), "action.switch.expect_s", "must yield a number");
    expect_one(&edit("{ coil = 0, value = \"params.on\" }", "{ coil = 0, value = \"1\" }"), Some("lamp"), "action.switch.write[0].value", "must yield true or false");
    expect_one(&edit("value = \"params.target_mm * 100\"", "value = \"'far'\""), Some("slide"), "action.move_to.write[0].value", "must yield a number or a bool");
    // Reached only when `fault` is true: the dry run tries both.
    expect_one(&edit("MOTOR_STALL = \"fault\"", "MOTOR_STALL = \"fault && position_mm\""), Some("slide"), "action.move_to.fail_when.MOTOR_STALL", "'&&' cannot be applied");
    expect_one(&edit("expect_s = 0.02", "expect_s = -1"), Some("lamp"), "action.switch.expect_s", "0 or more seconds");
}

#[test]
fn verification_rules() {
    expect_one(&edit("done_when = \"contact == params.on\"\n", ""), Some("lamp"), "action.switch.done_when", "needs done_when");
    expect_one(&edit("done_when = \"contact == params.on\"", "done_when = \"params.on || !params.on\""), Some("lamp"), "action.switch.done_when", "reads no signal");
    expect_one(&edit("expect_s = 0.02", "expect_s = 0.02\nverification = \"none\""), Some("lamp"), "action.switch.verification", "remove done_when");
}

#[test]
fn writes_to_read_only_addresses_are_refused() {
    expect_one(&edit("{ coil = 0, value = \"params.on\" }", "{ discrete_input = 0, value = \"params.on\" }"), Some("lamp"), "action.switch.write[0].discrete_input", "read-only");
    expect_one(&edit("{ holding = 0, type = \"i32\",", "{ input = 0, type = \"i32\","), Some("slide"), "action.move_to.write[0].input", "write a holding instead");
    expect_one(&edit("{ holding = 0, type = \"i32\",", "{ holding = 0, bit = 2, type = \"u16\","), Some("slide"), "action.move_to.write[0].bit", "whole register");
    expect_one(&edit("{ coil = 0, value = \"params.on\" }", "{ topic = \"lamp/set\", payload = \"1\" }"), Some("lamp"), "action.switch.write[0]", "needs an mqtt driver");
    expect_one(&edit("contact = { discrete_input = 0 }", "contact = { topic = \"lamp/state\" }"), Some("lamp"), "signals.contact", "this device's driver is sim");
}

#[test]
fn fail_when_codes_and_stopped_when() {
    expect_one(&edit("MOTOR_STALL = \"fault\"", "motor_stall = \"fault\""), Some("slide"), "action.move_to.fail_when.motor_stall", "[A-Z][A-Z0-9_]*");
    expect_one(&edit("MOTOR_STALL = \"fault\"", "TIMEOUT = \"fault\""), Some("slide"), "action.move_to.fail_when.TIMEOUT", "closedloop itself reports");
    expect_one(&edit("cancel = [{ coil = 1, value = \"true\" }]\n", ""), Some("slide"), "action.move_to.stopped_when", "add cancel");
}

#[test]
fn environment_variables() {
    let src = edit("driver = { kind = \"sim\", model = \"stepper\" }", "driver = { kind = \"sim\", model = \"${env:SLIDE_MODEL}\" }");
    let e = expect_one(&src, Some("slide"), "driver.model", "SLIDE_MODEL is not set");
    assert!(e.to_string().contains("workshop.toml: device \"slide\", key driver.model"));
    expect_one(&edit("description = \"Move the slide.\"", "description = \"${env:NOPE}\""), Some("slide"), "action.move_to.description", "NOPE is not set");
    let ok = edit("description = \"Desk lamp\"", "description = \"Desk lamp ${env:SET}\"");
    let plant = parse_with_env(&ok, "workshop.toml", Path::new("/srv"), &env).unwrap();
    assert_eq!(plant.devices[0].description, "Desk lamp value");
}

#[test]
fn server_tokens_and_journal() {
    let token = "[[server.token]]\nname = \"ops\"\nsha256 = \"abc\"\nscopes = [\"read\"]\n";
    expect_one(&edit("[[device]]", &format!("{token}\n[[device]]")), None, "server.token[0].sha256", "64 characters");
    let scope = "[[server.token]]\nname = \"ops\"\nsha256 = \"" .to_string() + &"0".repeat(64) + "\"\nscopes = [\"actuate:lamb\"]\n";
    expect_one(&edit("[[device]]", &format!("{scope}\n[[device]]")), None, "server.token[0].scopes[0]", "names no device \"lamb\"");
    let e = expect_one(&edit("name = \"workshop\"", "name = \"workshop\"\njournal = \"postgres://db.local/closedloop\""), None, "server.journal", "PostgreSQL journals arrive with scale-out");
    assert!(e.message.contains("use sqlite:// for now"), "{e}");
    expect_one(&edit("name = \"workshop\"", "name = \"workshop\"\njournal = \"redis://x\""), None, "server.journal", "sqlite://<file>");
}

#[test]
fn sim_options_are_checked_by_the_simulator() {
    let e = expect_one(&edit("model = \"relay\" }", "model = \"relay\", speed_mm_s = 5.0 }"), Some("lamp"), "driver.speed_mm_s", "not an option of the sim model `relay`");
    assert!(e.message.contains("remove"), "{e}");
    expect_one(&edit("model = \"relay\" }", "model = \"relais\" }"), Some("lamp"), "driver.model", "unknown sim model");
    expect_one(&edit("model = \"relay\" }", "model = \"relay\", colour = \"red\" }"), Some("lamp"), "driver.colour", "unknown key \"colour\"");
    expect_one(&edit("model = \"relay\" }", "model = \"relay\" }\nsim = { model = \"relay\", listen = \"nowhere\" }"), Some("lamp"), "sim.listen", "not an ip:port");
    expect_one(&edit("kind = \"sim\", model = \"relay\"", "kind = \"simulator\", model = \"relay\""), Some("lamp"), "driver.kind", "unknown driver kind \"simulator\"");
}

#[test]
fn syntax_errors_name_the_device_and_line() {
    let e = expect_one(&edit("done_when = \"contact == params.on\"", "done_when = contact"), Some("lamp"), "action.done_when", "TOML syntax error");
    assert_eq!(e.line.map(|l| l.0), Some(17));
    assert!(e.to_string().starts_with("workshop.toml:17:"), "{e}");
}

#[test]
fn all_problems_are_reported_together() {
    let src = edit("name = \"workshop\"", "name = \"workshop\"\njournal = \"postgres://x\"")
        .replacen("contact == params.on", "contakt == params.on", 1)
        .replacen("MOTOR_STALL", "stall", 1);
    let errs = errors(&src);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    let text = closedloop_plant::PlantErrors(errs).to_string();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().all(|l| l.starts_with("workshop.toml: ")), "{text}");
}
