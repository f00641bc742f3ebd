//! `closedloop init --dbc FILE`: a first plant file from a DBC, so that a CAN bus's devices are
//! not typed in by hand.
//!
//! The DBC is parsed by closedloop's own parser (the one `serve` uses, so what it refuses is
//! reported here, not at run time) and scanned for what that parser does not keep (senders,
//! receivers, comments, value tables, cycle times: `meta`). Every node that sends messages
//! becomes a device reading them as signals; messages no node sends go to one device named
//! after the file (`<stem>_unassigned` when a node's id is the stem). Names are snake_case,
//! numbered when they would repeat and cut to fit a 64-character tool name. With `--node NAME`
//! the messages NAME receives become actions on NAME's device, and a node that sends only
//! those messages is left out: closedloop takes its place.
//! The text is validated by the plant loader and the driver builder in-process before it is
//! printed or written: `init` never writes a file `check` would refuse. `check`'s warning
//! passes (deadlines, confirmers) run on it too; their findings follow the summary on stderr
//! and leave the exit code at 0.

mod actions;
mod meta;
mod model;
mod names;
mod render;

use crate::check::sim_map::Finding;
use closedloop_sim_server::can::Dbc;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// The command line of `init`.
pub struct Options<'a> {
    /// The DBC file.
    pub dbc: &'a Path,
    /// The nodes whose received messages become actions.
    pub nodes: &'a [String],
    /// Where to write; stdout when `None`.
    pub out: Option<&'a Path>,
    /// Overwrite `out`.
    pub force: bool,
    /// Print instead of writing.
    pub dry_run: bool,
}

