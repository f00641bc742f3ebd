//! Serde's errors in the plant file's words.
//!
//! Each piece of the document (server, device head, signal, action, write entry) is typed with
//! serde, which says things like `invalid type: string "20", expected u64` or `expected struct
//! RawParam`, with a key path that drops array indices. A person fixing the file needs the full
//! key path, what to write in plain words with an example, and the closest valid name for a
//! misspelt key or value. So the message is parsed (serde's wording comes from
//! `serde::de::Error`'s default methods and is stable; the unit tests pin every form handled, so
//! a change shows up as a failing test, not a worse message) and the path is found again in the
//! piece's TOML value, indices included.

mod words;

use crate::error::join;
use crate::suggest::{closest_value, did_you_mean};
use words::{Found, Kind};

/// Turns a serde error from typing `piece` (found at `prefix` in the device or document) into
/// a key path and a message. `keys` lists, in order, keys of the piece's top level that were
/// taken out before typing (a device's `id`, `driver`, ...): an unknown key lists them too.
pub(crate) fn from_serde(
    e: &toml::de::Error,
    prefix: &str,
    piece: &toml::Value,
    keys: &[&str],
) -> (String, String) {
    let message = e.message().trim();
    // toml's Display appends "in `a.b`" with the table keys inside the piece, without indices.
    let shown = e.to_string();
    let inner: Vec<&str> = shown
        .lines()
        .filter_map(|l| l.strip_prefix("in `").and_then(|l| l.strip_suffix('`')))
        .next_back()
        .map(|p| p.split('.').collect())
        .unwrap_or_default();
    match Problem::parse(message) {
        Problem::UnknownKey { key, allowed } => unknown(piece, prefix, &inner, keys, key, allowed),
        Problem::MissingKey { key } => missing(piece, prefix, &inner, key),
        Problem::UnknownValue { value, allowed } => {
            let path = locate(piece, &inner, &|v| v.as_str() == Some(value));
            let leaf = inner.last().copied().unwrap_or("value");
            let names: Vec<&str> = allowed.iter().map(String::as_str).collect();
            let hint = closest_value(value, &names)
                .map(|b| format!(" (did you mean \"{b}\"?)"))
                .unwrap_or_default();
            let msg = format!(
                "{leaf} = \"{value}\" is not allowed{hint}; write one of {}",
                names.join(", ")
            );
            (join(prefix, &path), msg)
        }
        Problem::Wrong { found, expected } => wrong(piece, prefix, &inner, found, expected),
        Problem::Length { found, expected } => {
            let path = locate(piece, &inner, &|v| {
                v.as_array().is_some_and(|a| a.len().to_string() == found)
            });
            let found = Found::Length(found);
            let msg = words::must_be(&subject(prefix, &path), &inner, found, expected);
            (join(prefix, &path), msg)
        }
        Problem::Other => {
            let path = locate(piece, &inner, &|_| true);
            (join(prefix, &path), message.to_string())
        }
    }
}

/// An unknown key at `inner`: at the piece's top level, the keys taken out before typing are
/// listed among those allowed too.
fn unknown(
    piece: &toml::Value,
    prefix: &str,
    inner: &[&str],
    keys: &[&str],
    key: &str,
    mut allowed: Vec<String>,
) -> (String, String) {
    if inner.is_empty() && !keys.is_empty() {
        let mut all: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        all.extend(allowed.into_iter().filter(|k| !keys.contains(&k.as_str())));
        allowed = all;
    }
    let mut segs = inner.to_vec();
    segs.push(key);
    let path = locate(piece, &segs, &|_| true);
    (join(prefix, &path), unknown_key(key, &allowed))
}

/// A missing key, found in the first table at `inner` that lacks it, with an example value.
fn missing(piece: &toml::Value, prefix: &str, inner: &[&str], key: &str) -> (String, String) {
    let path = locate(piece, inner, &|v| {
        v.as_table().is_some_and(|t| !t.contains_key(key))
    });
    let example = words::example(key, Kind::Other)
        .map(|x| format!(", like {key} = {x}"))
        .unwrap_or_default();
    (
        join(prefix, &join(&path, key)),
        format!("missing key \"{key}\"; add it{example}"),
    )
}

