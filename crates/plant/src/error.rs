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
    /// Each problem with the part of the report it belongs to.
    errors: Vec<(Section, PlantError)>,
    /// The part new problems go to.
    section: Section,
    /// Places whose value is known to be wrong for a reason already reported (an unset
    /// `${env:NAME}`): follow-on errors there would only mislead.
    muted: Vec<(Option<String>, String)>,
}

impl Sink {
    pub(crate) fn new(file: &str) -> Sink {
        Sink {
            file: file.to_string(),
            errors: Vec::new(),
            section: Section::Rest,
            muted: Vec::new(),
        }
    }

    /// Sends the problems recorded from now on to `section` of the report.
    pub(crate) fn section(&mut self, section: Section) {
        self.section = section;
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
        let error = PlantError {
            file: self.file.clone(),
            device: device.map(str::to_string),
            key: (!key.is_empty()).then(|| key.to_string()),
            line: None,
            message: message.into(),
        };
        self.errors.push((self.section.clone(), error));
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
        let error = PlantError {
            file: self.file.clone(),
            device,
            key,
            line: Some(line),
            message,
        };
        self.errors.push((self.section.clone(), error));
    }

    pub(crate) fn count(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, PlantErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self.into_errors())
        }
    }

    /// The problems, section by section, each section's in the order they were found. A place
    /// muted after a problem there was found still silences it, unless that problem is itself
    /// an unset variable's: devices are checked as the file is read, and a later device of the
    /// same id may mute a key an earlier one already reported.
    pub(crate) fn into_errors(mut self) -> PlantErrors {
        let muted = self.muted;
        self.errors.retain(|(section, e)| {
            matches!(section, Section::Env(_))
                || !muted
                    .iter()
                    .any(|(d, k)| *d == e.device && e.key.as_deref().unwrap_or("") == k)
        });
        self.errors.sort_by(|a, b| a.0.cmp(&b.0));
        PlantErrors(self.errors.into_iter().map(|(_, e)| e).collect())
    }
}

/// The parts of a report, in the order they are shown. A hall is checked one device at a time
/// as its text is read, but the report reads as if each step had run over the whole file: the
/// unset `${env:NAME}` first (by top-level key, as the file's table orders them), then unknown
/// top-level keys, then `[server]`, then the devices, alarms and actions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    /// An unset `${env:NAME}` under this top-level key.
    Env(String),
    /// A top-level key that is not `server`, `device` or `alarm`.
    TopLevel,
    /// `[server]`.
    Server,
    /// Everything else, in the order found.
    Rest,
}

/// Joins key path segments with dots, skipping empty ones.
pub(crate) fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => prefix.to_string(),
        // An index follows its list directly: `gateways[0]`, never `gateways.[0]`.
        _ if rest.starts_with('[') => format!("{prefix}{rest}"),
        _ => format!("{prefix}.{rest}"),
    }
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
