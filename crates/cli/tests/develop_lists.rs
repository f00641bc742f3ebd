//! docs/develop.md's "Adding a protocol" and "Adding an error code" list the files a new driver
//! kind or error code must touch; these tests keep the lists true. Every source file that matches
//! on a driver kind (`DriverConfig::Can`, the kind added last, stands for all) must be listed, and
//! so must every source file that names more than half of the codes closedloop reports.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `- `path`` items of the section `## {title}` of docs/develop.md.
fn listed(title: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/develop.md")).unwrap();
    let section = doc
        .split(&format!("## {title}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("docs/develop.md has no section {title:?}"));
    let section = section.split("\n## ").next().unwrap();
    let items: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    for item in &items {
        assert!(repo().join(item).exists(), "{title}: {item} does not exist");
    }
    items
}

/// Every `.rs` file under `crates/*/src` (tests and test modules' own files left out).
fn sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![repo().join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(repo()).unwrap().display().to_string();
            if path.is_dir() {
                if !rel.ends_with("/tests") && !rel.contains("/benches") {
                    stack.push(path);
                }
            } else if rel.ends_with(".rs") && rel.contains("/src/") && !rel.contains("test") {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

#[test]
fn every_file_that_matches_on_a_driver_kind_is_listed_for_a_new_protocol() {
    let listed = listed("Adding a protocol");
    let sites: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| text.contains("DriverConfig::Can"))
        .map(|(path, _)| path)
        .collect();
    assert!(sites.len() >= 5, "{sites:?}");
    let missing: Vec<&String> = sites.iter().filter(|s| !listed.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "add to docs/develop.md \"Adding a protocol\": {missing:?}"
    );
    let stale: Vec<&String> = listed.iter().filter(|l| !sites.contains(l)).collect();
    assert!(
        stale.is_empty(),
        "listed but matching no driver kind: {stale:?}"
    );
}

#[test]
fn every_file_that_names_most_error_codes_is_listed_for_a_new_code() {
    let listed = listed("Adding an error code");
    let contract = std::fs::read_to_string(repo().join("crates/contract/src/contract.rs")).unwrap();
    let fixed = contract
        .split("pub const FIXED")
        .nth(1)
        .unwrap()
        .split("];")
        .next()
        .unwrap();
    let codes: Vec<&str> = fixed
        .split("ErrorCode::")
        .skip(1)
        .map(|c| c.split([',', '\n', ' ']).next().unwrap())
        .collect();
    assert_eq!(codes.len(), 17, "{codes:?}");
    for (path, text) in sources() {
        let named = codes
            .iter()
            .filter(|c| text.contains(&format!("ErrorCode::{c}")))
            .count();
        if named * 2 > codes.len() {
            assert!(
                listed.contains(&path),
                "add {path} to docs/develop.md \"Adding an error code\""
            );
        }
    }
    assert!(listed.iter().any(|l| l == "docs/errors.md"));
}
