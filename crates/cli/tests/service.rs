//! Operating a service instance (docs/service.md). The unit `closedloop@NAME` serves
//! `/etc/closedloop/NAME.toml` with `STATE_DIRECTORY=/var/lib/closedloop-NAME`, and its plant keeps
//! the journal at `sqlite://${env:STATE_DIRECTORY}/journal.db`. An operator at a shell has no such
//! variable: `check` and the journal commands take the instance's state directory for it and say
//! so, while `serve` still asks whoever starts it. Also: the Debian package's maintainer scripts
//! make `/etc/closedloop`, and every `closedloop` line of the page is one the binary knows.
//! scripts/test-packages runs the page's commands on the installed .deb.

mod common;

#[path = "cli_readme/commands.rs"]
mod commands;

use common::{closedloop, repo, stderr};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `closedloop` with no environment at all, as `env -i` starts it.
fn bare() -> Command {
    let mut c = closedloop();
    c.env_clear();
    c
}

/// The packaged example copied to `DIR/NAME.toml`, NAME unique to this test process.
fn instance_plant(dir: &Path, what: &str) -> (PathBuf, String) {
    let name = format!("svctest-{what}-{}", std::process::id());
    let plant = dir.join(format!("{name}.toml"));
    std::fs::copy(repo("packaging/example.toml"), &plant).unwrap();
    (plant, name)
}

/// Nothing an operator at a shell is told speaks of an MCP client's config.
fn not_for_an_mcp_client(said: &str) {
    assert!(
        !said.contains("MCP client") && !said.contains("\"env\" block"),
        "advice for an MCP client at a shell:\n{said}"
    );
}

#[test]
fn check_passes_on_the_packaged_example_without_any_environment() {
    let out = bare()
        .arg("check")
        .arg(repo("packaging/example.toml"))
        .output()
        .unwrap();
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("journal sqlite:///var/lib/closedloop-example/journal.db"),
        "{stdout}"
    );
    assert!(
        said.contains(
            "note: STATE_DIRECTORY is not set, so it was taken as /var/lib/closedloop-example, \
             the state directory of the service closedloop@example"
        ),
        "{said}"
    );
    not_for_an_mcp_client(&said);
}

#[test]
fn journal_commands_on_an_instance_plant_read_its_state_directory_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let (plant, name) = instance_plant(dir.path(), "journal");
    let state = format!("/var/lib/closedloop-{name}");
    assert!(!Path::new(&state).exists(), "{state} exists on this host");
    let plant = plant.to_str().unwrap();
    let runs: [&[&str]; 3] = [
        &["commands", plant],
        &["trace", plant, "01a251a6-ad74-7581-91d8-cb0591cae17e"],
        &["journal", "verify", plant],
    ];
    for args in runs {
        let out = bare().args(args).output().unwrap();
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {said}");
        assert!(
            said.contains(&format!(
                "no journal at {state}/journal.db yet: nothing has run"
            )),
            "{args:?}: {said}"
        );
        assert!(
            said.contains(&format!(
                "so it was taken as {state}, the state directory of the service closedloop@{name}"
            )),
            "{args:?}: {said}"
        );
        not_for_an_mcp_client(&said);
    }
}

#[test]
fn a_state_directory_that_is_set_is_read_as_it_is_without_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let (plant, _) = instance_plant(dir.path(), "set");
    let state = dir.path().join("state");
    let out = bare()
        .arg("commands")
        .arg(&plant)
        .env("STATE_DIRECTORY", &state)
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let want = format!("no journal at {}/journal.db yet", state.display());
    assert!(said.contains(&want), "{said}");
    assert!(!said.contains("note:"), "{said}");
}

#[test]
fn serve_never_takes_a_state_directory_it_was_not_given() {
    let dir = tempfile::tempdir().unwrap();
    let (plant, _) = instance_plant(dir.path(), "serve");
    let out = bare()
        .arg("serve")
        .arg(&plant)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("the environment variable STATE_DIRECTORY is not set"),
        "{said}"
    );
    assert!(!said.contains("/var/lib/closedloop-"), "{said}");
}

