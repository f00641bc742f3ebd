//! The README a newcomer reads first: its plant examples pass `closedloop check`, it sets up in
//! two commands, names what the server offers (the details in docs/), every relative link of it
//! and of docs/ points at a file and a heading that exist, and every `closedloop` command it
//! shows is one the binary knows.

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
    assert!(setup.contains("for contributors"), "{setup}");
    assert!(flat(setup).contains("just `closedloop demo`"), "{setup}");
    let develop = std::fs::read_to_string(repo("docs/develop.md")).unwrap();
    assert!(section(&develop, "Tests and CI").contains("CI (`.ci/run`) runs the same command"));
    assert!(section(&readme, "Develop").contains("bash .ci/run"));

    // Install, a client configuration with its environment, and the MCP surface beyond the
    // tools (docs/tools.md).
    let install = section(&readme, "Install");
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
    let client = section(&readme, "Use it from an MCP client");
    assert!(client.contains("\"env\": {"), "{client}");
    assert!(flat(client).contains("only the variables in the config's `env` block"));
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
    for (table, row) in [
        (statuses, "| `needs_confirmation` |"),
        (codes, "| `UNAUTHORIZED` |"),
        (codes, "| `UNKNOWN_DEVICE` |"),
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(row)),
            "no row {row} in\n{table}"
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

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, spaces to `-`, every other character but
/// letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown file's headings, as GitHub makes them: a repeated heading gets
/// `-1`, `-2`, … after its slug.
fn anchors(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut out = Vec::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of a Markdown file's inline links and images (`[text](target)`), with their
/// line numbers, outside fenced code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        for part in line.split("](").skip(1) {
            let target = part.split(')').next().unwrap();
            let target = target.split_whitespace().next().unwrap_or("");
            out.push((n, target.to_string()));
        }
    }
    out
}

/// Every broken relative link of `file` (a path from the repository's root): a file that does
/// not exist, or an `#anchor` that no heading of the linked Markdown file makes.
fn broken_links(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo(file)).unwrap();
    let dir = std::path::Path::new(file).parent().unwrap();
    let mut broken = Vec::new();
    for (n, target) in links(&text) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            std::path::PathBuf::from(file)
        } else {
            dir.join(path)
        };
        let on_disk = repo(linked.to_str().unwrap());
        if !on_disk.exists() {
            broken.push(format!(
                "{file}:{n}: {target}: no file {}",
                linked.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            let page = std::fs::read_to_string(&on_disk).unwrap_or_default();
            if !anchors(&page).iter().any(|a| a == anchor) {
                broken.push(format!(
                    "{file}:{n}: {target}: no heading of {} makes #{anchor}",
                    linked.display()
                ));
            }
        }
    }
    broken
}

/// The Markdown pages whose links are checked: the README and every page of docs/.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(repo("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
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

/// The command lines of the README's ```sh and ```console blocks (a console line is one that
/// starts with `$ `), comments removed and continued lines joined.
fn shell_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lang: Option<String> = None;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            lang = match lang {
                None => Some(info.trim().to_string()),
                Some(_) => None,
            };
            continue;
        }
        let line = match lang.as_deref() {
            Some("sh") => trimmed,
            Some("console") => match trimmed.strip_prefix("$ ") {
                Some(l) => l,
                None => continue,
            },
            _ => continue,
        };
        let line = match line.find(" #") {
            Some(i) => &line[..i],
            None if line.starts_with('#') => "",
            None => line,
        };
        match line.trim_end().strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                if !pending.trim().is_empty() {
                    out.push(std::mem::take(&mut pending));
                }
                pending.clear();
            }
        }
    }
    out
}

/// The arguments a command line gives `closedloop`, if it runs it: `closedloop ARGS`, with
/// `VAR=value` or `sudo` before it, `cargo run -p closedloop -- ARGS`, or `uvx --from WHEEL
/// closedloop ARGS`.
fn closedloop_args(line: &str) -> Option<Vec<String>> {
    let mut tokens: Vec<&str> = line.split_whitespace().collect();
    while tokens
        .first()
        .is_some_and(|t| *t == "sudo" || (t.contains('=') && !t.starts_with('-')))
    {
        tokens.remove(0);
    }
    let rest = match tokens.as_slice() {
        ["closedloop", rest @ ..] => rest,
        ["cargo", "run", rest @ ..] if rest.contains(&"closedloop") => {
            let dashes = rest.iter().position(|t| *t == "--")?;
            &rest[dashes + 1..]
        }
        ["uvx", rest @ ..] => {
            let at = rest.iter().position(|t| *t == "closedloop")?;
            &rest[at + 1..]
        }
        _ => return None,
    };
    Some(rest.iter().map(|t| t.to_string()).collect())
}

/// `closedloop PATH… --help`.
fn help(path: &[String]) -> String {
    let out = closedloop().args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "closedloop {path:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists under `Commands:`.
fn subcommands(help: &str) -> Vec<String> {
    let Some((_, list)) = help.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    list.lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Whether a help text lists `flag` (`--http`, `-V`) as an option.
fn knows_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        let before = help[..i].chars().next_back();
        let after = help[i + flag.len()..].chars().next();
        matches!(before, Some(' ' | ','))
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// Why `closedloop ARGS` would be refused for its subcommands or flags, if it would.
fn unknown_usage(args: &[String]) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    let mut text = help(&path);
    let mut positional = false;
    for arg in args {
        if arg.starts_with('-') && arg.len() > 1 {
            let flag = arg.split('=').next().unwrap();
            if !knows_flag(&text, flag) {
                return Some(format!("closedloop {} has no {flag}", path.join(" ")));
            }
            continue;
        }
        if positional {
            continue;
        }
        let subs = subcommands(&text);
        if subs.contains(arg) {
            path.push(arg.clone());
            text = help(&path);
        } else if !subs.is_empty() && !text.contains("\nArguments:\n") {
            return Some(format!(
                "closedloop {} has no subcommand {arg} (it has {})",
                path.join(" "),
                subs.join(", ")
            ));
        } else {
            positional = true;
        }
    }
    None
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
