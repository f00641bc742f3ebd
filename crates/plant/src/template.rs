//! MQTT payloads with `${...}` CEL interpolation (`{"on": ${params.on}, "id": "${command_id}"}`).
//!
//! Each `${...}` is compiled once at load like any other expression; rendering evaluates them
//! and splices the results in (strings as they are, numbers and bools as JSON writes them).
//! `$${` writes a literal `${`.
//!
//! A JSON payload (one that starts with `{` or `[`) is rendered as JSON: every interpolated
//! value is escaped as the content of a JSON string, and the result must parse as JSON — a
//! parameter holding `", "admin": true, "x": "` cannot add keys to a device's command.

use crate::expr::{EvalError, Expr, Scope};

/// A payload template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
    /// The payload is JSON: interpolations are escaped and the result must parse.
    json: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Expr(Expr),
}

impl Template {
    /// Splits `src` into text and compiled `${...}` expressions.
    pub fn compile(src: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = src;
        while let Some(i) = rest.find('$') {
            text.push_str(&rest[..i]);
            let after = &rest[i..];
            if let Some(after_escape) = after.strip_prefix("$${") {
                text.push_str("${");
                rest = after_escape;
            } else if let Some(body) = after.strip_prefix("${") {
                let end = closing(body).ok_or_else(|| {
                    format!(
                        "\"${{\" at byte {} has no closing \"}}\"",
                        src.len() - after.len()
                    )
                })?;
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                let inner = body[..end].trim();
                if inner.is_empty() {
                    return Err("an empty \"${}\"; write an expression inside".into());
                }
                parts.push(Part::Expr(Expr::compile(inner)?));
                rest = &body[end + 1..];
            } else {
                text.push('$');
                rest = &after[1..];
            }
        }
        text.push_str(rest);
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Template {
            json: src.trim_start().starts_with(['{', '[']),
            source: src.to_string(),
            parts,
        })
    }

    /// The payload as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The interpolated expressions, in order.
    pub fn exprs(&self) -> impl Iterator<Item = &Expr> {
        self.parts.iter().filter_map(|p| match p {
            Part::Expr(e) => Some(e),
            Part::Text(_) => None,
        })
    }

    /// Renders the payload for one command.
    pub fn render(&self, scope: &Scope) -> Result<String, EvalError> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Expr(e) if self.json => escape_json(&e.eval_text(scope)?, &mut out),
                Part::Expr(e) => out.push_str(&e.eval_text(scope)?),
            }
        }
        if self.json
            && let Err(e) = serde_json::from_str::<serde_json::Value>(&out)
        {
            return Err(EvalError::Failed {
                expr: self.source.clone(),
                message: format!(
                    "the payload is not JSON once its values are filled in ({e}); put string values inside quotes, like \"${{params.name}}\""
                ),
            });
        }
        Ok(out)
    }
}

/// Appends `text` escaped as the content of a JSON string (quotes, backslashes, control
/// characters): a number or a bool passes unchanged.
fn escape_json(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

/// Index of the `}` closing an interpolation whose body starts `body`, skipping nested braces
/// and string literals.
fn closing(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        // Another "${" before the "}" means this one was never closed.
        if c == b'$' && b.get(i + 1) == Some(&b'{') {
            return None;
        }
        match quote {
            Some(_) if c == b'\\' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'{' => depth += 1,
            None if c == b'}' && depth == 0 => return Some(i),
            None if c == b'}' => depth -= 1,
            None => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{ParamValue, Params};
    use std::collections::BTreeMap;

    #[test]
    fn renders_params_and_command_id() {
        let t = Template::compile(
            r#"{"on": ${params.on}, "level": ${params.level * 2}, "id": "${command_id}"}"#,
        )
        .unwrap();
        assert_eq!(t.exprs().count(), 3);
        let mut params = Params::new();
        params.insert("on".into(), ParamValue::Bool(true));
        params.insert("level".into(), ParamValue::Number(1.5));
        let none = BTreeMap::new();
        let devices = BTreeMap::new();
        let extra = [("command_id", "abc")];
        let scope = Scope {
            signals: &none,
            params: &params,
            devices: &devices,
            extra_strings: &extra,
        };
        assert_eq!(
            t.render(&scope).unwrap(),
            r#"{"on": true, "level": 3, "id": "abc"}"#
        );
    }

    #[test]
    fn a_string_parameter_cannot_inject_keys_into_a_json_payload() {
        let t = Template::compile(r#"{"mode": "${params.mode}", "on": true}"#).unwrap();
        let mut params = Params::new();
        let evil = r#"eco", "admin": true, "x": "\n"#;
        params.insert("mode".into(), ParamValue::String(evil.into()));
        let none = BTreeMap::new();
        let scope = Scope {
            signals: &none,
            params: &params,
            devices: &BTreeMap::new(),
            extra_strings: &[],
        };
        let out = t.render(&scope).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["mode"], serde_json::json!(evil), "{out}");
        assert_eq!(v.as_object().unwrap().len(), 2, "no key added: {out}");
        // Unquoted, a string cannot close the document either: the payload is refused.
        let t = Template::compile(r#"{"mode": ${params.mode}}"#).unwrap();
        let e = t.render(&scope).unwrap_err().to_string();
        assert!(e.contains("not JSON once its values are filled in"), "{e}");
        // A plain payload is not JSON: values go in as they are.
        let t = Template::compile("${params.mode}").unwrap();
        assert_eq!(t.render(&scope).unwrap(), evil);
    }

    #[test]
    fn literal_dollars_and_nested_braces() {
        let t = Template::compile("cost $5 $${x} ${ {'a': 1}['a'] }").unwrap();
        let none = BTreeMap::new();
        let scope = Scope {
            signals: &none,
            params: &Params::new(),
            devices: &BTreeMap::new(),
            extra_strings: &[],
        };
        assert_eq!(t.render(&scope).unwrap(), "cost $5 ${x} 1");
    }

    #[test]
    fn unclosed_and_empty_are_refused() {
        assert!(
            Template::compile("${params.on")
                .unwrap_err()
                .contains("no closing")
        );
        assert!(Template::compile("${ }").unwrap_err().contains("empty"));
    }
}