/// `journal prune` deletes rows: on a service's plant without `STATE_DIRECTORY` it refuses,
/// naming the variable and the instance's directory, and deletes nothing anywhere.
#[test]
fn journal_prune_never_guesses_the_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (plant, name) = instance_plant(dir.path(), "prune");
    let out = bare()
        .args(["journal", "prune"])
        .arg(&plant)
        .args(["--older-than", "1h"])
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("never guesses where the journal is"),
        "{said}"
    );
    assert!(
        said.contains(&format!("STATE_DIRECTORY=/var/lib/closedloop-{name}")),
        "{said}"
    );
    not_for_an_mcp_client(&said);
}

/// `lint` and `diff` on a service's plant read it as `check` does, with the note.
#[test]
fn lint_and_diff_read_a_service_plant_as_check_does() {
    let dir = tempfile::tempdir().unwrap();
    let (plant, name) = instance_plant(dir.path(), "lint");
    for args in [vec!["lint"], vec!["diff"]] {
        let mut c = bare();
        c.args(&args).arg(&plant);
        if args[0] == "diff" {
            c.arg(&plant);
        }
        let out = c.output().unwrap();
        let said = stderr(&out);
        assert!(
            said.contains(&format!("taken as /var/lib/closedloop-{name}")),
            "{args:?}: {said}"
        );
        not_for_an_mcp_client(&said);
    }
}

/// The package's postinst and postrm, run with `/etc/closedloop` moved into `root` (and no
/// systemd to reload): `ACTION` is dpkg's first argument.
fn maintainer_script(script: &str, root: &Path, action: &str) {
    let text = std::fs::read_to_string(repo(&format!("packaging/debian/{script}"))).unwrap();
    let text = text
        .replace(
            "/etc/closedloop",
            &root.join("etc/closedloop").display().to_string(),
        )
        .replace(
            "/run/systemd/system",
            &root.join("no-systemd").display().to_string(),
        );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&text)
        .arg(script)
        .arg(action)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {action}: {}", stderr(&out));
}

#[test]
fn the_debian_package_creates_etc_closedloop_and_purge_leaves_plants() {
    let manifest = std::fs::read_to_string(repo("crates/cli/Cargo.toml")).unwrap();
    assert!(
        manifest.contains("maintainer-scripts = \"../../packaging/debian/\""),
        "cargo-deb is not given packaging/debian"
    );
    for script in ["postinst", "postrm"] {
        let mode = std::fs::metadata(repo(&format!("packaging/debian/{script}")))
            .unwrap()
            .permissions();
        assert!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111 != 0,
            "{script} is not executable"
        );
    }
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc/closedloop");
    std::fs::create_dir(root.path().join("etc")).unwrap();
    maintainer_script("postinst", root.path(), "configure");
    let mode = std::fs::metadata(&etc).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o755
    );
    // An upgrade's configure and a removal leave it, and what is in it.
    std::fs::write(etc.join("workshop.toml"), "[server]\n").unwrap();
    maintainer_script("postinst", root.path(), "configure");
    maintainer_script("postrm", root.path(), "remove");
    assert!(etc.join("workshop.toml").exists());
    // A purge removes the folder only when it is empty.
    maintainer_script("postrm", root.path(), "purge");
    assert!(etc.join("workshop.toml").exists(), "purge removed a plant");
    std::fs::remove_file(etc.join("workshop.toml")).unwrap();
    maintainer_script("postrm", root.path(), "purge");
    assert!(!etc.exists(), "purge left an empty /etc/closedloop");
    maintainer_script("postrm", root.path(), "purge");
}

#[test]
fn every_closedloop_line_of_the_service_page_is_one_closedloop_knows() {
    let page = std::fs::read_to_string(repo("docs/service.md")).unwrap();
    let mut checked = Vec::new();
    let mut wrong = Vec::new();
    for line in commands::shell_lines(&page) {
        let Some(args) = commands::closedloop_args(&line) else {
            continue;
        };
        if let Some(why) = commands::unknown_usage(&args) {
            wrong.push(format!("`{line}`: {why}"));
        }
        checked.push(args.first().cloned().unwrap_or_default());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for sub in ["check", "commands", "trace", "journal"] {
        assert!(
            checked.iter().any(|c| c == sub),
            "docs/service.md shows no closedloop {sub}"
        );
    }
}