/// Runs `init`: 0 when the plant was printed or written, 1 on any problem (said on stderr).
pub fn run(o: &Options) -> ExitCode {
    match generate(o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

fn generate(o: &Options) -> Result<(), String> {
    let dbc = Dbc::load(o.dbc).map_err(|e| parse_error(&e.to_string()))?;
    let bytes = std::fs::read(o.dbc).map_err(|e| format!("{}: {e}", o.dbc.display()))?;
    let meta = meta::scan(&String::from_utf8_lossy(&bytes));
    if let Some(n) = o.nodes.iter().find(|n| !meta.nodes.contains(n)) {
        return Err(format!(
            "{}: no node named {n}; its nodes (BU_) are: {}",
            o.dbc.display(),
            meta.nodes.join(", ")
        ));
    }
    let target = o.out.filter(|_| !o.dry_run);
    if let Some(out) = target
        && out.exists()
        && !o.force
    {
        return Err(format!(
            "{} exists; pass --force to overwrite it",
            out.display()
        ));
    }
    let base = match o.out {
        Some(out) => out.parent().filter(|p| !p.as_os_str().is_empty()),
        None => None,
    }
    .unwrap_or(Path::new("."));
    let stem = o
        .dbc
        .file_stem()
        .map_or("can".into(), |s| s.to_string_lossy().into_owned());
    let server: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let g = model::build(&dbc, &meta, o.nodes, &names::snake(&stem));
    let dbc_key = relative(o.dbc, base).display().to_string();
    let header = render::Header {
        source: &o.dbc.display().to_string(),
        dbc: &dbc_key,
        server: &server,
        nodes: o.nodes,
    };
    let text = render::render(&g, &header);
    let label = target.map_or("generated plant".into(), |p| p.display().to_string());
    let warnings = validate(&text, base, &label)?;
    match target {
        Some(out) => std::fs::write(out, &text).map_err(|e| format!("{}: {e}", out.display()))?,
        None => print!("{text}"),
    }
    summary(&g, target);
    for w in &warnings {
        eprintln!("{w}");
    }
    Ok(())
}

/// The parser's error with the line first (`FILE: line 5, column 5: cannot parse as DBC:
/// expected message_id`), followed by pest's excerpt; other errors as they are.
fn parse_error(e: &str) -> String {
    let Some((file, rest)) = e.split_once(": cannot parse as DBC:") else {
        return e.to_string();
    };
    let at = rest.split_once("--> ").and_then(|(_, r)| {
        let pos = r.split_whitespace().next()?;
        let (line, col) = pos.split_once(':')?;
        Some((line.to_string(), col.to_string()))
    });
    let expected = rest
        .lines()
        .find_map(|l| l.trim().strip_prefix("= "))
        .unwrap_or("not DBC syntax");
    match at {
        Some((line, col)) => format!(
            "{file}: line {line}, column {col}: cannot parse as DBC: {expected}\n{}",
            rest.trim_end()
        ),
        None => e.to_string(),
    }
}

/// Loads the text as `check` would (the loader, then the drivers), with `CAN_INTERFACE` from
/// the environment or, when unset, a placeholder: the bus is not opened. Returns the warnings
/// of `check`'s deadlines and confirmers passes (`label` names the file in them).
fn validate(text: &str, base: &Path, label: &str) -> Result<Vec<Finding>, String> {
    let env = |k: &str| {
        std::env::var(k)
            .ok()
            .or_else(|| (k == "CAN_INTERFACE").then(|| "slcan:/dev/ttyACM0".to_string()))
    };
    let refuse = |e: String| {
        format!(
            "{e}\nclosedloop init: the generated plant does not load; nothing was written (a bug in init: please report it with the DBC)"
        )
    };
    let plant = closedloop_plant::parse_with_env(text, "generated plant", base, &env)
        .map_err(|e| refuse(e.to_string()))?;
    closedloop_connect::build_drivers(&plant).map_err(|e| refuse(e.to_string()))?;
    Ok(warnings(&plant, label))
}

/// The findings of `check`'s deadlines and confirmers passes (warnings, never refusals).
fn warnings(plant: &closedloop_plant::Plant, label: &str) -> Vec<Finding> {
    let mut out = crate::check::deadlines_lint(plant, label);
    out.extend(crate::check::confirmers_lint(plant, label));
    out
}

/// The counts and the review list, on stderr.
fn summary(g: &model::Generated, out: Option<&Path>) {
    let signals: usize = g.devices.iter().map(|d| d.signals.len()).sum();
    let actions: usize = g.devices.iter().map(|d| d.actions.len()).sum();
    let whereto = out.map_or("printed the plant".into(), |p| {
        format!("wrote {}", p.display())
    });
    eprintln!(
        "{whereto}: {} devices, {signals} signals, {actions} actions, {} skipped",
        g.devices.len(),
        g.skipped.len()
    );
    for s in &g.skipped {
        eprintln!("  skipped: {s}");
    }
    for s in &g.needs_person {
        eprintln!("  needs a person: {s}");
    }
}

/// `path` relative to the directory `base` (both made absolute against the working directory).
fn relative(path: &Path, base: &Path) -> PathBuf {
    let (Ok(path), Ok(base)) = (std::path::absolute(path), std::path::absolute(base)) else {
        return path.to_path_buf();
    };
    let (p, b) = (clean(&path), clean(&base));
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c);
    }
    out
}

/// The path's components with `.` dropped and `..` applied where it can be.
fn clean(p: &Path) -> Vec<Component<'_>> {
    let mut v: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(v.last(), Some(Component::Normal(_))) => {
                v.pop();
            }
            c => v.push(c),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `init` runs `check`'s confirmers pass too: a sole confirmer that may act is warned about.
    #[test]
    fn warnings_include_the_confirmers_pass() {
        let text = format!(
            r#"
[server]
confirm_by = ["boss"]
[[server.token]]
name = "boss"
sha256 = "{h}"
scopes = ["read", "actuate:*"]
[[device]]
id = "press"
description = "A press"
driver = {{ kind = "sim", model = "relay" }}
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "stroke"
description = "One stroke of the press."
params = {{}}
write = [{{ coil = 0, value = "true" }}]
done_when = "contact"
expect_s = 0.05
confirm = true
"#,
            h = "0".repeat(64)
        );
        let found = validate(&text, Path::new("."), "plant.toml").expect("loads");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .to_string()
                .starts_with("warning: plant.toml: device \"press\", key action.stroke.confirm:"),
            "{}",
            found[0]
        );
    }
}
