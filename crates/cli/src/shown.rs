//! What the journal readers print to a terminal: every line passes [`print`], which neutralises
//! control characters. The journal holds text from devices and callers (a detail quoting a
//! payload, a caller's name, an edited row): `closedloop trace` once printed raw ESC sequences
//! from it, which a terminal would obey (clear the screen, retitle the window, hide a line).

/// Prints `line` with every control character (C0 but tab, DEL, C1) written as `\u{..}`.
pub fn print(line: &str) {
    println!("{}", safe(line));
}

/// `s` with its control characters escaped; a line break becomes `\n` so that one record stays
/// one line.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    let control = |c: char| (c.is_control() && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c);
    if !s.chars().any(control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            c if control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn control_characters_are_shown_never_obeyed() {
        assert_eq!(safe("plain text\tok"), "plain text\tok");
        assert_eq!(safe("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(safe("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        assert_eq!(safe("one\nline\r"), "one\\nline\\u{d}");
        assert_eq!(safe("c1 \u{9b}31m"), "c1 \\u{9b}31m");
        assert_eq!(safe("°C ✓"), "°C ✓");
    }
}
