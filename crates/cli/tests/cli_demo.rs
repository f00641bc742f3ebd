//! The first commands a newcomer types: usage errors exit 2 and `--help` is everywhere; `demo`
//! shows the six outcomes and prints `commands` and `trace` lines that work after it ended; and
//! `commands`/`trace` never create a journal.

mod common;

use common::closedloop;
use std::process::Command;

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

/// Runs a command line the demo printed (`PROGRAM ARGS...     # comment`).
fn run_printed(line: &str) -> std::process::Output {
    let words: Vec<&str> = line
        .split("  #")
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    Command::new(words[0]).args(&words[1..]).output().unwrap()
}

#[test]
fn demo_exits_0_shows_the_six_outcomes_and_its_trace_command_works() {
    let state = tempfile::tempdir().unwrap();
    let out = closedloop()
        .arg("demo")
        .env("XDG_STATE_HOME", state.path())
        .output()
        .unwrap();
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
    // The journal stays where the demo says, and the commands it prints work after it ended.
    let dir = state.path().join("closedloop/demo");
    assert!(
        stdout.contains(&format!(
            "The journal of this run is kept in {} until the next demo. Print a timeline again:",
            dir.join("workshop.db").display()
        )),
        "{stdout}"
    );
    assert!(dir.join("workshop.db").exists());
    // The test binary's closedloop is not on PATH: the demo names it by its full path.
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_closedloop")).unwrap();
    let plant = dir.join("workshop.toml");
    let prefix = format!("  {} trace {} ", exe.display(), plant.display());
    let trace = stdout
        .lines()
        .find(|l| l.starts_with(&prefix) && l.ends_with("# slide_move_to: the stall"))
        .unwrap_or_else(|| panic!("no trace command in:\n{stdout}"));
    let out = run_printed(trace);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{trace}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("slide.move_to") && text.contains("error  MOTOR_STALL"),
        "{text}"
    );
    let commands = format!(
        "  {} commands {}     # every command of this run, with its id",
        exe.display(),
        plant.display()
    );
    assert!(stdout.lines().any(|l| l == commands), "{stdout}");
    let out = run_printed(&commands);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 6);
    // An id the journal does not have.
    let out = closedloop()
        .arg("trace")
        .arg(&plant)
        .arg("nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no command has id"));
}

#[test]
fn commands_and_trace_never_create_a_journal() {
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("plant.toml");
    std::fs::write(&plant, include_str!("../../../tests/plants/faults.toml")).unwrap();
    let expected = format!(
        "error: no journal at {} yet: nothing has run\n",
        dir.path().join("journal.db").display()
    );
    let out = closedloop().arg("commands").arg(&plant).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), expected);
    let out = closedloop()
        .arg("trace")
        .arg(&plant)
        .arg("0193")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), expected);
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, ["plant.toml"]);
    let out = closedloop()
        .args(["commands"])
        .arg(&plant)
        .args(["--status", "done"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a status"));
}
