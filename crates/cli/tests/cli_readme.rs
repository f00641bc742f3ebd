//! The README a newcomer reads first: its plant examples pass `closedloop check`, it sets up in
//! two commands, names what the server offers (the details in docs/), every relative link of it
//! and of docs/ points at a file and a heading that exist, and every `closedloop` command it
//! shows is one the binary knows. The link helpers are `cli_readme/links.rs`, the reading of
//! command lines and of `closedloop --help` `cli_readme/commands.rs`.

mod common;

#[path = "cli_readme/commands.rs"]
mod commands;
#[path = "cli_readme/links.rs"]
mod links;

use commands::{closedloop_args, shell_lines, unknown_usage};
use common::{closedloop, repo};
use links::{anchors, broken_links, links, pages, slug};

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

/// A Markdown page's section `## title`, up to the next `## ` heading.
fn section<'a>(page: &'a str, title: &str) -> &'a str {
    let start = page
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title:?}"));
    let rest = &page[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    &rest[..end]
}

/// `text` with every run of white space (line breaks included) made one space.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Task: the README a newcomer reads first.
#[test]
fn readme_sets_up_in_two_commands_and_names_what_the_server_offers() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    // The repository stands on its own.
    assert!(!readme.contains("../shared"), "the README links outside");
    sets_up_in_two_commands(&readme);
    tells_how_to_install_and_configure_a_client(&readme);
    the_docs_describe_the_mcp_surface();
    links_the_docs(&readme);
}

/// Set up: exactly two commands, the demo and the tests; CI is told later (docs/develop.md).
fn sets_up_in_two_commands(readme: &str) {
    let setup = section(readme, "Set up (two commands)");
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
    assert!(setup.contains("for contributors"), "{setup}");
    assert!(flat(setup).contains("just `closedloop demo`"), "{setup}");
    let develop = std::fs::read_to_string(repo("docs/develop.md")).unwrap();
    assert!(section(&develop, "Tests and CI").contains("CI (`.ci/run`) runs the same command"));
    assert!(section(readme, "Develop").contains("bash .ci/run"));
}

/// Install, and a client configuration with its environment.
fn tells_how_to_install_and_configure_a_client(readme: &str) {
    let install = section(readme, "Install");
    for needle in [
        "cargo install --locked --path crates/cli",
        "bash scripts/package wheel",
        "bash scripts/package deb",
        "`server.json`",
        "closedloop@.service",
        "`closedloop --version`",
    ] {
        assert!(install.contains(needle), "Install lacks {needle}");
    }
    let client = section(readme, "Use it from an MCP client");
    assert!(client.contains("\"env\": {"), "{client}");
    // One row per install path, cargo last: scripts/test-packages runs each row's configuration
    // (tests/packaging/readme_client.py) with the path it installed.
    let rows: Vec<&str> = (client.lines())
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" | ").next())
        .filter(|c| !c.starts_with("installed with") && !c.starts_with("---"))
        .collect();
    let paths = [
        "pipx, from the wheel",
        "pip, into a venv",
        "uvx, the wheel not installed",
        "the .deb",
        "cargo install",
    ];
    assert_eq!(rows, paths, "{client}");
    assert!(flat(client).contains("only the variables in the config's `env` block"));
}

/// The MCP surface beyond the tools (docs/tools.md), and the statuses and codes (docs/errors.md).
fn the_docs_describe_the_mcp_surface() {
    let tools = std::fs::read_to_string(repo("docs/tools.md")).unwrap();
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
        assert!(tools.contains(needle), "docs/tools.md lacks {needle}");
    }
    let errors = std::fs::read_to_string(repo("docs/errors.md")).unwrap();
    let statuses = section(&errors, "Statuses");
    let codes = section(&errors, "Error codes");
    assert!(
        statuses
            .lines()
            .any(|l| l.starts_with("| `needs_confirmation` |")),
        "no row needs_confirmation in\n{statuses}"
    );
    // Every code closedloop reports has its row, whose hint is the one results carry.
    for code in closedloop_contract::ErrorCode::FIXED {
        let row = format!("| `{}` |", code.as_str());
        let line = (codes.lines().find(|l| l.starts_with(&row)))
            .unwrap_or_else(|| panic!("no row {row} in docs/errors.md's Error codes"));
        let hint = line
            .trim_end_matches('|')
            .rsplit('|')
            .next()
            .unwrap()
            .trim();
        assert_eq!(hint, code.hint(), "docs/errors.md's hint for {row}");
    }
}

/// Every relative link points at a file of the repository, and the docs are linked.
fn links_the_docs(readme: &str) {
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
        "docs/README.md",
        "docs/tools.md",
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

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug(" 3. `[server]`"), "3-server");
    assert_eq!(
        slug(" The tool-selection check (`--examples`)"),
        "the-tool-selection-check---examples"
    );
    assert_eq!(
        slug(" `max_rate` and `max_burst`"),
        "max_rate-and-max_burst"
    );
    assert_eq!(
        anchors("# A\n```\n# not a heading\n```\n## a\n### A!\n"),
        ["a", "a-1", "a-2"]
    );
}

/// Every relative link of the README and of docs/ points at a file that exists, and every
/// `#anchor` in one at a heading of the page it names. The docs are listed in docs/README.md.
#[test]
fn every_link_of_the_readme_and_the_docs_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        broken.extend(broken_links(&page));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));

    // The index names every page of docs/.
    let index = std::fs::read_to_string(repo("docs/README.md")).unwrap();
    let indexed: Vec<String> = links(&index).into_iter().map(|(_, t)| t).collect();
    for page in pages().iter().filter_map(|p| p.strip_prefix("docs/")) {
        if page != "README.md" {
            assert!(
                indexed.iter().any(|t| t.split('#').next() == Some(page)),
                "docs/README.md does not list {page}"
            );
        }
    }
    // Nothing refers outside the repository.
    for page in pages() {
        let text = std::fs::read_to_string(repo(&page)).unwrap();
        assert!(!text.contains("../shared"), "{page} refers to ../shared");
    }
}

#[test]
fn the_usage_check_refuses_what_closedloop_does_not_know() {
    let args = |s: &str| closedloop_args(s).unwrap();
    assert_eq!(
        unknown_usage(&args("closedloop serve p.toml --http 127.0.0.1:0")),
        None
    );
    assert_eq!(
        unknown_usage(&args("closedloop sim fault --control A slide stall")),
        None
    );
    assert!(unknown_usage(&args("closedloop serve p.toml --htp x")).is_some());
    assert!(unknown_usage(&args("closedloop sreve p.toml")).is_some());
    assert!(unknown_usage(&args("closedloop journal check p.toml")).is_some());
    assert_eq!(
        args("cargo run -p closedloop -- demo"),
        ["demo".to_string()]
    );
}

/// Every `closedloop …` line of the README's ```sh and ```console blocks names subcommands and
/// flags that `closedloop <sub> --help` lists.
#[test]
fn every_readme_command_is_one_closedloop_knows() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for line in shell_lines(&readme) {
        let Some(args) = closedloop_args(&line) else {
            continue;
        };
        checked += 1;
        if let Some(why) = unknown_usage(&args) {
            wrong.push(format!("`{line}`: {why}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The demo, and check, lint and serve (stdio and HTTP) of the README's plant at least.
    assert!(
        checked >= 5,
        "only {checked} closedloop command lines found"
    );
}
