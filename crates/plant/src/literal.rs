//! Integer literals become doubles before an expression is compiled.
//!
//! docs/plant-file.md: every number is a double. `cel` 0.15 refuses to mix an int and a double in
//! arithmetic (`position_mm * 100` fails with `UnsupportedBinaryOperator("mul", Float, Int)`),
//! and plant-file authors write `100`, not `100.0`. So a tiny lexer finds decimal integer
//! literals outside strings and comments and appends `.0`. Floats (`1.5`, `.5`, `1e3`),
//! hexadecimal and unsigned (`0x1F`, `7u`) literals and identifiers (`x1`) are left as written.

/// Returns `src` with every decimal integer literal rewritten as a double (`100` → `100.0`).
pub(crate) fn doubles(src: &str) -> String {
    let b = src.as_bytes();
    let n = b.len();
    let mut inserts = Vec::new();
    let mut i = 0;
    while i < n {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            i = skip_string(b, i, false);
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < n && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < n && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            // String prefixes: r'..', b'..', rb'..' (raw strings have no escapes).
            let word = &src[start..i];
            if i < n && (b[i] == b'"' || b[i] == b'\'') && is_string_prefix(word) {
                let raw = word.contains(['r', 'R']);
                i = skip_string(b, i, raw);
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i = number(b, i, &mut inserts);
        } else {
            i += 1;
        }
    }
    let mut out = String::with_capacity(n + 2 * inserts.len());
    let mut last = 0;
    for at in inserts {
        out.push_str(&src[last..at]);
        out.push_str(".0");
        last = at;
    }
    out.push_str(&src[last..]);
    out
}

fn is_string_prefix(word: &str) -> bool {
    matches!(word.to_ascii_lowercase().as_str(), "r" | "b" | "rb" | "br")
}

/// Scans the number starting at `i`; records where `.0` goes when it is a decimal integer.
fn number(b: &[u8], mut i: usize, inserts: &mut Vec<usize>) -> usize {
    let n = b.len();
    if b[i] == b'0' && matches!(b.get(i + 1), Some(b'x' | b'X')) {
        i += 2;
        while i < n && (b[i].is_ascii_hexdigit() || b[i] == b'u' || b[i] == b'U') {
            i += 1;
        }
        return i;
    }
    let mut float = b[i] == b'.';
    if float {
        i += 1;
    }
    while i < n && b[i].is_ascii_digit() {
        i += 1;
    }
    if !float && i + 1 < n && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        float = true;
        i += 1;
        while i < n && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < n && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < n && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < n && b[j].is_ascii_digit() {
            float = true;
            i = j;
            while i < n && b[i].is_ascii_digit() {
                i += 1;
            }
        }
    }
    if i < n && (b[i] == b'u' || b[i] == b'U') {
        return i + 1;
    }
    if !float {
        inserts.push(i);
    }
    i
}

/// Returns the index after the string literal whose opening quote is at `i`.
fn skip_string(b: &[u8], i: usize, raw: bool) -> usize {
    let q = b[i];
    let n = b.len();
    let triple = i + 2 < n && b[i + 1] == q && b[i + 2] == q;
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < n {
        if b[j] == b'\\' && !raw {
            j += 2;
            continue;
        }
        if b[j] == q {
            if !triple {
                return j + 1;
            }
            if j + 2 < n && b[j + 1] == q && b[j + 2] == q {
                return j + 3;
            }
        }
        j += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::doubles;

    #[test]
    fn integers_become_doubles() {
        assert_eq!(doubles("position_mm * 100"), "position_mm * 100.0");
        assert_eq!(doubles("-5 + 0"), "-5.0 + 0.0");
        assert_eq!(doubles("min(a, 1)"), "min(a, 1.0)");
        assert_eq!(doubles("x>1&&y<2"), "x>1.0&&y<2.0");
    }

    #[test]
    fn floats_hex_unsigned_and_identifiers_stay() {
        for s in [
            "1.5", ".5", "1e3", "2.5E-3", "0x1F", "0XAB", "7u", "x1", "a_2b", "1.0",
        ] {
            assert_eq!(doubles(s), s, "{s}");
        }
    }

    #[test]
    fn strings_and_comments_stay() {
        assert_eq!(doubles("'a1' + \"2\""), "'a1' + \"2\"");
        assert_eq!(
            doubles(r#""say \"3\"" == s && 4 > 3"#),
            r#""say \"3\"" == s && 4.0 > 3.0"#
        );
        assert_eq!(doubles("'''x 1 ' 2''' + 3"), "'''x 1 ' 2''' + 3.0");
        assert_eq!(doubles(r"r'\' + 1"), r"r'\' + 1.0");
        assert_eq!(doubles("1 // 2\n+ 3"), "1.0 // 2\n+ 3.0");
    }

    #[test]
    fn non_ascii_text_survives() {
        assert_eq!(
            doubles("'°C' == unit && t > 20"),
            "'°C' == unit && t > 20.0"
        );
    }
}
