//! Plant expressions (CEL) in plain words, for prompts read by a model.

/// A CEL expression in plain words: `abs(x - params.t) <= 0.2 && !moving` →
/// `abs(x - the requested t) is at most 0.2 and moving is false`.
pub(crate) fn in_words(src: &str) -> String {
    let src = src.trim();
    if is_ident(src) {
        return format!("{} is true", names(src));
    }
    if let Some(rest) = src.strip_prefix('!')
        && is_ident(rest.trim())
    {
        return format!("{} is false", names(rest.trim()));
    }
    let mut out = String::new();
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            // A string literal stays as written.
            out.push(c);
            for q in chars.by_ref() {
                out.push(q);
                if q == c {
                    break;
                }
            }
            continue;
        }
        let (text, pair) = match (c, chars.peek().copied()) {
            ('&', Some('&')) => (" and ", true),
            ('|', Some('|')) => (" or ", true),
            ('=', Some('=')) => (" equals ", true),
            ('!', Some('=')) => (" differs from ", true),
            ('<', Some('=')) => (" is at most ", true),
            ('>', Some('=')) => (" is at least ", true),
            ('<', _) => (" is below ", false),
            ('>', _) => (" is above ", false),
            ('!', _) => ("not ", false),
            _ => {
                out.push(c);
                continue;
            }
        };
        out.push_str(text);
        if pair {
            chars.next();
        }
    }
    names(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `params.x` → `the requested x`; `devices.d.s` → `d.s`.
fn names(s: &str) -> String {
    s.replace("params.", "the requested ")
        .replace("devices.", "")
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::in_words;

    #[test]
    fn expressions_read_as_words() {
        assert_eq!(in_words("fault"), "fault is true");
        assert_eq!(in_words("!moving"), "moving is false");
        assert_eq!(
            in_words("abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault"),
            "abs(position_mm - the requested target_mm) is at most 0.2 and not moving and not fault"
        );
        assert_eq!(
            in_words("contact == params.on"),
            "contact equals the requested on"
        );
        assert_eq!(
            in_words("!devices.slide.fault && !devices.slide.moving"),
            "not slide.fault and not slide.moving"
        );
        assert_eq!(in_words("a < 1 || b > 2"), "a is below 1 or b is above 2");
        assert_eq!(in_words("x != \"a==b\""), "x differs from \"a==b\"");
    }
}
