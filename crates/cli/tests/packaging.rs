//! What the packages are made of, checked without building them (scripts/test-packages builds
//! and installs them in CI): `--version` names the commit, the man pages and completions come
//! from the CLI definition, and the example plant the Debian package ships passes `check`.

mod common;

use common::{closedloop, repo};

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = closedloop().arg("--version").output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo("."))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 12, "git rev-parse said {head:?}");
    // A build told its commit (CLOSEDLOOP_COMMIT, for a source archive) names that one.
    let head = option_env!("CLOSEDLOOP_COMMIT")
        .filter(|c| !c.is_empty())
        .map_or(head, str::to_string);
    let want = format!("closedloop {} (commit {head})", env!("CARGO_PKG_VERSION"));
    assert_eq!(shown, want);
}

#[test]
fn man_pages_and_completions_come_from_the_cli_definition() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man");
    let out = closedloop()
        .args(["generate", "man", "--out"])
        .arg(&man)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let serve = std::fs::read_to_string(man.join("closedloop-serve.1")).unwrap();
    for flag in ["http", "allow\\-host", "max\\-connections", "tls\\-cert"] {
        assert!(serve.contains(flag), "closedloop-serve.1 lacks {flag}");
    }
    let top = std::fs::read_to_string(man.join("closedloop.1")).unwrap();
    assert!(
        top.contains("closedloop\\-serve(1)"),
        "the top page lists its subcommands"
    );
    assert!(
        !man.join("closedloop-help.1").exists(),
        "no page for clap's help"
    );
    assert!(
        !man.join("closedloop-generate.1").exists(),
        "the packagers' command stays hidden"
    );

    let comp = dir.path().join("completions");
    let out = closedloop()
        .args(["generate", "completions", "--out"])
        .arg(&comp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["closedloop.bash", "_closedloop", "closedloop.fish"] {
        let text = std::fs::read_to_string(comp.join(file)).unwrap();
        assert!(text.contains("serve") && text.contains("--http"), "{file}");
    }
}

#[test]
fn the_packaged_example_plant_passes_check_with_its_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = closedloop()
        .arg("check")
        .arg(repo("packaging/example.toml"))
        .env("STATE_DIRECTORY", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let journal = format!("journal sqlite://{}/journal.db", dir.path().display());
    assert!(stdout.contains(&journal), "{stdout}");
}
