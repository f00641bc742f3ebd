//! The DBC path of `closedloop init` (`--dbc`): `meta` scans the file, `model` decides the
//! devices and their signals, `actions` the actions of each `--node`, and `render` writes the
//! TOML.
//!
//! The DBC is parsed by closedloop's own parser (the one `serve` uses, so what it refuses is
//! reported here, not at run time) and scanned for what that parser does not keep (senders,
//! receivers, comments, value tables, cycle times: `meta`). Every node that sends messages
//! becomes a device reading them as signals; messages no node sends go to one device named
//! after the file (`<stem>_unassigned` when a node's id is the stem). Names are snake_case,
//! numbered when they would repeat and cut to fit a 64-character tool name. With `--node NAME`
//! the messages NAME receives become actions on NAME's device, and a node that sends only
//! those messages is left out: closedloop takes its place.

mod actions;
mod meta;
mod model;
mod render;

use super::{Summary, names, relative, server_name};
use closedloop_sim_server::can::Dbc;
use std::path::Path;

/// The plant text `init --dbc` generates from the DBC at `path`, and its summary.
pub(super) fn generate(
    path: &Path,
    (nodes, bitrate, interface): (&[String], Option<u32>, Option<&str>),
    base: &Path,
) -> Result<(String, Summary), String> {
    if let Some(i) =
        interface.filter(|i| i.contains("${") || i.contains('"') || i.trim().is_empty())
    {
        return Err(format!(
            "--interface {i:?}: write the interface itself, e.g. socketcan:can0 or slcan:/dev/ttyACM0"
        ));
    }
    let dbc = Dbc::load(path).map_err(|e| parse_error(&e.to_string()))?;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = meta::scan(&String::from_utf8_lossy(&bytes));
    if let Some(n) = nodes.iter().find(|n| !meta.nodes.contains(n)) {
        return Err(format!(
            "{}: no node named {n}; its nodes (BU_) are: {}",
            path.display(),
            meta.nodes.join(", ")
        ));
    }
    let stem = path
        .file_stem()
        .map_or("can".into(), |s| s.to_string_lossy().into_owned());
    let g = model::build(&dbc, &meta, nodes, &names::snake(&stem));
    let dbc_key = relative(path, base).display().to_string();
    let header = render::Header {
        source: &path.display().to_string(),
        dbc: &dbc_key,
        server: &server_name(&stem),
        nodes,
        bitrate,
        interface,
    };
    let text = render::render(&g, &header);
    let summary = Summary {
        devices: g.devices.len(),
        signals: g.devices.iter().map(|d| d.signals.len()).sum(),
        actions: g.devices.iter().map(|d| d.actions.len()).sum(),
        skipped: g.skipped,
        needs_person: g.needs_person,
    };
    Ok((text, summary))
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
