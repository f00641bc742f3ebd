//! `closedloop init`: a first plant file from what the devices already describe, so that they
//! are not typed in by hand: a DBC (`--dbc`, `dbc.rs`) or an MQTT broker's Home Assistant
//! discovery messages (`--mqtt`, `mqtt.rs`, `discovery.rs`, `ha.rs`).
//!
//! Whatever the source, the text is validated by the plant loader and the driver builder
//! in-process before it is printed or written: `init` never writes a file `check` would
//! refuse. `check`'s warning passes (deadlines, confirmers) run on it too; their findings
//! follow the summary on stderr and leave the exit code at 0.

mod dbc;
mod discovery;
mod ha;
mod ha_render;
pub mod mqtt;
mod names;
pub mod opcua;
mod ua_map;

use crate::check::sim_map::Finding;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// Where the devices' description comes from.
pub enum Source<'a> {
    /// A DBC file, and the nodes whose received messages become actions.
    Dbc {
        dbc: &'a Path,
        nodes: &'a [String],
        /// `--bitrate`: the bus speed the DBC cannot say.
        bitrate: Option<u32>,
        /// `--interface`: the bus the driver tables name (else `${env:CAN_INTERFACE}`).
        interface: Option<&'a str>,
    },
    /// A broker's discovery messages.
    Mqtt(mqtt::Source<'a>),
    /// An OPC UA server's address space.
    Opcua(opcua::Source<'a>),
}

/// The command line of `init`.
pub struct Options<'a> {
    pub source: Source<'a>,
    /// Where to write; stdout when `None`.
    pub out: Option<&'a Path>,
    /// Overwrite `out`.
    pub force: bool,
    /// Print instead of writing.
    pub dry_run: bool,
}

/// What was generated, for the summary on stderr.
struct Summary {
    devices: usize,
    signals: usize,
    actions: usize,
    skipped: Vec<String>,
    needs_person: Vec<String>,
}

/// `--listen`'s parser.
pub fn listen_time(s: &str) -> Result<std::time::Duration, String> {
    mqtt::duration(s)
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
    let (text, summary) = match &o.source {
        Source::Dbc {
            dbc,
            nodes,
            bitrate,
            interface,
        } => dbc::generate(dbc, (nodes, *bitrate, *interface), base)?,
        Source::Mqtt(src) => from_mqtt(src, base)?,
        Source::Opcua(src) => from_opcua(src, base)?,
    };
    let label = target.map_or("generated plant".into(), |p| p.display().to_string());
    // The same passes as `check`: what init prints is what `check` will print on the file.
    let warnings = validate(&text, base, &label)?;
    match target {
        Some(out) => std::fs::write(out, &text).map_err(|e| format!("{}: {e}", out.display()))?,
        None => print!("{text}"),
    }
    summary.print(target);
    for w in &warnings {
        eprintln!("{w}");
    }
    Ok(())
}

fn from_mqtt(src: &mqtt::Source, base: &Path) -> Result<(String, Summary), String> {
    let (entities, mut skipped) = mqtt::discover(src)?;
    if entities.is_empty() {
        return Err(format!(
            "{}: no discovery messages under {}/# within {} s; check --prefix, or --listen longer",
            src.url,
            src.prefix,
            src.listen.as_secs_f64()
        ));
    }
    let mut m = ha::map(&entities);
    skipped.append(&mut m.skipped);
    m.skipped = skipped;
    if m.boards.is_empty() {
        return Err(format!(
            "{}: no discovered device has an entity closedloop init maps:\n  {}",
            src.url,
            m.skipped.join("\n  ")
        ));
    }
    let host = src.url.split("://").nth(1).unwrap_or(src.url);
    let host = host.split([':', '/']).next().unwrap_or(host);
    // Paths in the plant are relative to the plant file, not to where init runs.
    let from_plant = |p: &Path| relative(p, base).display().to_string();
    let ca = src.ca_file.map(from_plant);
    let cert = src.client_cert.map(from_plant);
    let key = src.client_key.map(from_plant);
    let server = server_name(&format!("mqtt-{host}"));
    let client_id = format!("closedloop-{server}-{}", unique_suffix());
    let header = ha_render::Header {
        broker: src.url,
        prefix: src.prefix,
        server: &server,
        client_id: &client_id,
        username: src.username,
        ca_file: ca.as_deref(),
        client_cert: cert.as_deref().zip(key.as_deref()),
    };
    let text = ha_render::render(&m, &header);
    let summary = Summary {
        devices: m.boards.len(),
        signals: m.boards.iter().map(|b| b.signals.len()).sum(),
        actions: m.boards.iter().map(|b| b.actions.len()).sum(),
        skipped: m.skipped,
        needs_person: m.needs_person,
    };
    Ok((text, summary))
}

