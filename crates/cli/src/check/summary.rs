//! What `closedloop check` prints by default: the verdict's context in a few lines (devices by
//! driver, the action tools, the warnings), so the verdict is not a hundred lines below the
//! command. `--tools` prints every tool's description and input schema instead.

use closedloop_plant::Plant;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many names a line lists before it says "and N more".
const NAMES: usize = 6;

/// The summary of `plant` for `check` at `shown` (the path as the user wrote it), with the
/// number of warnings printed above it.
pub fn summary(plant: &Plant, shown: &str, warnings: usize) -> String {
    let tools: Vec<&str> = plant.actions().map(|(_, a)| a.tool_name.as_str()).collect();
    let mut out = format!(
        "{}: server \"{}\", {} device(s), {} action tool(s), journal {}\n",
        plant.file.display(),
        plant.server.name,
        plant.devices.len(),
        tools.len(),
        // Never a password on stdout, which ends up in CI logs: as the banner shows it.
        closedloop_journal::shown_url(&plant.server.journal)
    );
    let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for d in &plant.devices {
        by_kind.entry(d.driver.kind()).or_default().push(&d.id);
    }
    for (kind, ids) in &by_kind {
        let _ = writeln!(out, "  devices on {kind}: {}", listed(ids));
    }
    if !tools.is_empty() {
        let _ = writeln!(out, "  action tools: {}", listed(&tools));
    }
    if !plant.alarms.is_empty() {
        let names: Vec<&str> = plant.alarms.iter().map(|a| a.name.as_str()).collect();
        let _ = writeln!(out, "  alarms: {}", listed(&names));
    }
    let _ = match warnings {
        0 => writeln!(out, "  warnings: none"),
        n => writeln!(out, "  warnings: {n} (above)"),
    };
    let _ = writeln!(
        out,
        "  every tool's description and input schema: closedloop check {} --tools",
        crate::serve::shell_word(shown)
    );
    out
}

/// `a, b, c` or `a, b, c, d, e, f and 3 more`.
fn listed(names: &[&str]) -> String {
    let shown = names[..names.len().min(NAMES)].join(", ");
    match names.len().saturating_sub(NAMES) {
        0 => shown,
        n => format!("{shown} and {n} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_devices_by_driver_and_says_where_the_schemas_are() {
        let src = include_str!("../../../../examples/workshop.toml");
        let plant =
            closedloop_plant::parse(src, "workshop.toml", std::path::Path::new("/srv")).unwrap();
        let text = summary(&plant, "workshop.toml", 2);
        let lines: Vec<&str> = text.lines().collect();
        let ids: Vec<&str> = plant.devices.iter().map(|d| d.id.as_str()).collect();
        let shown = listed(&ids);
        assert_eq!(lines[1], format!("  devices on sim: {shown}"), "{text}");
        let tools: Vec<&str> = plant.actions().map(|(_, a)| a.tool_name.as_str()).collect();
        assert_eq!(
            lines[2],
            format!("  action tools: {}", listed(&tools)),
            "{text}"
        );
        assert!(text.contains("  warnings: 2 (above)\n"), "{text}");
        assert!(
            text.ends_with("closedloop check workshop.toml --tools\n"),
            "{text}"
        );
        assert!(
            !text.contains("\"type\""),
            "no schema in the summary: {text}"
        );
    }

    /// A journal's password never reaches stdout; alarms are named; devices group by driver.
    #[test]
    fn a_summary_hides_the_journal_password_and_names_alarms_and_drivers() {
        let src = r#"
[server]
journal = "postgres://gw:s3cret@db.example:5432/plant"
[[device]]
id = "lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device]]
id = "board"
driver = { kind = "mqtt", broker = "mqtt://127.0.0.1:1883", client_id = "gw" }
[device.signals]
on = { topic = "b/state", type = "bool" }
[[alarm]]
name = "BOARD_SILENT"
when = "devices.board.on"
blocks = ["lamp"]
"#;
        let plant = closedloop_plant::parse(src, "p.toml", std::path::Path::new("/srv")).unwrap();
        let text = summary(&plant, "p.toml", 0);
        assert!(!text.contains("s3cret"), "{text}");
        assert!(
            text.contains("  devices on mqtt: board\n  devices on sim: lamp\n"),
            "{text}"
        );
        assert!(
            text.contains("  alarms: BOARD_SILENT\n  warnings: none\n"),
            "{text}"
        );
    }

    #[test]
    fn a_long_list_is_cut_short_with_a_count() {
        let many = ["a", "b", "c", "d", "e", "f", "g", "h"];
        assert_eq!(listed(&many), "a, b, c, d, e, f and 2 more");
        assert_eq!(listed(&["a"]), "a");
    }
}
