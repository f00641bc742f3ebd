//! `closedloop lint`: warnings about the tool surface a plant generates, for the model that
//! will read it.
//!
//! The loader refuses a plant that cannot work; lint judges one that works but that a model is
//! likely to misuse: a description too short to choose by or too long to read, protocol jargon
//! where the model needs the plant's words, numbers without units, motion targets without
//! bounds, irreversible actions that do not ask a person, tools that read alike, names that do
//! not say what they do. With `--examples` it also ranks the tools for each action's example
//! requests with BM25 ([`bm25`]) and reports the requests another tool would win.
//!
//! Every rule, its threshold and why is listed in docs/plant-file.md ("Linting"); the word
//! lists are in `words.rs`. A warning never stops a plant from loading or serving.

mod alike;
pub mod bm25;
mod examples;
mod rules;
#[cfg(test)]
mod tests;
mod words;

pub use examples::{Examples, examples};

use crate::plant::Plant;
use std::fmt;

/// Shortest action description, in characters: below it a description cannot say what the
/// action does and when it is refused.
pub const DESCRIPTION_MIN: usize = 20;
/// Longest action description, in characters: every client sends every tool's description
/// with every request, and a long one buries the sentence that tells tools apart.
pub const DESCRIPTION_MAX: usize = 400;
/// Most parameters an action should have: models fill long argument lists badly.
pub const MAX_PARAMS: usize = 5;
/// Share of description words (Jaccard index of their token sets) from which two tools count
/// as too alike.
pub const ALIKE: f64 = 0.5;

/// Which rule a warning comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// An action description shorter than [`DESCRIPTION_MIN`] or longer than
    /// [`DESCRIPTION_MAX`] characters.
    DescriptionLength,
    /// Protocol words (register, coil, `0x…`, NodeId, DBC, …) in a description the model reads.
    Jargon,
    /// More than [`MAX_PARAMS`] parameters.
    TooManyParams,
    /// A number or integer parameter without a `unit`.
    Unit,
    /// A motion target without `min` or `max`.
    MotionBounds,
    /// An action whose name or description says it cannot be undone, without `confirm`.
    Confirm,
    /// Two tools whose descriptions share [`ALIKE`] of their words, neither saying "not for".
    TooAlike,
    /// An action name whose first word is not a known imperative verb.
    Verb,
    /// With `--examples`: an action without example requests.
    NoExamples,
    /// With `--examples`: an example request whose own tool is not ranked first.
    Misranked,
}

impl Rule {
    /// The rule's name as docs/plant-file.md lists it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::DescriptionLength => "description-length",
            Rule::Jargon => "jargon",
            Rule::TooManyParams => "too-many-params",
            Rule::Unit => "unit",
            Rule::MotionBounds => "motion-bounds",
            Rule::Confirm => "confirm",
            Rule::TooAlike => "too-alike",
            Rule::Verb => "verb",
            Rule::NoExamples => "no-examples",
            Rule::Misranked => "misranked",
        }
    }
}

/// One lint finding. Displays like a [`crate::PlantError`] (`FILE: device "ID", key KEY:
/// MESSAGE`), so that whoever fixes it finds the place the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file as the user named it.
    pub file: String,
    /// The device the finding is in (every rule judges a device or one of its actions).
    pub device: String,
    /// The key path inside the device (`action.move_to.params.target_mm.unit`).
    pub key: String,
    /// The rule that fired.
    pub rule: Rule,
    /// What is wrong, why it matters to a model and how to fix it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: device \"{}\", key {}: {}",
            self.file, self.device, self.key, self.message
        )
    }
}

/// Every warning of every rule but the example ranking ([`examples`]), device by device in
/// file order, then the pairs of tools that read alike. `file` labels the warnings.
pub fn lint(plant: &Plant, file: &str) -> Vec<Warning> {
    let mut out = Vec::new();
    for device in &plant.devices {
        rules::device(file, device, &mut out);
    }
    alike::alike(file, plant, &mut out);
    out
}

/// Collects warnings for one device.
pub(crate) struct Sink<'a> {
    file: &'a str,
    device: &'a str,
    out: &'a mut Vec<Warning>,
}

impl<'a> Sink<'a> {
    fn new(file: &'a str, device: &'a str, out: &'a mut Vec<Warning>) -> Sink<'a> {
        Sink { file, device, out }
    }

    fn warn(&mut self, key: String, rule: Rule, message: String) {
        self.out.push(Warning {
            file: self.file.to_string(),
            device: self.device.to_string(),
            key,
            rule,
            message,
        });
    }
}