/// A value of the wrong type or form, said with what it must be (and where it belongs when it
/// is a device's key written among the signals).
fn wrong(
    piece: &toml::Value,
    prefix: &str,
    inner: &[&str],
    found: &str,
    expected: &str,
) -> (String, String) {
    let path = locate(piece, inner, &|v| words::unexpected(v) == found);
    // Serde sometimes names no value ("unit variant" for an enum given a number):
    // then show the value written at the path.
    let written = match Found::parse(found) {
        Found::Unknown => at(piece, &path).map(words::unexpected),
        _ => None,
    };
    let found = Found::parse(written.as_deref().unwrap_or(found));
    let mut msg = words::must_be(&subject(prefix, &path), inner, found, expected);
    let key = join(prefix, &path);
    msg.push_str(&misplaced(&key));
    (key, msg)
}

/// A device's own key written below its `[device.signals]` header, where TOML makes it a
/// signal: says where it belongs ("; poll_ms is a key of the device: …").
fn misplaced(path: &str) -> String {
    let key = path
        .strip_prefix("signals.")
        .map(|k| k.split(['.', '[']).next().unwrap_or(k));
    match key {
        Some(key) if crate::validate::device_key(key) => format!(
            "; but {key} is a key of the device, not a signal: write it above the \
             [device.signals] header (every key below that header is a signal)"
        ),
        _ => String::new(),
    }
}

/// The key a message is about, as the user reads it: its path inside the piece, or the
/// piece's own name (`write[0]`) when the whole piece is wrong.
fn subject(prefix: &str, path: &str) -> String {
    if path.is_empty() {
        prefix.rsplit('.').next().unwrap_or(prefix).to_string()
    } else {
        path.to_string()
    }
}

/// `unknown key "drvier" (did you mean "driver"?); the keys here are id, driver, ...`.
fn unknown_key(key: &str, allowed: &[String]) -> String {
    let mut msg = format!("unknown key \"{key}\"");
    if let Some(best) = did_you_mean(key, allowed.iter().map(String::as_str)) {
        msg.push_str(&format!(" (did you mean \"{best}\"?)"));
    }
    if allowed.is_empty() {
        msg.push_str("; this table takes no keys");
    } else {
        msg.push_str(&format!("; the keys here are {}", allowed.join(", ")));
    }
    msg
}

/// The forms of serde's messages that are translated; anything else is passed on as written.
#[derive(Debug, PartialEq)]
enum Problem<'a> {
    UnknownKey {
        key: &'a str,
        allowed: Vec<String>,
    },
    MissingKey {
        key: &'a str,
    },
    UnknownValue {
        value: &'a str,
        allowed: Vec<String>,
    },
    /// `invalid type`, `invalid value` and `invalid length`: what was found, what serde wanted.
    Wrong {
        found: &'a str,
        expected: &'a str,
    },
    /// `invalid length`: how many elements a list has, what serde wanted.
    Length {
        found: &'a str,
        expected: &'a str,
    },
    Other,
}

impl<'a> Problem<'a> {
    fn parse(message: &'a str) -> Problem<'a> {
        let ticked = |rest: &'a str| rest.split_once('`').unwrap_or((rest, ""));
        if let Some(rest) = message.strip_prefix("unknown field `") {
            let (key, expected) = ticked(rest);
            return Problem::UnknownKey {
                key,
                allowed: backticked(expected),
            };
        }
        if let Some(rest) = message.strip_prefix("missing field `") {
            return Problem::MissingKey {
                key: ticked(rest).0,
            };
        }
        if let Some(rest) = message.strip_prefix("unknown variant `") {
            let (value, expected) = ticked(rest);
            return Problem::UnknownValue {
                value,
                allowed: backticked(expected),
            };
        }
        if let Some((found, expected)) = message
            .strip_prefix("invalid length ")
            .and_then(|rest| rest.split_once(", expected "))
        {
            return Problem::Length { found, expected };
        }
        let wrong = ["invalid type: ", "invalid value: "]
            .iter()
            .find_map(|p| message.strip_prefix(p));
        // The found value may itself contain ", expected " (a string); serde's part never does.
        match wrong.and_then(|rest| rest.rsplit_once(", expected ")) {
            Some((found, expected)) => Problem::Wrong { found, expected },
            None => Problem::Other,
        }
    }
}

