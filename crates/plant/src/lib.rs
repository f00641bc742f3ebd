//! The plant file: typed keys, one validation pass, compiled CEL expressions, and the MCP tool
//! surface generated from it.
//!
//! A plant file (docs/plant-file.md) declares devices, their signals and their actions. Everything
//! the engine later relies on is decided here, once, at load: every key is known, every expression
//! compiles and has the right type, every write goes to a writable address. A file that would
//! surprise the engine at run time is refused with messages that name the file, the device, the
//! key and the fix — `closedloop check` and `closedloop serve` run exactly this pass.
//!
//! Where things are:
//!
//! - `validate/document.rs`: the text parsed one `[[device]]` or `[[alarm]]` at a time where that
//!   gives the same table as the whole text, else whole; `validate/mod.rs` checks each device as
//!   soon as its piece is parsed, so a hall's TOML tree never exists whole. The report keeps the
//!   order of the whole-file steps (`error.rs`, `Section`); unset `${env:NAME}` are reported per
//!   part (`validate/unset.rs`, `env.rs`).
//! - `model.rs`: the raw serde model (`deny_unknown_fields`), each piece typed through a reference
//!   to its TOML tree (`borrowed.rs`). Addresses are parsed once into the contract crate's typed
//!   values ([`BrokerUrl`], [`OpcuaSecurity`], [`CanInterface`]): nothing after loading parses
//!   them again.
//! - `expr.rs`: CEL expressions ([`Expr`]), compiled and dry-run at load (`validate/exprs.rs`);
//!   [`other_device`] parses `devices.<id>.<signal>`. `params.rs`: parameter checking;
//!   `template.rs`: MQTT payload templates.
//! - `action.rs`: an action, its [`Verification`] and `Action::deadline_s`, the one deadline
//!   formula dispatch, `check` and the prompts use; `readback.rs`: readback dressed as feedback.
//! - `schema.rs`: the tool surface (names, descriptions, JSON Schemas); [`lint`]: warnings about
//!   that surface, and BM25 over the tools for each action's `examples`.
//! - `cells.rs`: devices joined by exclusive groups, placed and handed over together among
//!   gateways; `journal_view.rs`: the few keys the journal commands read, without any driver.
//!
//! ```
//! let src = r#"
//! [[device]]
//! id = "lamp"
//! driver = { kind = "sim", model = "relay" }
//! [device.signals]
//! contact = { discrete_input = 0 }
//! [[device.action]]
//! name = "switch"
//! description = "Turn the lamp on or off."
//! params = { on = { type = "bool" } }
//! write = [{ coil = 0, value = "params.on" }]
//! done_when = "contact == params.on"
//! "#;
//! let plant = closedloop_plant::parse(src, "lamp.toml", std::path::Path::new("/srv")).unwrap();
//! assert_eq!(plant.devices[0].actions[0].tool_name, "lamp_switch");
//! ```

#![warn(missing_docs)]

mod action;
mod ast;
mod borrowed;
mod cells;
mod env;
mod error;
mod expr;
mod expr_words;
mod interned;
mod journal_view;
pub mod limits;
pub mod lint;
mod literal;
mod model;
mod params;
mod plant;
mod rate;
mod readback;
#[cfg(test)]
mod repository_plants;
mod schema;
mod serde_msg;
mod suggest;
mod syntax;
mod template;
mod validate;

pub use action::{Action, TaskSupport, Verification, WriteEntry};
pub use cells::{Cell, Cells};
pub use closedloop_contract::{BrokerUrl, CanInterface, OpcuaSecurity};
pub use error::{PlantError, PlantErrors};
pub use expr::{EvalError, Expr, Scope, other_device, other_device_name};
pub use journal_view::{JournalView, load_journal_view};
pub use limits::Limit;
pub use params::{ParamError, ParamProblem, ParamSpec, ParamType, ParamValue, Params};
pub use plant::{
    Alarm, DEFAULT_TIMEOUT_MS, Device, DeviceSim, DriverConfig, Liveness, MqttTls, Parity, Plant,
    Secret, Server, Signal, SimCan, Source, Token, TokenScope, ToolMode, WhenOffline,
};
pub use rate::RateLimit;
pub use schema::{MAX_TOOL_NAME, outcome_text, render_surface, wait_s_property};
pub use template::Template;
/// Names an expression reserves: no signal or parameter may be named so.
pub use validate::exprs::RESERVED as RESERVED_NAMES;

use std::path::Path;

/// Reads, parses and validates the plant file at `path`. Relative paths in it (journal, DBC
/// files) resolve against the file's folder; `${env:NAME}` reads the process environment.
pub fn load(path: &Path) -> Result<Plant, PlantErrors> {
    load_with_env(path, &|k| std::env::var(k).ok())
}

/// [`load`] with `${env:NAME}` answered by `env` instead of the process environment: the
/// commands an operator runs on a service's plant file answer its unit's variables
/// (`STATE_DIRECTORY`) the way the unit would.
pub fn load_with_env(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plant, PlantErrors> {
    let label = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| {
        PlantErrors(vec![PlantError {
            file: label.clone(),
            device: None,
            key: None,
            line: None,
            message: format!("cannot read the plant file: {e}"),
        }])
    })?;
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(label.clone());
    let mut plant = parse_with_env(&src, &name, base, env).map_err(|mut e| {
        for err in &mut e.0 {
            err.file = label.clone();
        }
        e
    })?;
    plant.file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(plant)
}

/// Parses and validates plant-file text. `file_label` names the file in messages; `base_dir`
/// is where relative paths resolve. `${env:NAME}` reads the process environment.
pub fn parse(src: &str, file_label: &str, base_dir: &Path) -> Result<Plant, PlantErrors> {
    parse_with_env(src, file_label, base_dir, &|k| std::env::var(k).ok())
}

/// [`parse`] with `${env:NAME}` answered by `env` instead of the process environment, so that
/// tests and tools need not change the environment of the whole process.
pub fn parse_with_env(
    src: &str,
    file_label: &str,
    base_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plant, PlantErrors> {
    validate::run(src, file_label, base_dir, env)
}

/// The plant file's text as a TOML table, parsed one `[[device]]` at a time where that gives
/// the same table as the whole text (see `validate/document.rs`). Public for the fuzz target
/// that holds it to `toml`'s own parse of the whole text; not part of the loader's API.
#[doc(hidden)]
pub fn parse_toml_in_pieces(src: &str) -> Result<toml::Table, toml::de::Error> {
    validate::document::parse(src)
}

/// The variables the plant file's `${env:NAME}` references name, each once, in file order.
/// An MCP client passes a server only the variables of its config's `env` block, so a
/// configuration shown for this plant must list these. Empty when the file does not parse.
pub fn env_variables(src: &str) -> Vec<String> {
    let Ok(mut doc) = validate::document::parse(src) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for m in env::substitute(&mut doc, &|_| None) {
        if !names.contains(&m.var) {
            names.push(m.var);
        }
    }
    names
}

/// Parses a retention as `[server] retain` takes it (`"30d"`, `"12h"`, at least one hour), for
/// `closedloop journal prune --older-than`; the error says what to write instead.
pub fn parse_retention(text: &str) -> Result<std::time::Duration, String> {
    validate::server::retention(text)
}
