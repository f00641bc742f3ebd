//! The tool-selection check: each action's `examples` ranked against every action tool with
//! BM25, as a stand-in for the model that will choose among them.
//!
//! A tool's document is what a model reads to choose it, less what every tool shares: the tool
//! name (split on `_`), the action's description, the device's description (part of the tool
//! description), and each parameter's name, description, unit and allowed strings. The fixed
//! sentences every tool description ends with would add the same words to every document, and
//! the generic tools (`get_device_state`, …) are not actions, so neither is indexed.

use super::bm25::{Index, rank};
use super::{Rule, Sink, Warning};
use crate::action::Action;
use crate::plant::{Device, Plant};

/// The outcome of [`examples`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Examples {
    /// How many example requests were ranked.
    pub checked: usize,
    /// How many of them ranked their own tool first, strictly above every other.
    pub first: usize,
    /// A [`Rule::Misranked`] warning per example that did not, and a [`Rule::NoExamples`]
    /// warning per action without examples, in file order.
    pub warnings: Vec<Warning>,
}

/// Ranks every action tool of `plant` for every example of every action and reports each
/// example whose own tool is not strictly first, with the tool that scored highest instead.
/// Cost: one BM25 query per example over an inverted index of the tools.
pub fn examples(plant: &Plant, file: &str) -> Examples {
    let tools: Vec<(&Device, &Action)> = plant
        .devices
        .iter()
        .flat_map(|d| d.actions.iter().map(move |a| (&**d, a)))
        .collect();
    let docs: Vec<String> = tools.iter().map(|(d, a)| document(d, a)).collect();
    let index = Index::new(&docs);
    let mut report = Examples::default();
    let mut out = Vec::new();
    for (own, (device, action)) in tools.iter().enumerate() {
        let mut sink = Sink::new(file, &device.id, &mut out);
        let key = format!("action.{}.examples", action.name);
        if action.examples.is_empty() {
            sink.warn(key, Rule::NoExamples, format!(
                "{} has no examples: nothing checks that a request for it reaches it; add examples = [\"…\"] with two or three requests a person would make",
                action.tool_name
            ));
            continue;
        }
        for (i, example) in action.examples.iter().enumerate() {
            report.checked += 1;
            let scores = index.scores(example);
            let (place, best) = rank(&scores, own);
            if place == 1 {
                report.first += 1;
                continue;
            }
            let Some(best) = best else { continue };
            let (mine, theirs) = (scores[own], scores[best]);
            let beaten = if theirs > mine {
                "scored higher"
            } else {
                "scored as high"
            };
            sink.warn(format!("{key}[{i}]"), Rule::Misranked, format!(
                "example {example:?} for {} ranked {}: {} {beaten} ({theirs:.2} against {mine:.2}); use the words of such requests in the description of {}, or add a sentence \"Not for …\" to the other",
                action.tool_name,
                ordinal(place),
                tools[best].1.tool_name,
                action.tool_name,
            ));
        }
    }
    report.warnings = out;
    report
}

/// The text a tool is found by: see the module documentation.
pub(super) fn document(device: &Device, action: &Action) -> String {
    let mut doc = vec![
        action.tool_name.replace('_', " "),
        action.description.clone(),
        device.description.clone(),
    ];
    for p in &action.params {
        doc.push(p.name.replace('_', " "));
        doc.extend(p.description.iter().cloned());
        doc.extend(p.unit.iter().cloned());
        doc.extend(p.choices.iter().flatten().cloned());
    }
    doc.join(" \n ")
}

/// `1st`, `2nd`, `3rd`, `4th`, …, `11th`, `12th`, `13th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 111].map(ordinal).into();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "111th"
            ]
        );
    }
}
