//! Okapi BM25 over the plant's action tools: which tool a request in words matches best.
//!
//! A model picks a tool from its name and description much as a search engine picks a
//! document for a query: by the words they share, weighted by how rare each word is among the
//! tools. BM25 is the standard measure for that, cheap and deterministic, so
//! `closedloop lint --examples` uses it to predict which tool a request would go to. It is a
//! proxy: a model also understands synonyms, which BM25 does not. A request that BM25 sends to
//! the wrong tool therefore shares more words with that tool than with its own — worth a
//! better description even when a model would get it right.

use super::words::STOP_WORDS;
use std::collections::HashMap;

/// Term-frequency saturation: how quickly repeating a word stops adding to the score.
pub const K1: f64 = 1.2;
/// Length normalisation: how much a long document is penalised for having more words.
pub const B: f64 = 0.75;

/// The words of `text` as retrieval compares them: lower case, split on every character that
/// is not a letter or digit, stop words dropped, each word stemmed with [`stem`].
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A tiny suffix stemmer, so that "lamps", "switches", "moving" and "moved" meet "lamp",
/// "switch" and "move": plural `s`/`es`/`ies`, then `ing` or `ed` (with a doubled final
/// consonant undone, "stopped" → "stop"), then a final `e` ("move" and "moving" both become
/// "mov"). It only has to be consistent, since both sides of a comparison go through it.
pub fn stem(word: &str) -> String {
    let mut w = word.to_string();
    if w.len() > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if ["sses", "ches", "shes", "xes"]
        .iter()
        .any(|s| w.ends_with(s))
    {
        w.truncate(w.len() - 2);
    } else if w.len() > 3 && w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s))
    {
        w.pop();
    }
    let cut = if w.len() > 5 && w.ends_with("ing") {
        3
    } else if w.len() > 4 && w.ends_with("ed") && !w.ends_with("eed") {
        2
    } else {
        0
    };
    if cut > 0 {
        w.truncate(w.len() - cut);
        let b = w.as_bytes();
        let n = b.len();
        if n >= 2 && b[n - 1] == b[n - 2] && !b"aeioulsz".contains(&b[n - 1]) {
            w.pop();
        }
    }
    if w.len() > 3 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// An index of documents (one per tool) for BM25 scoring.
///
/// # Invariants
/// `postings[t]` lists each document containing term `t` once, with the term's count in it;
/// `lengths[d]` is document `d`'s token count; `avg_len` their mean (1 when all are empty, so
/// that no score divides by zero).
#[derive(Debug, Clone)]
pub struct Index {
    postings: HashMap<String, Vec<(usize, u32)>>,
    lengths: Vec<usize>,
    avg_len: f64,
}

impl Index {
    /// Indexes `docs`, each given as its text; document `i` is scored at position `i`.
    pub fn new<S: AsRef<str>>(docs: &[S]) -> Index {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(docs.len());
        for (d, text) in docs.iter().enumerate() {
            let toks = tokens(text.as_ref());
            lengths.push(toks.len());
            let mut counts: HashMap<String, u32> = HashMap::new();
            for t in toks {
                *counts.entry(t).or_default() += 1;
            }
            for (t, n) in counts {
                postings.entry(t).or_default().push((d, n));
            }
        }
        let total: usize = lengths.iter().sum();
        let avg_len = if total == 0 {
            1.0
        } else {
            total as f64 / lengths.len() as f64
        };
        Index {
            postings,
            lengths,
            avg_len,
        }
    }

    /// How many documents the index holds.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The BM25 score of every document for `query`, by document position. Each distinct
    /// query word counts once (a request that says "lamp" twice does not favour lamps more);
    /// the inverse document frequency is `ln(1 + (N − n + 0.5) / (n + 0.5))`, never negative.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let mut scores = vec![0.0; self.lengths.len()];
        let mut seen: Vec<String> = Vec::new();
        let n_docs = self.lengths.len() as f64;
        for term in tokens(query) {
            if seen.contains(&term) {
                continue;
            }
            let Some(posting) = self.postings.get(&term) else {
                seen.push(term);
                continue;
            };
            let n = posting.len() as f64;
            let idf = (1.0 + (n_docs - n + 0.5) / (n + 0.5)).ln();
            for &(d, tf) in posting {
                let tf = f64::from(tf);
                let norm = 1.0 - B + B * self.lengths[d] as f64 / self.avg_len;
                scores[d] += idf * tf * (K1 + 1.0) / (tf + K1 * norm);
            }
            seen.push(term);
        }
        scores
    }
}

