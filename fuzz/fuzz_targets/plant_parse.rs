//! Plant files (`closedloop_plant::parse_with_env`, the pass `closedloop check` and `serve` run):
//! arbitrary TOML text must be refused with messages, never panic.
//!
//! Input: the file's text (non-UTF-8 input is read lossily). `${env:NAME}` is answered for
//! `FUZZ_TOKEN` only (not from the process environment, so runs are reproducible); relative paths
//! resolve against `examples/`, where `can-workshop.dbc` lives.
//!
//! Properties: no panic (nor stack overflow, nor unbounded memory); a refusal carries at least one
//! message, each non-empty and naming the file; an accepted plant renders its tool surface.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let base = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let env =
        |name: &str| (name == "FUZZ_TOKEN").then(|| "0123456789abcdef0123456789abcdef".to_string());
    match closedloop_plant::parse_with_env(&text, "fuzz.toml", base, &env) {
        Ok(plant) => {
            let _ = closedloop_plant::render_surface(&plant);
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "a refusal without a message");
            for e in &errors.0 {
                assert!(!e.message.is_empty(), "{e:?}");
                assert_eq!(e.file, "fuzz.toml", "{e:?}");
            }
            let _ = errors.to_string();
        }
    }
});
