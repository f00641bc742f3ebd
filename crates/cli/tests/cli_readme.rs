//! The README a newcomer reads first: its plant examples pass `closedloop check`, it sets up in
//! two commands, names what the server offers, and every relative link points at a file.

mod common;

use common::{closedloop, repo};

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

/// The README's section `## title`, up to the next `## ` heading.
fn section<'a>(readme: &'a str, title: &str) -> &'a str {
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

/// Task: the README a newcomer reads first.
#[test]
fn readme_sets_up_in_two_commands_and_names_what_the_server_offers() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    // The repository stands on its own.
    assert!(!readme.contains("../shared"), "the README links outside");

    // Set up: exactly two commands, the demo and the tests; CI is told later.
    let setup = section(&readme, "Set up (two commands)");
    let block = setup
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        commands,
        ["cargo run -p closedloop -- demo", "bash scripts/test"]
    );
    assert_eq!(setup.matches("```sh").count(), 1, "{setup}");
    assert!(!setup.contains(".ci/run"), "{setup}");
    assert!(section(&readme, "Tests and CI").contains("CI (`.ci/run`) runs the same command"));

    // Install, and the MCP surface beyond the tools.
    assert!(readme.contains("cargo install --path crates/cli"));
    for needle in [
        "`device://{id}/state`",
        "`device://{id}/config`",
        "`command://{id}`",
        "`command://{id}/timeline`",
        "`diagnose_device(device)`",
        "`act_and_confirm(device, action)`",
        "**Instructions**",
        "become `omitted` entries counting them",
        "`list_commands` returns short rows, and `omitted`",
    ] {
        assert!(readme.contains(needle), "README lacks {needle}");
    }
    let codes = section(&readme, "Statuses and error codes");
    for row in [
        "| `needs_confirmation` |",
        "| `UNAUTHORIZED` |",
        "| `UNKNOWN_DEVICE` |",
    ] {
        assert!(
            codes.lines().any(|l| l.starts_with(row)),
            "no row {row} in\n{codes}"
        );
    }

    // Every relative link points at a file of the repository, and the docs are linked.
    let mut linked = Vec::new();
    for part in readme.split("](").skip(1) {
        let target = part.split(')').next().unwrap();
        if target.starts_with("http") || target.starts_with('#') {
            continue;
        }
        let file = target.split('#').next().unwrap();
        assert!(repo(file).exists(), "README links to missing {target}");
        linked.push(file.to_string());
    }
    for doc in [
        "docs/simulator.md",
        "docs/plant-bounds.md",
        "docs/first-plant.md",
        "docs/architecture.md",
    ] {
        assert!(
            linked.iter().any(|l| l == doc),
            "README does not link {doc}"
        );
    }
}
