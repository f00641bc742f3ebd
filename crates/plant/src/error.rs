//! Errors of the plant file, each naming the file, the device, the key and the fix.
//!
//! A person fixing a plant file reads these messages, usually from `closedloop check`, so every
//! one says where (file, device id, key path such as `action.move_to.done_when`) and what to do.
//! Loading collects all of them instead of stopping at the first, so one run shows every problem.

use std::fmt;

/// One problem found in a plant file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantError {
    /// The file as the user named it (`workshop.toml`).
    pub file: String,
    /// The id of the device the problem is in, when it is inside one.
    pub device: Option<String>,
    /// The key path inside the device (`action.switch.done_when`) or the document
    /// (`server.journal`, `device[2].id` for a device without a usable id).
    pub key: Option<String>,
    /// Line and column (1-based), known for TOML syntax errors only.
    pub line: Option<(usize, usize)>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for PlantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some((line, col)) = self.line {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": ")?;
        match (&self.device, &self.key) {
            (Some(d), Some(k)) => write!(f, "device \"{d}\", key {k}: ")?,
            (Some(d), None) => write!(f, "device \"{d}\": ")?,
            (None, Some(k)) => write!(f, "key {k}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlantError {}

/// Every problem found in a plant file, in file order. Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantErrors(pub Vec<PlantError>);

impl PlantErrors {
    /// The individual problems.
    pub fn iter(&self) -> impl Iterator<Item = &PlantError> {
        self.0.iter()
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no problem was found (never true for a returned error).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for PlantErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PlantErrors {}

/// Collects errors while validating, so that one pass reports every problem.
pub(crate) struct Sink {
    file: String,
    errors: Vec<PlantError>,
    /// Places whose value is known to be wrong for a reason already reported (an unset
    /// `${env:NAME}`): follow-on errors there would only mislead.
    muted: Vec<(Option<String>, String)>,
}

impl Sink {
    pub(crate) fn new(file: &str) -> Sink {
        Sink {
            file: file.to_string(),
            errors: Vec::new(),
            muted: Vec::new(),
        }
    }

    /// Records a problem at `key` (empty: none) of `device` (None: outside any device).
    pub(crate) fn push(&mut self, device: Option<&str>, key: &str, message: impl Into<String>) {
        if self
            .muted
            .iter()
            .any(|(d, k)| d.as_deref() == device && k == key)
        {
            return;
        }
        self.errors.push(PlantError {
            file: self.file.clone(),
            device: device.map(str::to_string),
            key: (!key.is_empty()).then(|| key.to_string()),
            line: None,
            message: message.into(),
        });
    }

    /// Reports nothing more at `key` of `device`.
    pub(crate) fn mute(&mut self, device: Option<&str>, key: &str) {
        self.muted
            .push((device.map(str::to_string), key.to_string()));
    }

    /// Records a problem with a known position (TOML syntax errors).
    pub(crate) fn push_at(
        &mut self,
        device: Option<String>,
        key: Option<String>,
        line: (usize, usize),
        message: String,
    ) {
        self.errors.push(PlantError {
            file: self.file.clone(),
            device,
            key,
            line: Some(line),
            message,
        });
    }

    pub(crate) fn count(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, PlantErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(PlantErrors(self.errors))
        }
    }

    pub(crate) fn into_errors(self) -> PlantErrors {
        PlantErrors(self.errors)
    }
}

/// Joins key path segments with dots, skipping empty ones.
pub(crate) fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => prefix.to_string(),
        _ => format!("{prefix}.{rest}"),
    }
}

/// Turns a serde error from typing a piece of the document at `prefix` into a key and a
/// message that says what to write instead.
pub(crate) fn from_serde(e: &toml::de::Error, prefix: &str) -> (String, String) {
    let message = e.message().trim().to_string();
    // toml's Display appends "in `a.b`" with the path inside the piece being typed.
    let shown = e.to_string();
    let inner = shown
        .lines()
        .filter_map(|l| l.strip_prefix("in `").and_then(|l| l.strip_suffix('`')))
        .next_back()
        .unwrap_or("");
    let key = join(prefix, inner);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed = backticked(expected);
        let mut msg = format!("unknown key \"{field}\"");
        if let Some(best) = did_you_mean(field, allowed.iter().map(String::as_str)) {
            msg.push_str(&format!(" (did you mean \"{best}\"?)"));
        }
        if allowed.is_empty() {
            msg.push_str("; this table takes no keys");
        } else {
            msg.push_str(&format!("; the keys here are {}", allowed.join(", ")));
        }
        return (join(&key, field), msg);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or(rest);
        return (
            join(&key, field),
            format!("missing key \"{field}\"; add it"),
        );
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let (value, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let allowed = backticked(expected);
        let mut msg = format!("\"{value}\" is not allowed here");
        if let Some(best) = did_you_mean(value, allowed.iter().map(String::as_str)) {
            msg.push_str(&format!(" (did you mean \"{best}\"?)"));
        }
        msg.push_str(&format!("; write one of {}", allowed.join(", ")));
        return (key, msg);
    }
    (key, message)
}

/// The names written between backticks in a serde "expected ..." text.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

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

    #[test]
    fn display_names_file_device_and_key() {
        let e = PlantError {
            file: "workshop.toml".into(),
            device: Some("lamp".into()),
            key: Some("action.switch.done_when".into()),
            line: None,
            message: "unknown name".into(),
        };
        assert_eq!(
            e.to_string(),
            "workshop.toml: device \"lamp\", key action.switch.done_when: unknown name"
        );
    }

    #[test]
    fn suggestions_only_for_near_misses() {
        assert_eq!(
            did_you_mean("contakt", ["commanded", "contact"]),
            Some("contact")
        );
        assert_eq!(did_you_mean("zzz", ["commanded", "contact"]), None);
        assert_eq!(did_you_mean("nmae", ["name", "journal"]), Some("name"));
        assert_eq!(did_you_mean("target", ["target_mm"]), Some("target_mm"));
    }

    #[test]
    fn errors_display_one_per_line() {
        let mut sink = Sink::new("f.toml");
        sink.push(None, "server.name", "a");
        sink.push(Some("x"), "", "b");
        assert_eq!(
            sink.into_errors().to_string(),
            "f.toml: key server.name: a\nf.toml: device \"x\": b"
        );
    }
}
