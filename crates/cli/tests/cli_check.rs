//! `closedloop check` as a newcomer meets it: every example plant passes and prints the tool
//! surface; a bad plant is refused naming file, device and key; the simulator's register maps
//! are known (and `serve` refuses what `check` refuses); 1-based Modbus addresses are warned of.

mod common;

use common::{closedloop, repo};

#[test]
fn check_passes_on_every_example_plant_and_prints_the_tool_surface() {
    for plant in [
        "examples/workshop.toml",
        "examples/modbus-workshop.toml",
        "examples/mqtt-workshop.toml",
        "examples/can-workshop.toml",
        "examples/opcua-workshop.toml",
        "tests/plants/faults.toml",
    ] {
        let out = closedloop().arg("check").arg(repo(plant)).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{plant}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("OK"), "{stdout}");
    }
    // By default a summary, the verdict its last line; the schemas with --tools.
    let out = closedloop()
        .arg("check")
        .arg(repo("examples/workshop.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().count() < 12, "{stdout}");
    assert!(stdout.contains("slide_move_to") && !stdout.contains("\"maximum\""));
    assert!(stdout.trim_end().ends_with("workshop.toml: OK"), "{stdout}");
    let out = closedloop()
        .args(["check", "--tools"])
        .arg(repo("examples/workshop.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("slide_move_to") && stdout.contains("\"maximum\": 300.0"),
        "{stdout}"
    );
}

#[test]
fn check_refuses_a_bad_plant_naming_file_device_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        r#"
[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch."
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contakt == params.on"
"#,
    )
    .unwrap();
    let out = closedloop().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml")
            && err.contains("lamp")
            && err.contains("done_when")
            && err.contains("contakt"),
        "{err}"
    );
}

/// Writes `body` as `DIR/name` and runs `closedloop check` on it: (exit code, stdout, stderr).
fn check_text(name: &str, body: &str) -> (Option<i32>, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    let out = closedloop()
        .current_dir(dir.path())
        .arg("check")
        .arg(name)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    )
}

const SIM_MAP_MISTAKES: &str = r#"
[[device]]
id = "lamp"
description = "Desk lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
description = "Switch."
params = { on = { type = "bool" } }
write = [{ coil = 7, value = "params.on" }]
done_when = "contact == params.on"

[[device]]
id = "buzzer"
description = "Buzzer without a contact"
driver = { kind = "sim", model = "relay", feedback = false }
[device.signals]
contact = { discrete_input = 0 }

[[device]]
id = "slide"
description = "Slide"
driver = { kind = "sim", model = "stepper" }
[device.signals]
position_mm = { holding = 40003, type = "i32", scale = 0.01 }
target_mm = { holding = 0, scale = 0.01 }
fault = { discrete_input = 1 }
[[device.action]]
name = "move_to"
description = "Move."
params = { target_mm = { type = "number", min = 0.0, max = 300.0 } }
write = [{ holding = 0, type = "i32", value = "true" }, { coil = 0, value = "true" }]
done_when = "!fault"
[[device.action]]
name = "home"
description = "Home."
params = {}
write = [{ holding = 2, type = "i32", value = "0" }]
done_when = "!fault"
"#;

