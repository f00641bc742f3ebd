//! The command line as a newcomer meets it: `check`, `demo`, `commands`, `trace`, exit codes and
//! one-line errors — and the README's plant examples, checked as `closedloop check` would.

use std::process::Command;

fn closedloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_closedloop"))
}

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn check_passes_on_every_example_plant_and_prints_the_tool_surface() {
    for plant in [
        "examples/workshop.toml",
        "examples/modbus-workshop.toml",
        "examples/mqtt-workshop.toml",
        "examples/can-workshop.toml",
        "examples/opcua-workshop.toml",
        "crates/cli/tests/fault_plant.toml",
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
    let out = closedloop()
        .arg("check")
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

#[test]
fn usage_errors_exit_2_and_help_is_everywhere() {
    let out = closedloop().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    for sub in [
        vec!["--help"],
        vec!["check", "--help"],
        vec!["serve", "--help"],
        vec!["demo", "--help"],
        vec!["trace", "--help"],
        vec!["commands", "--help"],
    ] {
        let out = closedloop().args(&sub).output().unwrap();
        assert!(out.status.success(), "{sub:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{sub:?}"
        );
    }
}

#[test]
fn demo_exits_0_and_shows_the_six_outcomes() {
    let out = closedloop().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "Completed and confirmed by the device's feedback: lamp switch",
        "Failed (MOTOR_STALL)",
        "position_mm = 70",
        "Rejected (INTERLOCK)",
        "Rejected (DEVICE_OFFLINE)",
        "Sent, not confirmed: buzzer switch",
        "Completed and confirmed by the device's feedback: oven set_temperature",
        "All six outcomes",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?} in:\n{stdout}");
    }
}

#[test]
fn commands_and_trace_read_a_journal_and_unknown_ids_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, include_str!("fault_plant.toml")).unwrap();
    let out = closedloop().arg("commands").arg(&plant).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no commands"));
    let out = closedloop()
        .arg("trace")
        .arg(&plant)
        .arg("nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no command has id"));
    let out = closedloop()
        .args(["commands"])
        .arg(&plant)
        .args(["--status", "done"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a status"));
}

/// Every ```toml block of the README is a plant file (or the start of one) that `check` accepts.
#[test]
fn readme_plant_examples_pass_check() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in readme.lines() {
        match (&mut cur, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => cur = Some(String::new()),
            (Some(b), l) if l.starts_with("```") => {
                blocks.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    assert!(!blocks.is_empty(), "the README has no plant example");
    let dir = tempfile::tempdir().unwrap();
    for (i, b) in blocks.iter().enumerate() {
        let path = dir.path().join(format!("readme{i}.toml"));
        std::fs::write(&path, b).unwrap();
        let out = closedloop().arg("check").arg(&path).output().unwrap();
        assert!(
            out.status.success(),
            "README block {i}:\n{b}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
