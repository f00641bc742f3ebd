//! `closedloop check PLANT`: the loader's validation, the drivers built as `serve` builds them,
//! the simulator's register maps, the deadlines a push device may not report within
//! (`deadlines`) and serial lines the polls cannot fit on (`line_time`); then a summary (`summary`), or with `--tools` the whole tool surface.
//!
//! Errors go to stderr and exit 1; warnings (`warning: ...`, such as an address that looks
//! 1-based) go to stderr too but leave the exit code at 0.

mod confirmers;
mod deadlines;
mod line_time;
mod readback;
pub mod sim_map;
mod summary;
pub(crate) use {
    confirmers::lint as confirmers_lint, deadlines::lint as deadlines_lint,
    readback::lint as readback_lint,
};

use sim_map::{Finding, Severity};
use std::path::Path;
use std::process::ExitCode;

/// Runs the check and prints its verdict after a summary of the plant, or, with `tools`,
/// after every tool's description and input schema; with `lint`, `closedloop lint`'s warnings
/// come before both, so that the verdict stays the last line.
pub fn run(path: &Path, tools: bool, lint: bool) -> ExitCode {
    // An unset STATE_DIRECTORY is the one the service closedloop@NAME gives NAME.toml, noted.
    let env = crate::instance::Env::of(path);
    let loaded = crate::instance::load(path, &env);
    if let Some(note) = env.note() {
        eprintln!("{note}");
    }
    let plant = match loaded {
        Ok(plant) => plant,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = closedloop_connect::build_drivers(&plant) {
        eprintln!("{}: {e}", path.display());
        return ExitCode::from(1);
    }
    let label = path.display().to_string();
    let mut findings = sim_map::lint(&plant, &label);
    findings.extend(deadlines::lint(&plant, &label));
    findings.extend(confirmers::lint(&plant, &label));
    findings.extend(readback::lint(&plant, &label));
    findings.extend(line_time::lint(&plant, &label));
    for f in &findings {
        eprintln!("{f}");
    }
    if findings.iter().any(|f| f.severity == Severity::Error) {
        return ExitCode::from(1);
    }
    let mut warnings = findings.len();
    if lint {
        let lint = closedloop_plant::lint::lint(&plant, &label);
        for w in &lint {
            println!("warning: {w}");
        }
        warnings += lint.len();
    }
    match tools {
        true => print!("{}", closedloop_plant::render_surface(&plant)),
        false => print!("{}", summary::summary(&plant, &label, warnings)),
    }
    println!("{}: OK", path.display());
    // The process ends after this: handing a hall's plant back to the allocator piece by piece
    // would only spend time (a twentieth of `check` of 8,000 relays); the exit returns it whole.
    std::mem::forget(plant);
    ExitCode::SUCCESS
}

/// The errors (not the warnings) the simulator's maps find in `plant`, for `serve` to refuse
/// an in-process simulated device it could never read or write.
pub fn sim_errors(plant: &closedloop_plant::Plant, label: &str) -> Vec<Finding> {
    sim_map::lint(plant, label)
        .into_iter()
        .filter(|f| {
            f.severity == Severity::Error
                && plant
                    .devices
                    .iter()
                    .any(|d| Some(&d.id) == f.error.device.as_ref() && d.driver.kind() == "sim")
        })
        .collect()
}
