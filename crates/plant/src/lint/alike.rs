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
use std::collections::HashMap;

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
    for (t, earlier) in tools.iter().zip(first_alike(&tools)) {
        if let Some((o, j)) = earlier {
            let mut sink = Sink::new(file, t.device, out);
            sink.warn(format!("action.{}.description", t.action), Rule::TooAlike, format!(
                "reads like the description of {} ({:.0}% of their words are shared): a model may pick either; say what sets them apart, or add a sentence \"Not for …\" naming the other",
                tools[o].tool_name,
                j * 100.0
            ));
        }
    }
}

/// For each tool, the first earlier one whose words it shares [`ALIKE`] of, with the share;
/// neither may say what it is not for.
///
/// Comparing every pair made `closedloop lint` of 8,000 tools with distinct descriptions take
/// 17 s. Now (prefix filtering, as set-similarity joins do it) each word is numbered by how
/// rare it is among the tools, rarest first, and each tool's words kept in that order. Two tools
/// sharing at least `k` words share one among the first `len − k + 1` of each, and a share of
/// [`ALIKE`] means at least `ALIKE × len` words in common: only those first words are indexed,
/// and a tool is compared with the earlier tools holding one of its own, in file order, until
/// one reads alike. The first word two tools share bounds what they can share (the words after
/// it in each), which rules most of them out without comparing their words.
fn first_alike(tools: &[Tool]) -> Vec<Option<(usize, f64)>> {
    let words = numbered(tools);
    let mut index: Vec<Vec<(usize, usize)>> = vec![Vec::new(); words.len()];
    let numbered_tools: Vec<Vec<usize>> = tools
        .iter()
        .map(|t| match !t.not_for && !t.words.is_empty() {
            true => sorted(t.words.iter().map(|w| words[w.as_str()])),
            false => Vec::new(),
        })
        .collect();
    let mut found = Vec::with_capacity(tools.len());
    for (i, x) in numbered_tools.iter().enumerate() {
        // Floor, not ceiling: a word more in the prefix can only add a candidate.
        let shared_at_least = (ALIKE * x.len() as f64).floor() as usize;
        let prefix = &x[..(x.len() + 1).saturating_sub(shared_at_least.max(1))];
        let lists: Vec<&[(usize, usize)]> = prefix.iter().map(|&w| &index[w][..]).collect();
        let first = candidates(lists)
            .filter(|&(o, at_x, at_y)| {
                let most = (x.len() - at_x).min(numbered_tools[o].len() - at_y);
                share(most, x.len() + numbered_tools[o].len()) >= ALIKE
            })
            .map(|(o, _, _)| (o, jaccard(x, &numbered_tools[o])))
            .find(|(_, j)| *j >= ALIKE);
        found.push(first);
        for (at, &w) in prefix.iter().enumerate() {
            index[w].push((i, at));
        }
    }
    found
}

/// Every word of the tools that may be compared, numbered from the rarest.
fn numbered<'t>(tools: &'t [Tool]) -> HashMap<&'t str, usize> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for t in tools.iter().filter(|t| !t.not_for) {
        for w in &t.words {
            *seen.entry(w.as_str()).or_default() += 1;
        }
    }
    let mut by_rarity: Vec<(usize, &str)> = seen.into_iter().map(|(w, n)| (n, w)).collect();
    by_rarity.sort_unstable();
    by_rarity
        .into_iter()
        .enumerate()
        .map(|(id, (_, w))| (w, id))
        .collect()
}

fn sorted(ids: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut v: Vec<usize> = ids.collect();
    v.sort_unstable();
    v
}

/// The share of two tools' words when `shared` of their `total` words (counted with repeats)
/// are common to both: what [`jaccard`] computes.
fn share(shared: usize, total: usize) -> f64 {
    match total - shared {
        0 => 0.0,
        all => shared as f64 / all as f64,
    }
}

/// The earlier tools in several lists ascending by tool, merged in ascending order, each once,
/// with where the first word it shares with the tool asking sits in each: the lists are in the
/// asking tool's word order, and two tools' shared words come in the same order in both.
fn candidates(mut lists: Vec<&[(usize, usize)]>) -> impl Iterator<Item = (usize, usize, usize)> {
    std::iter::from_fn(move || {
        let next = lists.iter().filter_map(|l| l.first()).map(|p| p.0).min()?;
        let mut first = None;
        for (at_x, l) in lists.iter_mut().enumerate() {
            if let Some(&(o, at_y)) = l.first()
                && o == next
            {
                first.get_or_insert((o, at_x, at_y));
                *l = &l[1..];
            }
        }
        first
    })
}

/// Shared words over all words of two sorted, repeat-free lists (0 when both are empty).
fn jaccard<T: Ord>(a: &[T], b: &[T]) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::{ALIKE, Tool, first_alike, jaccard};

    /// The rule as first written: every earlier tool compared, in file order.
    fn every_pair(tools: &[Tool]) -> Vec<Option<(usize, f64)>> {
        let eligible = |t: &Tool| !t.not_for && !t.words.is_empty();
        let found = tools.iter().enumerate().map(|(i, t)| {
            let earlier = (0..i).filter(|&o| eligible(&tools[o]));
            let mut shares = earlier.map(|o| (o, jaccard(&t.words, &tools[o].words)));
            shares.find(|(_, j)| *j >= ALIKE).filter(|_| eligible(t))
        });
        found.collect()
    }

    fn tool(words: Vec<String>, not_for: bool) -> Tool<'static> {
        let (device, action, tool_name) = ("d", "a", "d_a");
        Tool {
            device,
            action,
            tool_name,
            words,
            not_for,
        }
    }

    #[test]
    fn comparing_only_tools_that_share_a_rare_word_finds_what_every_pair_finds() {
        // A small vocabulary, so that many pairs share words and some read alike.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut alike = 0;
        for _ in 0..400 {
            let tools: Vec<Tool> = (0..next(40))
                .map(|_| {
                    let mut words: Vec<String> =
                        (0..next(9)).map(|_| format!("w{}", next(12))).collect();
                    words.sort();
                    words.dedup();
                    tool(words, next(10) == 0)
                })
                .collect();
            let want = every_pair(&tools);
            alike += want.iter().flatten().count();
            assert_eq!(first_alike(&tools), want);
        }
        assert!(alike > 1000, "the cases exercised the rule: {alike} alike");
    }

    #[test]
    fn identical_descriptions_each_name_the_first_of_them() {
        let same = || vec!["lamp".to_string(), "switch".to_string()];
        let tools: Vec<Tool> = (0..5).map(|_| tool(same(), false)).collect();
        let found = first_alike(&tools);
        assert_eq!(found[0], None);
        assert!(found[1..].iter().all(|f| *f == Some((0, 1.0))), "{found:?}");
    }
}
