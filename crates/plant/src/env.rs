//! `${env:NAME}` in any string of the plant file, replaced before the document is typed.
//!
//! Secrets (broker passwords, token hashes) stay out of the file this way. Substitution runs on
//! the parsed TOML tree, not on the source text, so a value can never break the TOML syntax, and
//! `${...}` payload interpolations that are not `env:` are left for the expression compiler.

use std::fmt::Write as _;

/// One step of a path into the TOML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A table key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// A `${env:NAME}` whose variable is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing {
    /// Where the string is in the document.
    pub path: Vec<Seg>,
    /// The variable's name.
    pub var: String,
}

/// Replaces `${env:NAME}` in every string of `table` using `lookup`, returning the variables
/// that were not set (the strings that name them are left unchanged).
pub(crate) fn substitute(
    table: &mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Missing> {
    let mut missing = Vec::new();
    let mut path = Vec::new();
    walk_table(table, lookup, &mut path, &mut missing);
    missing
}

/// As [`substitute`], for one value (a device's table): the paths start inside it.
pub(crate) fn substitute_value(
    value: &mut toml::Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Vec<Missing> {
    let mut missing = Vec::new();
    let mut path = Vec::new();
    walk(value, lookup, &mut path, &mut missing);
    missing
}

/// A step of the path being walked, borrowed from the document: the path is copied only for
/// a variable that is not set, not for each of a hall's hundred thousand keys.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn owned(path: &[Step]) -> Vec<Seg> {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => Seg::Key(k.to_string()),
            Step::Index(i) => Seg::Index(*i),
        })
        .collect()
}

fn walk_table<'a>(
    table: &'a mut toml::Table,
    lookup: &dyn Fn(&str) -> Option<String>,
    path: &mut Vec<Step<'a>>,
    missing: &mut Vec<Missing>,
) {
    for (k, v) in table.iter_mut() {
        path.push(Step::Key(k));
        walk(v, lookup, path, missing);
        path.pop();
    }
}

fn walk<'a>(
    value: &'a mut toml::Value,
    lookup: &dyn Fn(&str) -> Option<String>,
    path: &mut Vec<Step<'a>>,
    missing: &mut Vec<Missing>,
) {
    match value {
        toml::Value::String(s) => match expand(s, lookup) {
            Ok(Some(new)) => *s = new,
            Ok(None) => {}
            Err(vars) => missing.extend(vars.into_iter().map(|var| Missing {
                path: owned(path),
                var,
            })),
        },
        toml::Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(Step::Index(i));
                walk(item, lookup, path, missing);
                path.pop();
            }
        }
        toml::Value::Table(t) => walk_table(t, lookup, path, missing),
        _ => {}
    }
}

/// Expands one string: `Ok(None)` when it holds no `${env:...}`, `Err` with the unset names.
pub(crate) fn expand(
    s: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, Vec<String>> {
    const OPEN: &str = "${env:";
    if !s.contains(OPEN) {
        return Ok(None);
    }
    let mut out = String::with_capacity(s.len());
    let mut unset = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find('}') else {
            // Not a reference after all: keep the text as written.
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let name = &after[..end];
        match lookup(name) {
            Some(v) => out.push_str(&v),
            None => {
                unset.push(name.to_string());
                let _ = write!(out, "${{env:{name}}}");
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if unset.is_empty() {
        Ok(Some(out))
    } else {
        Err(unset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "PW").then(|| "s3cret".to_string())
    }

    #[test]
    fn replaces_set_variables_and_reports_unset_ones() {
        assert_eq!(expand("plain", &env), Ok(None));
        assert_eq!(expand("a${env:PW}b", &env), Ok(Some("as3cretb".into())));
        assert_eq!(expand("${env:NOPE}", &env), Err(vec!["NOPE".into()]));
        assert_eq!(expand("${params.on}", &env), Ok(None));
        assert_eq!(expand("${env:PW", &env), Ok(Some("${env:PW".into())));
    }

    #[test]
    fn walks_nested_tables_and_arrays() {
        let mut t: toml::Table = "[[device]]\nid = \"x\"\ndriver = { password = \"${env:GONE}\" }"
            .parse()
            .unwrap();
        let missing = substitute(&mut t, &env);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].var, "GONE");
        assert_eq!(
            missing[0].path,
            vec![
                Seg::Key("device".into()),
                Seg::Index(0),
                Seg::Key("driver".into()),
                Seg::Key("password".into())
            ]
        );
    }
}
