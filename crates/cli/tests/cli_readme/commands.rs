//! The README's command lines read as `closedloop` would take them, and what `closedloop --help`
//! (of each subcommand) says it knows, so a line naming an unknown subcommand or flag is found.

use crate::common::closedloop;

/// The command lines of the README's ```sh and ```console blocks (a console line is one that
/// starts with `$ `), comments removed and continued lines joined.
pub fn shell_lines(text: &str) -> Vec<String> {
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
pub fn closedloop_args(line: &str) -> Option<Vec<String>> {
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
pub fn unknown_usage(args: &[String]) -> Option<String> {
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
