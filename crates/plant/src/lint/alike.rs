//! The pairwise rule: two tools whose descriptions say nearly the same thing.
//!
//! A model that sees "Turn the desk lamp on or off." and "Turn the floor lamp on or off." picks
//! by a word or two, and often the wrong one. The measure is the Jaccard index of the two
//! descriptions' token sets ([`super::bm25::tokens`]: stop words out, words stemmed): shared
//! words over all words. A description with a "not for …" sentence already says what it is not
//! for, so a pair where either has one is left alone.

use super::bm25::tokens;
use super::{ALIKE, Rule, Sink, Warning};
use crate::plant::Plant;

/// One tool as the rule compares it.
struct Tool<'a> {
    device: &'a str,
    action: &'a str,
    tool_name: &'a str,
    /// Sorted, without repeats.
    words: Vec<String>,
    not_for: bool,
}

/// Warns about each tool that reads like an earlier one (file order), naming the first such;
/// one warning per tool, so that n copies of one description give n − 1 warnings, not n².
/// Cost: one comparison per pair of tools, each linear in the descriptions' words.
pub(super) fn alike(file: &str, plant: &Plant, out: &mut Vec<Warning>) {
    let tools: Vec<Tool> = plant
        .devices
        .iter()
        .flat_map(|d| d.actions.iter().map(move |a| (d, a)))
        .map(|(d, a)| {
            let mut words = tokens(&a.description);
            words.sort();
            words.dedup();
            Tool {
                device: &d.id,
                action: &a.name,
                tool_name: &a.tool_name,
                words,
                not_for: a.description.to_lowercase().contains("not for"),
            }
        })
        .collect();
    for (i, t) in tools.iter().enumerate() {
        if t.not_for || t.words.is_empty() {
            continue;
        }
        let earlier = tools[..i]
            .iter()
            .filter(|o| !o.not_for)
            .map(|o| (o, jaccard(&t.words, &o.words)))
            .find(|(_, j)| *j >= ALIKE);
        if let Some((o, j)) = earlier {
            let mut sink = Sink::new(file, t.device, out);
            sink.warn(format!("action.{}.description", t.action), Rule::TooAlike, format!(
                "reads like the description of {} ({:.0}% of their words are shared): a model may pick either; say what sets them apart, or add a sentence \"Not for …\" naming the other",
                o.tool_name,
                j * 100.0
            ));
        }
    }
}

/// Shared words over all words of two sorted, repeat-free lists (0 when both are empty).
pub(super) fn jaccard(a: &[String], b: &[String]) -> f64 {
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let all = a.len() + b.len() - shared;
    if all == 0 {
        0.0
    } else {
        shared as f64 / all as f64
    }
}