/// The names written between backticks in a serde "expected ..." text.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The path of `segs` (table keys) inside `v`, with the index of each array passed through:
/// the first route whose end satisfies `fits` (or, failing that, any route that exists). A
/// value at the end that is an array is searched too, for an element that fits.
fn locate(v: &toml::Value, segs: &[&str], fits: &dyn Fn(&toml::Value) -> bool) -> String {
    walk(v, segs, fits)
        .or_else(|| walk(v, segs, &|_| true))
        .unwrap_or_else(|| segs.join("."))
}

/// The value at a path as [`locate`] renders it (`faults[1].after`).
fn at<'v>(v: &'v toml::Value, path: &str) -> Option<&'v toml::Value> {
    let mut cur = v;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        let key = pieces.next().unwrap_or_default();
        if !key.is_empty() {
            cur = cur.get(key)?;
        }
        for index in pieces {
            cur = cur.get(index.trim_end_matches(']').parse::<usize>().ok()?)?;
        }
    }
    Some(cur)
}

fn walk(v: &toml::Value, segs: &[&str], fits: &dyn Fn(&toml::Value) -> bool) -> Option<String> {
    let index = |i: usize, rest: String| {
        if rest.is_empty() || rest.starts_with('[') {
            format!("[{i}]{rest}")
        } else {
            format!("[{i}].{rest}")
        }
    };
    match (segs.split_first(), v) {
        (None, _) if fits(v) => Some(String::new()),
        (None, toml::Value::Array(items)) => items.iter().position(fits).map(|i| format!("[{i}]")),
        (None, _) => None,
        (Some(_), toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .find_map(|(i, e)| walk(e, segs, fits).map(|rest| index(i, rest))),
        (Some((first, rest)), toml::Value::Table(t)) => {
            let below = walk(t.get(*first)?, rest, fits)?;
            Some(match below.is_empty() || below.starts_with('[') {
                true => format!("{first}{below}"),
                false => format!("{first}.{below}"),
            })
        }
        (Some(_), _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(src: &str) -> toml::Value {
        toml::Value::Table(src.parse().unwrap())
    }

    #[test]
    fn serde_messages_are_parsed() {
        assert_eq!(
            Problem::parse("unknown field `x`, expected `a` or `b`"),
            Problem::UnknownKey {
                key: "x",
                allowed: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            Problem::parse("unknown field `x`, there are no fields"),
            Problem::UnknownKey {
                key: "x",
                allowed: vec![]
            }
        );
        assert_eq!(
            Problem::parse("invalid type: string \"a, expected b\", expected u64"),
            Problem::Wrong {
                found: "string \"a, expected b\"",
                expected: "u64"
            }
        );
        assert_eq!(
            Problem::parse("invalid length 1, expected an array of length 2"),
            Problem::Length {
                found: "1",
                expected: "an array of length 2"
            }
        );
        assert_eq!(Problem::parse("something else"), Problem::Other);
    }

    #[test]
    fn paths_get_their_array_indices_back() {
        let v = value("faults = [{ kind = \"nak\" }, { kind = \"stall\", after = 3 }]");
        let has = |k: &'static str| move |v: &toml::Value| v.get(k).is_some();
        assert_eq!(
            locate(&v, &["faults", "after"], &|_| true),
            "faults[1].after"
        );
        assert_eq!(locate(&v, &["faults"], &has("after")), "faults[1]");
        let v = value("true_values = [\"on\", 1]");
        let int = |v: &toml::Value| v.is_integer();
        assert_eq!(locate(&v, &["true_values"], &int), "true_values[1]");
        assert_eq!(locate(&v, &["nowhere"], &int), "nowhere");
        assert_eq!(at(&v, "true_values[1]"), Some(&toml::Value::Integer(1)));
        assert_eq!(at(&v, ""), Some(&v));
    }
}
