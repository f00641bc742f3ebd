//! `closedloop lint PLANT [--strict] [--examples]`: the plant crate's lint, printed.
//!
//! The rules live in `closedloop_plant::lint` (they judge the tool surface the plant
//! generates); this file only loads the plant, prints one warning per line on stdout
//! (`warning: FILE: device "ID", key KEY: MESSAGE`, the form of `check`'s warnings) and a
//! one-line summary, and decides the exit code:
//!
//! - 1 when the plant does not load (its errors on stderr, as `check` prints them);
//! - 1 with `--examples` when an example request ranks another tool first;
//! - 1 with `--strict` on any warning at all;
//! - 0 otherwise: a warning alone never fails a plain `lint`.

use closedloop_plant::lint::{self, Rule};
use std::path::Path;
use std::process::ExitCode;

/// Lints the plant at `path`; `strict` fails on any warning, `examples` also ranks the tools
/// for every action's example requests.
pub fn run(path: &Path, strict: bool, examples: bool) -> ExitCode {
    let plant = match crate::instance::load_noted(path) {
        Ok(plant) => plant,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(1);
        }
    };
    let label = path.display().to_string();
    let mut warnings = lint::lint(&plant, &label);
    let ranked = examples.then(|| lint::examples(&plant, &label));
    if let Some(r) = &ranked {
        warnings.extend(r.warnings.iter().cloned());
    }
    for w in &warnings {
        println!("warning: {w}");
    }
    let misranked = warnings
        .iter()
        .filter(|w| w.rule == Rule::Misranked)
        .count();
    let mut summary = format!("{label}: {}", count(warnings.len(), "warning"));
    if let Some(r) = &ranked {
        summary.push_str(&format!(
            "; {} of {} ranked their own tool first (BM25)",
            r.first,
            count(r.checked, "example")
        ));
    }
    let fail = (strict && !warnings.is_empty()) || misranked > 0;
    if fail {
        summary.push_str(if misranked > 0 && !strict {
            " — FAIL (an example ranks another tool first)"
        } else {
            " — FAIL (--strict)"
        });
    }
    println!("{summary}");
    if fail {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `0 warnings`, `1 warning`, `2 warnings`.
fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        _ => format!("{n} {what}s"),
    }
}