/// The 1-based rank of document `own` in `scores`, counting every other document that scored
/// as high or higher: a tie is not a win, since a model choosing between equals may take
/// either. Also the best other document, if there is one.
pub fn rank(scores: &[f64], own: usize) -> (usize, Option<usize>) {
    let mine = scores.get(own).copied().unwrap_or(0.0);
    let mut rank = 1;
    let mut best: Option<usize> = None;
    for (d, &s) in scores.iter().enumerate() {
        if d == own {
            continue;
        }
        if s >= mine {
            rank += 1;
        }
        if best.is_none_or(|b| s > scores[b]) {
            best = Some(d);
        }
    }
    (rank, best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_lower_case_split_drop_stop_words_and_stem() {
        assert_eq!(
            tokens("Turn the Desk-Lamps ON, please"),
            ["turn", "desk", "lamp", "on"]
        );
        assert_eq!(tokens("°C setpoint_c"), ["c", "setpoint", "c"]);
    }

    #[test]
    fn stem_meets_plural_and_verb_forms() {
        for (a, b) in [
            ("lamps", "lamp"),
            ("switches", "switch"),
            ("moving", "move"),
            ("moved", "moves"),
            ("stopped", "stop"),
            ("batteries", "battery"),
            ("closing", "close"),
        ] {
            assert_eq!(stem(a), stem(b), "{a} / {b}");
        }
        assert_eq!(stem("speed"), "speed");
        assert_eq!(stem("glass"), "glass");
        assert_eq!(stem("status"), "status");
    }

    #[test]
    fn the_document_sharing_rare_words_ranks_first() {
        let index = Index::new(&[
            "lamp switch turn the desk lamp on or off",
            "fan switch turn the extractor fan on or off",
            "slide move to move the slide to an absolute position target mm",
        ]);
        let s = index.scores("turn on the desk lamp");
        assert_eq!(rank(&s, 0), (1, Some(1)));
        assert_eq!(rank(&s, 1).0, 2);
        let s = index.scores("move the slide to 150 mm");
        assert_eq!(rank(&s, 2), (1, Some(0)));
    }

    #[test]
    fn rarer_words_weigh_more_and_repeats_saturate() {
        let index = Index::new(&["lamp on", "fan on", "buzzer on"]);
        let s = index.scores("lamp on");
        assert!(s[0] > s[1] && s[1] > 0.0 && s[1] == s[2], "{s:?}");
        let index = Index::new(&["lamp", "lamp lamp lamp lamp"]);
        let s = index.scores("lamp lamp");
        let t = index.scores("lamp");
        assert_eq!(s, t, "a repeated query word counts once");
    }

    #[test]
    fn ties_and_no_shared_words_are_not_first() {
        let index = Index::new(&["turn lamp on", "turn fan on"]);
        let s = index.scores("turn on");
        assert_eq!(rank(&s, 0).0, 2);
        let s = index.scores("open the window");
        assert_eq!(s, [0.0, 0.0]);
        assert_eq!(rank(&s, 1).0, 2);
        let empty = Index::new::<&str>(&[]);
        assert!(empty.is_empty() && empty.scores("lamp").is_empty());
    }

    #[test]
    fn the_score_is_standard_okapi() {
        // One document of two words among two; query "lamp": n = 1, N = 2.
        let index = Index::new(&["lamp on", "fan on"]);
        let idf = (1.0f64 + (2.0 - 1.0 + 0.5) / (1.0 + 0.5)).ln();
        let expected = idf * (K1 + 1.0) / (1.0 + K1);
        assert!((index.scores("lamp")[0] - expected).abs() < 1e-12);
        assert_eq!(index.len(), 2);
    }
}
