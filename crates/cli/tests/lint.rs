//! `closedloop lint` as a plant author meets it: the exact warning lines for a plant with known
//! problems, the exit codes of plain, `--strict` and `--examples` runs, a missing file, and
//! every bundled plant passing `lint --strict --examples`.

mod common;

use common::{closedloop, repo, run_in};
use std::path::{Path, PathBuf};

/// A lamp with jargon, a short description and a name without a verb, whose second example
/// the slide wins; a slide whose target has no unit and no max.
const BAD: &str = r#"
[[device]]
id = "lamp"
description = "Desk lamp on coil 0"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "state"
description = "Switch."
params = { on = { type = "bool" } }
examples = ["turn on the desk lamp", "light up the slide"]
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"

[[device]]
id = "slide"
description = "Linear slide on a lead screw"
driver = { kind = "sim", model = "stepper" }
[device.signals]
moving = { discrete_input = 0 }
[[device.action]]
name = "move_to"
description = "Move the slide to an absolute position."
params = { target_mm = { type = "number", min = 0.0 } }
examples = ["move the slide to 100"]
write = [{ holding = 0, type = "i32", value = "params.target_mm * 100.0" }, { coil = 0, value = "true" }]
done_when = "!moving"
"#;

/// The lint lines every run on [`BAD`] prints (without `--examples`).
const WARNINGS: &[&str] = &[
    "warning: bad.toml: device \"lamp\", key description: \"coil\" is protocol jargon in every tool of this device: the model acts on the plant, not on its addresses, and cannot use them; say what it does in the plant's words (\"the driver's fault reset\", not \"coil 2\") and leave addresses to signals and write plans",
    "warning: bad.toml: device \"lamp\", key action.state.name: the tool name lamp_state does not start with a verb (\"state\" is not in lint's list of verbs): a model reads the name as what the tool does; start the action name with one, like \"set_state\", \"switch\" or \"move_to\" (docs/plant-file.md, Linting, lists the verbs)",
    "warning: bad.toml: device \"lamp\", key action.state.description: the description has 7 characters, fewer than 20: too little for a model to choose by; say what the action does, what it does not do and when it is refused",
    "warning: bad.toml: device \"slide\", key action.move_to.params.target_mm.unit: target_mm is a number without a unit: a model cannot tell whether 150 means mm, steps or percent; add unit = \"mm\" (for a plain count, unit = \"count\")",
    "warning: bad.toml: device \"slide\", key action.move_to.params.target_mm: target_mm is a motion target without max: a model sends any number the schema allows, and the axis goes there or crashes trying; add min and max (the travel limits)",
];

/// [`run_in`]: `closedloop ARGS` in `dir`, with stdout as lines: (exit code, stdout lines,
/// stderr).
fn run_lines(dir: &Path, args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let (code, stdout, stderr) = run_in(dir, args);
    (code, stdout.lines().map(str::to_string).collect(), stderr)
}

fn bad_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), BAD).unwrap();
    dir
}

#[test]
fn warnings_name_file_device_and_key_and_fail_only_with_strict() {
    let dir = bad_dir();
    let (code, lines, err) = run_lines(dir.path(), &["lint", "bad.toml"]);
    assert_eq!(code, Some(0), "{err}");
    let mut want: Vec<String> = WARNINGS.iter().map(|s| s.to_string()).collect();
    want.push("bad.toml: 5 warnings".into());
    assert_eq!(lines, want);

    let (code, lines, _) = run_lines(dir.path(), &["lint", "bad.toml", "--strict"]);
    assert_eq!(code, Some(1));
    assert_eq!(lines[..5], want[..5]);
    assert_eq!(lines[5], "bad.toml: 5 warnings — FAIL (--strict)");
}

#[test]
fn examples_report_the_request_another_tool_wins_and_fail() {
    let dir = bad_dir();
    let (code, lines, err) = run_lines(dir.path(), &["lint", "bad.toml", "--examples"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        lines[..5],
        WARNINGS.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..]
    );
    assert_eq!(lines.len(), 7, "{lines:#?}");
    assert!(
        lines[5].starts_with("warning: bad.toml: device \"lamp\", key action.state.examples[1]: example \"light up the slide\" for lamp_state ranked 2nd: slide_move_to scored higher ("),
        "{lines:#?}"
    );
    assert_eq!(
        lines[6],
        "bad.toml: 6 warnings; 2 of 3 examples ranked their own tool first (BM25) — FAIL (an example ranks another tool first)"
    );
}

#[test]
fn check_with_lint_prints_the_warnings_and_keeps_the_exit_code() {
    let dir = bad_dir();
    let (code, lines, err) = run_lines(dir.path(), &["check", "bad.toml", "--lint"]);
    assert_eq!(code, Some(0), "{err}");
    // The warnings first, counted in the summary; the verdict is the last line.
    assert_eq!(lines[..5], *WARNINGS, "{lines:#?}");
    assert!(
        lines.contains(&"  warnings: 5 (above)".to_string()),
        "{lines:#?}"
    );
    assert_eq!(lines.last().map(String::as_str), Some("bad.toml: OK"));
}

#[test]
fn a_missing_or_broken_plant_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (code, lines, err) = run_lines(dir.path(), &["lint", "nowhere.toml", "--strict"]);
    assert_eq!(code, Some(1));
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        err.starts_with("nowhere.toml: cannot read the plant file: "),
        "{err}"
    );
    std::fs::write(dir.path().join("broken.toml"), "[[device]]\nid = \"x\"\n").unwrap();
    let (code, _, err) = run_lines(dir.path(), &["lint", "broken.toml"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("broken.toml: device \"x\""), "{err}");
}

#[test]
fn every_bundled_plant_passes_lint_strict_examples() {
    let mut plants: Vec<PathBuf> = std::fs::read_dir(repo("examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    plants.sort();
    assert!(plants.len() >= 5, "{plants:?}");
    for plant in plants {
        let out = closedloop()
            .args(["lint", "--strict", "--examples"])
            .arg(&plant)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{}:\n{stdout}", plant.display());
        let last = stdout.lines().last().unwrap_or_default().to_string();
        assert!(last.contains(": 0 warnings; "), "{last}");
    }
}