/// Task: `check` knows the simulator's register maps.
#[test]
fn check_refuses_addresses_and_types_the_simulated_model_does_not_have() {
    let (code, stdout, stderr, _dir) = check_text("mistakes.toml", SIM_MAP_MISTAKES);
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("OK"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    for want in [
        "mistakes.toml: device \"lamp\", key action.switch.write[0].coil: the simulated relay has no coil 7; its writable coils: coil 0 (the commanded coil state, read/write). The simulator refuses the write (exception 2), so every command fails REGISTER_INVALID. Write coil = 0",
        "mistakes.toml: device \"buzzer\", key signals.contact.discrete_input: the simulated relay has no discrete input 0 with feedback = false: there is no contact to read, and the simulator refuses every read of it (exception 2), so this signal never has a value. Set feedback = true if the relay has an auxiliary contact; otherwise remove this signal and confirm nothing (verification = \"none\") or only the coil (verification = \"readback\")",
        "mistakes.toml: device \"slide\", key signals.position_mm.holding: the simulated stepper has no holding 40003; its holding registers: holding 0–1 (the target position, i32 in 0.01 mm, read/write) and holding 2–3 (the encoder position, i32 in 0.01 mm, read-only). The simulator refuses every read of it (exception 2), so this signal never has a value. Did you mean holding = 2? Addresses are 0-based PDU addresses; 40001 is holding = 0",
        "mistakes.toml: device \"slide\", key signals.target_mm.type: holding 0–1 of the simulated stepper is the target position, an i32 in 0.01 mm over two registers; as type = \"u16\" this read covers only holding 0, the high word. Write type = \"i32\"",
        "mistakes.toml: device \"slide\", key action.move_to.write[0].value: value \"true\" is a bool, and holding 0–1 of the simulated stepper is the target position (i32 in 0.01 mm): the bool would be written as the number 0 or 1. Write a number in the register's units; to switch or trigger something write a coil: coil 0 (start, write true; reads false), coil 1 (stop, write true; reads false) and coil 2 (fault reset, write true; reads false)",
        "mistakes.toml: device \"slide\", key action.home.write[0].holding: holding 2–3 of the simulated stepper is the encoder position: read-only. The simulator refuses the write (exception 2), so every command fails REGISTER_INVALID. Write holding 0–1 (the target position, i32 in 0.01 mm, read/write) instead",
    ] {
        assert!(lines.contains(&want), "missing\n{want}\nin\n{stderr}");
    }
    assert_eq!(lines.len(), 6, "{stderr}");
}

#[test]
fn check_refuses_1_based_addresses_on_a_sim_table_of_closedloop_sim_too() {
    let (code, _, stderr, _dir) = check_text(
        "bench.toml",
        r#"
[[device]]
id = "oven"
description = "Oven"
driver = { kind = "modbus-tcp", address = "127.0.0.1:1502", unit = 1 }
[device.sim]
model = "heater"
listen = "127.0.0.1:1502"
[device.signals]
temperature_c = { input = 30001, type = "i16", scale = 0.1 }
"#,
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "bench.toml: device \"oven\", key signals.temperature_c.input: the simulated heater of [device.sim] has no input 30001; its input registers: input 0 (the temperature, i16 in 0.1 °C, read-only). The simulator refuses every read of it (exception 2), so this signal never has a value. Did you mean input = 0? Addresses are 0-based PDU addresses; 30001 is input = 0"
    );
}

#[test]
fn check_warns_about_1_based_modbus_addresses_and_still_passes() {
    let (code, stdout, stderr, _dir) = check_text(
        "plc.toml",
        r#"
[[device]]
id = "plc"
description = "A PLC"
driver = { kind = "modbus-rtu", port = "/dev/ttyUSB0", baud = 19200, unit = 1 }
[device.signals]
level = { holding = 40001 }
pressure = { input = 30002 }
door = { discrete_input = 10001 }
[[device.action]]
name = "set_level"
description = "Set the level."
params = { level = { type = "number", min = 0.0, max = 100.0 } }
write = [{ holding = 40001, value = "params.level" }]
done_when = "level == params.level"
"#,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("plc.toml: OK"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "warning: plc.toml: device \"plc\", key signals.door.discrete_input: discrete_input = 10001 looks like a 1-based register number: did you mean discrete_input = 0? Addresses are 0-based PDU addresses; 10001 is discrete_input = 0",
            "warning: plc.toml: device \"plc\", key signals.level.holding: holding = 40001 looks like a 1-based register number: did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0",
            "warning: plc.toml: device \"plc\", key signals.pressure.input: input = 30002 looks like a 1-based register number: did you mean input = 1? Addresses are 0-based PDU addresses; 30001 is input = 0",
            "warning: plc.toml: device \"plc\", key action.set_level.write[0].holding: holding = 40001 looks like a 1-based register number: did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0",
            // Its done_when reads the register it writes: readback, said (issue 56).
            "warning: plc.toml: device \"plc\", key action.set_level.done_when: set_level's done_when reads only what it writes (level reads holding:40001, which set_level writes): that shows the write landed, not that the device acted, so its completions are reported as readback (verified: false). Read a signal that senses the effect (a contact, an encoder, a current), or write verification = \"readback\" to say so",
        ]
    );
}

#[test]
fn serve_refuses_an_in_process_sim_address_the_model_does_not_have() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mistakes.toml");
    std::fs::write(&path, SIM_MAP_MISTAKES).unwrap();
    let out = closedloop()
        .arg("serve")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key action.switch.write[0].coil: the simulated relay has no coil 7"),
        "{err}"
    );
    assert!(
        !dir.path().join("closedloop.db").exists(),
        "no journal for a refused plant"
    );
}

#[test]
fn check_warns_when_a_serial_lines_polls_ask_more_time_than_it_has() {
    // Three meters every 50 ms at 9600 baud: each cycle 8 + 5 + 20 bytes and two silences,
    // ≈ 41.7 ms; 3 × 20 cycles a second ≈ 2500 ms of line time per second.
    let signals: Vec<String> = (0..10)
        .map(|k| format!("r{k} = {{ input = {k} }}"))
        .collect();
    let meter = |i: u8| {
        format!(
            r#"
[[device]]
id = "meter{i}"
description = "An energy meter"
driver = {{ kind = "modbus-rtu", port = "/dev/ttyS1", baud = 9600, unit = {i} }}
poll_ms = 50
[device.signals]
{}
"#,
            signals.join("\n")
        )
    };
    let text: String = (1..=3).map(meter).collect();
    let (code, stdout, stderr, _dir) = check_text("meters.toml", &text);
    assert_eq!(code, Some(0), "a warning, not a refusal: {stderr}");
    assert!(stdout.contains("meters.toml: OK"), "{stdout}");
    assert_eq!(
        stderr.trim_end(),
        "warning: meters.toml: device \"meter1\", key driver.port: the polls of meter1, meter2, meter3 on /dev/ttyS1 at 9600 baud ask 2500 ms of line time per second, and the line has 1000: reads fall further and further behind poll_ms, and every value arrives later than its poll period says (a lower bound: each device's answer time and the writes come on top). Poll less often (every device's poll_ms × 2.50; 50 ms becomes 130 ms), raise the baud rate, or split the devices over two lines"
    );
}
