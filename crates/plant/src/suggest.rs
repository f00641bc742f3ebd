//! "Did you mean ...?": the closest valid name for a misspelt key, value or signal.
//!
//! Typos are caught by an edit distance; names people bring from other tools (`int32`, `REAL`,
//! `double`) are too far from ours for that, so a short table maps them to our spelling.

/// The candidate closest to `word`, when it is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| {
            let prefix = word.len() >= 3 && (c.starts_with(word) || word.starts_with(c));
            (if prefix { 1 } else { distance(word, c) }, c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Like [`did_you_mean`], and for a value also the spelling of other tools for the same type
/// (`int32` → `i32`, `double` → `f64` or `number`), whichever the candidates hold.
pub(crate) fn closest_value<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let same_letters = candidates.iter().find(|c| c.eq_ignore_ascii_case(word));
    if let Some(best) = same_letters
        .copied()
        .or_else(|| did_you_mean(word, candidates.iter().copied()))
    {
        return Some(best);
    }
    let plain: String = word
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    let (_, ours) = ALIASES.iter().find(|(theirs, _)| *theirs == plain)?;
    ours.iter()
        .find_map(|o| candidates.iter().copied().find(|c| c == o))
}

/// Type names of other languages and of IEC 61131-3 PLCs → ours (register type first, then
/// parameter type).
const ALIASES: &[(&str, &[&str])] = &[
    ("boolean", &["bool"]),
    ("bit", &["bool"]),
    ("int", &["integer"]),
    ("str", &["string"]),
    ("text", &["string"]),
    ("int16", &["i16", "integer"]),
    ("short", &["i16", "integer"]),
    ("uint16", &["u16", "integer"]),
    ("ushort", &["u16", "integer"]),
    ("uint", &["u16", "integer"]),
    ("word", &["u16", "integer"]),
    ("int32", &["i32", "integer"]),
    ("dint", &["i32", "integer"]),
    ("uint32", &["u32", "integer"]),
    ("udint", &["u32", "integer"]),
    ("dword", &["u32", "integer"]),
    ("int64", &["i64", "integer"]),
    ("lint", &["i64", "integer"]),
    ("uint64", &["u64", "integer"]),
    ("ulint", &["u64", "integer"]),
    ("lword", &["u64", "integer"]),
    ("float", &["f32", "number"]),
    ("float32", &["f32", "number"]),
    ("single", &["f32", "number"]),
    ("real", &["f32", "number"]),
    ("double", &["f64", "number"]),
    ("float64", &["f64", "number"]),
    ("lreal", &["f64", "number"]),
];

/// Edit distance counting a swap of two neighbours as one edit (`nmae` → `name`).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[&str] = &[
        "bool", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64",
    ];
    const PARAM_TYPES: &[&str] = &["bool", "number", "integer", "string"];

    #[test]
    fn suggestions_only_for_near_misses() {
        assert_eq!(
            did_you_mean("contakt", ["commanded", "contact"]),
            Some("contact")
        );
        assert_eq!(did_you_mean("zzz", ["commanded", "contact"]), None);
        assert_eq!(did_you_mean("nmae", ["name", "journal"]), Some("name"));
        assert_eq!(did_you_mean("target", ["target_mm"]), Some("target_mm"));
        assert_eq!(did_you_mean("drvier", ["id", "driver"]), Some("driver"));
    }

    #[test]
    fn other_tools_type_names_map_to_ours() {
        assert_eq!(closest_value("int32", TYPES), Some("i32"));
        assert_eq!(closest_value("UINT_16", TYPES), Some("u16"));
        assert_eq!(closest_value("REAL", TYPES), Some("f32"));
        assert_eq!(closest_value("double", TYPES), Some("f64"));
        assert_eq!(closest_value("double", PARAM_TYPES), Some("number"));
        assert_eq!(closest_value("int32", PARAM_TYPES), Some("integer"));
        assert_eq!(closest_value("I32", TYPES), Some("i32"));
        assert_eq!(closest_value("int", TYPES), None);
        assert_eq!(closest_value("banana", TYPES), None);
    }
}
