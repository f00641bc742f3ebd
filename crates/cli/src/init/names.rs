//! Names and wording for generated plant files, whatever their source: DBC names (CamelCase,
//! UPPER_CASE) turned into plant names (snake_case), TOML strings quoted, and the end of every
//! file's header.

use std::fmt::Write;

/// Whether `name` cannot name a signal or parameter: a word expressions reserve, or one of the
/// arguments every action tool has beside its parameters.
fn reserved(name: &str) -> bool {
    closedloop_plant::RESERVED_NAMES.contains(&name)
        || name == "wait_s"
        || name == "idempotency_key"
}

/// `PositionMm` → `position_mm`, `HTTPStatus` → `http_status`, `Engine_RPM` → `engine_rpm`;
/// a name that would start with a digit or be reserved gets a prefix, so it always loads.
pub fn snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1);
        let boundary = c.is_ascii_uppercase()
            && prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
            });
        if boundary && !out.ends_with('_') {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    let out = out.trim_end_matches('_').to_string();
    match out.chars().next() {
        None => "unnamed".into(),
        Some(c) if c.is_ascii_digit() => format!("s_{out}"),
        _ if reserved(&out) => format!("{out}_value"),
        _ => out,
    }
}

/// `name` cut to at most `max` characters (names are ASCII: `snake` makes them so), without a
/// trailing `_`.
pub fn fit(name: &str, max: usize) -> String {
    let cut = &name[..name.len().min(max)];
    match cut.trim_end_matches('_') {
        "" => cut.to_string(),
        t => t.to_string(),
    }
}

/// `base` cut to `max` characters, or, when `taken` already holds that, cut shorter and given
/// the first numeric suffix (`_2`, `_3`, …) that is free: a new name never repeats one.
pub fn unique(base: &str, max: usize, taken: impl Fn(&str) -> bool) -> String {
    let first = fit(base, max);
    if !taken(&first) {
        return first;
    }
    (2..)
        .map(|n| {
            let suffix = format!("_{n}");
            format!("{}{suffix}", fit(base, max.saturating_sub(suffix.len())))
        })
        .find(|c| !taken(c))
        .expect("an unbounded suffix range always finds a free name")
}

/// A TOML basic string, quoted and escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A number as TOML writes it, always with a decimal point or exponent so it reads as a float.
pub fn float(v: f64) -> String {
    let s = format!("{v}");
    if s.contains(['.', 'e', 'E']) || !v.is_finite() {
        s
    } else {
        format!("{s}.0")
    }
}

/// The name with a command or status word at its end removed (`TargetPosCmd` → `TargetPos`,
/// `PositionStatus` → `Position`), for matching a written signal with the one that mirrors it.
pub fn stem(name: &str) -> String {
    const ENDS: &[&str] = &[
        "Command", "Cmd", "Request", "Req", "Setpoint", "Set", "Status", "State", "Actual", "Act",
        "Feedback", "Fb", "Sts", "Stat",
    ];
    let snake = snake(name);
    let mut parts: Vec<&str> = snake.split('_').collect();
    if parts.len() > 1
        && let Some(last) = parts.last()
        && ENDS.iter().any(|e| e.eq_ignore_ascii_case(last))
    {
        parts.pop();
    }
    parts.join("_")
}

/// A sentence ends with a full stop (or other sentence punctuation).
pub fn sentence(s: &str) -> String {
    let s = s.trim();
    if s.ends_with(['.', '!', '?']) {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

/// The end of a generated file's header — what was skipped and what needs a person, as
/// comments — and its `[server]` table (a journal named after the server beside the file).
pub fn review_and_server(out: &mut String, (skipped, needs): (&[String], &[String]), server: &str) {
    if !skipped.is_empty() || !needs.is_empty() {
        out.push_str("#\n");
    }
    for s in skipped {
        let _ = writeln!(out, "# skipped: {}", one_line(s));
    }
    for s in needs {
        let _ = writeln!(out, "# needs a person: {}", one_line(s));
    }
    let _ = write!(
        out,
        "\n[server]\nname = {}\njournal = {}\n",
        quote(server),
        quote(&format!("sqlite://{server}.db"))
    );
}

/// Text for a `#` comment: a line break or control character (a multi-line Jinja template, a
/// name a server made up) would end the comment and break the file.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_cases_dbc_names() {
        assert_eq!(snake("PositionMm"), "position_mm");
        assert_eq!(snake("HTTPStatus"), "http_status");
        assert_eq!(snake("Engine_RPM"), "engine_rpm");
        assert_eq!(snake("2ndGear"), "s_2nd_gear");
        assert_eq!(snake("If"), "if_value");
        assert_eq!(stem("TargetCmd"), "target");
        assert_eq!(stem("Target_Status"), "target");
        assert_eq!(stem("Status"), "status");
    }

    #[test]
    fn unique_names_fit_and_never_repeat() {
        let taken = ["set_lamp", "set_lamp_2"];
        assert_eq!(unique("set_lamp", 20, |n| taken.contains(&n)), "set_lamp_3");
        assert_eq!(unique("set_a_very_long_name", 10, |_| false), "set_a_very");
        assert_eq!(
            unique("set_a_very_long_name", 10, |n| n == "set_a_very"),
            "set_a_ve_2"
        );
        assert_eq!(fit("set_a_", 6), "set_a");
    }
}