fn from_opcua(src: &opcua::Source, base: &Path) -> Result<(String, Summary), String> {
    let survey = opcua::survey(src)?;
    let host = src.endpoint.trim_start_matches("opc.tcp://");
    let host = host.split([':', '/']).next().unwrap_or(host);
    let mut header = format!(
        "# Generated by closedloop init from the address space of {} below {} ({} levels).\n# Review descriptions, ranges and expect_s before serving.\n",
        src.endpoint, src.node, src.depth
    );
    if src.username.is_some() {
        header.push_str("# The password comes from the environment: OPCUA_PASSWORD.\n");
    }
    let cert = src.server_cert.map(|p| relative(p, base));
    let m = ua_map::map(
        &survey,
        &src.driver(cert.as_deref()),
        &header,
        &server_name(&format!("opcua-{host}")),
    );
    if m.devices == 0 {
        return Err(format!(
            "{}: no object below {} holds variables or methods within {} levels; start elsewhere (--node) or go deeper (--depth)",
            src.endpoint, src.node, src.depth
        ));
    }
    let summary = Summary {
        devices: m.devices,
        signals: m.signals,
        actions: m.actions,
        skipped: m.skipped,
        needs_person: m.needs_person,
    };
    Ok((m.text, summary))
}

/// A `[server] name` from a file stem or a host: letters, digits and dashes.
fn server_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Loads the text as `check` would (the loader, then the drivers), with `CAN_INTERFACE` and
/// `MQTT_PASSWORD` from the environment or, when unset, a placeholder: nothing is opened. Returns the warnings
/// of `check`'s deadlines and confirmers passes (`label` names the file in them).
fn validate(text: &str, base: &Path, label: &str) -> Result<Vec<Finding>, String> {
    let env = |k: &str| {
        std::env::var(k)
            .ok()
            .or_else(|| (k == "CAN_INTERFACE").then(|| "slcan:/dev/ttyACM0".to_string()))
            .or_else(|| {
                (k == "MQTT_PASSWORD" || k == "OPCUA_PASSWORD").then(|| "unset".to_string())
            })
    };
    let refuse = |e: String| {
        format!(
            "{e}\nclosedloop init: the generated plant does not load; nothing was written (a bug in init: please report it with the DBC or the discovery messages)"
        )
    };
    let plant = closedloop_plant::parse_with_env(text, "generated plant", base, &env)
        .map_err(|e| refuse(e.to_string()))?;
    closedloop_connect::build_drivers(&plant).map_err(|e| refuse(e.to_string()))?;
    Ok(warnings(&plant, label))
}

/// The findings of `check`'s deadlines, confirmers and readback passes (warnings, never
/// refusals).
fn warnings(plant: &closedloop_plant::Plant, label: &str) -> Vec<Finding> {
    let mut out = crate::check::deadlines_lint(plant, label);
    out.extend(crate::check::confirmers_lint(plant, label));
    out.extend(crate::check::readback_lint(plant, label));
    out
}

impl Summary {
    /// The counts and the review list, on stderr.
    fn print(&self, out: Option<&Path>) {
        let whereto = out.map_or("printed the plant".into(), |p| {
            format!("wrote {}", p.display())
        });
        eprintln!(
            "{whereto}: {} devices, {} signals, {} actions, {} skipped",
            self.devices,
            self.signals,
            self.actions,
            self.skipped.len()
        );
        for s in &self.skipped {
            eprintln!("  skipped: {s}");
        }
        for s in &self.needs_person {
            eprintln!("  needs a person: {s}");
        }
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

/// Six hex digits no two runs of `init` share but by chance (1 in 16 million): the process's
/// randomly seeded hasher over its id and the time. Written into the client id, so two plants
/// made from one broker never take each other's connection.
fn unique_suffix() -> String {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now();
    let h = std::collections::hash_map::RandomState::new().hash_one((std::process::id(), now));
    format!("{:06x}", h & 0xff_ffff)
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
