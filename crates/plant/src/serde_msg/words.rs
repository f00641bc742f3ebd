//! What a plant-file value must be, in plain words with an example, from serde's "expected"
//! text and the key it is at.

/// What kind of value a key wants, for choosing examples and hints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Whole,
    Number,
    Bool,
    Text,
    List,
    Table,
    Other,
}

/// The value serde found, from its "invalid type: ..." text.
#[derive(Debug, PartialEq)]
pub(super) enum Found<'a> {
    /// A string, with its quotes as written in the message.
    Str(&'a str),
    /// A number or bool, as written.
    Literal(&'a str),
    List,
    Table,
    /// A list of this many elements (serde's "invalid length").
    Length(&'a str),
    /// Nothing worth repeating (serde's "unit variant" for an enum given a number).
    Unknown,
}

impl<'a> Found<'a> {
    pub(super) fn parse(found: &'a str) -> Found<'a> {
        let literal = ["integer `", "floating point `", "boolean `"]
            .iter()
            .find_map(|p| found.strip_prefix(p)?.strip_suffix('`'));
        match found {
            _ if literal.is_some() => Found::Literal(literal.unwrap_or_default()),
            "sequence" => Found::List,
            "map" => Found::Table,
            _ => match found.strip_prefix("string ") {
                Some(s) => Found::Str(s),
                None => Found::Unknown,
            },
        }
    }

    /// The text inside the quotes of a string.
    fn unquoted(&self) -> Option<&'a str> {
        match self {
            Found::Str(s) => s.strip_prefix('"')?.strip_suffix('"'),
            _ => None,
        }
    }

    fn shown(&self) -> Option<String> {
        match self {
            Found::Str(s) | Found::Literal(s) => Some(s.to_string()),
            Found::List => Some("a list".into()),
            Found::Table => Some("a table".into()),
            Found::Length(n) => Some(format!("a list of {n}")),
            Found::Unknown => None,
        }
    }
}

/// How serde shows a TOML value in "invalid type: ...", to find the value an error is about.
pub(super) fn unexpected(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("string {s:?}"),
        toml::Value::Integer(i) => format!("integer `{i}`"),
        toml::Value::Float(f) if f.is_finite() && f.fract() == 0.0 => {
            format!("floating point `{f:.1}`")
        }
        toml::Value::Float(f) => format!("floating point `{f}`"),
        toml::Value::Boolean(b) => format!("boolean `{b}`"),
        toml::Value::Array(_) => "sequence".into(),
        toml::Value::Table(_) => "map".into(),
        toml::Value::Datetime(_) => "datetime".into(),
    }
}

/// `poll_ms must be a whole number of milliseconds, like 20 (no quotes)`: `subject` is the
/// key as the user reads it, `path` the table keys (to tell a param's `type` from a signal's).
pub(super) fn must_be(subject: &str, path: &[&str], found: Found, expected: &str) -> String {
    let leaf = path.last().copied().unwrap_or(subject);
    let (kind, what) = expectation(leaf, path, expected);
    let mut msg = format!("{subject} must be {what}");
    // A value of the right kind written in quotes: show it without them.
    let quoted_right = found.unquoted().is_some_and(|s| match kind {
        Kind::Whole => s.trim().parse::<i64>().is_ok(),
        Kind::Number => s.trim().parse::<f64>().is_ok(),
        Kind::Bool => s == "true" || s == "false",
        _ => false,
    });
    let example = match (&found, kind) {
        (_, _) if quoted_right => found.unquoted().map(|s| s.trim().to_string()),
        (Found::Literal(l), Kind::Text) => Some(format!("\"{l}\"")),
        // A table's description carries its own example: a second one would contradict it.
        (_, Kind::Table) if what.contains(" like ") => None,
        _ => example(leaf, kind).map(str::to_string),
    };
    if let Some(x) = example {
        // "a table like { ... }" reads as one phrase; "a number, like 3" needs the pause.
        let sep = if kind == Kind::Table { "" } else { "," };
        msg.push_str(&format!("{sep} like {x}"));
    }
    if matches!(found, Found::Str(_)) && matches!(kind, Kind::Whole | Kind::Number | Kind::Bool) {
        msg.push_str(" (no quotes)");
    }
    let same = quoted_right || matches!((&found, kind), (Found::Literal(_), Kind::Text));
    if let Some(shown) = found.shown().filter(|_| !same) {
        msg.push_str(&format!(", not {shown}"));
    }
    msg
}

/// The kind of value and its description in words.
fn expectation(leaf: &str, path: &[&str], expected: &str) -> (Kind, String) {
    let enum_like = expected == "string only" || expected.starts_with("enum ");
    if let Some(names) = choices(leaf, path).filter(|_| enum_like) {
        let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        return (
            Kind::Other,
            format!("one of {} (in quotes)", quoted.join(", ")),
        );
    }
    if leaf == "token" && expected == "a sequence" {
        return (Kind::Other, "one or more [[server.token]] tables".into());
    }
    let ms = leaf.ends_with("_ms") || leaf == "ms";
    let whole = match expected {
        "u8" => Some("a whole number from 0 to 255"),
        "u16" => Some("a whole number from 0 to 65535"),
        "u32" => Some("a whole number from 0 to 4294967295"),
        "u64" => Some("a whole number, 0 or more"),
        "i8" | "i16" | "i32" | "i64" => Some("a whole number"),
        _ => None,
    };
    if let Some(w) = whole {
        let w = if ms {
            "a whole number of milliseconds"
        } else {
            w
        };
        return (Kind::Whole, w.into());
    }
    let (kind, what) = match expected {
        "f32" | "f64" if leaf.ends_with("_s") => (Kind::Number, "a number of seconds"),
        "f32" | "f64" => (Kind::Number, "a number"),
        "a finite number" => (Kind::Number, "a finite number"),
        "a boolean" => (Kind::Bool, "true or false"),
        "a string" => (Kind::Text, "a string in quotes"),
        "a sequence" => (Kind::List, "a list in brackets"),
        "an array of length 2" => (Kind::List, "a list of two numbers"),
        "a map" => (Kind::Table, "a table"),
        "a CEL expression (a string), a number or a bool" => (
            Kind::Other,
            "an expression: a CEL string like \"position_mm > 10\", a number or true/false",
        ),
        "a CAN id of 0 or more" => (Kind::Other, "a CAN id of 0 or more, like 0x1F0"),
        _ => match expected.strip_prefix("struct ") {
            Some(name) => return (Kind::Table, table(name).into()),
            None => (Kind::Other, expected),
        },
    };
    (kind, what.into())
}

/// The names an enum key takes: for a value given as the wrong TOML type.
fn choices(leaf: &str, path: &[&str]) -> Option<&'static [&'static str]> {
    Some(match leaf {
        "type" if path.contains(&"params") => &["bool", "number", "integer", "string"],
        "type" => &[
            "bool", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64",
        ],
        "word_order" => &["big", "little"],
        "verification" => &["feedback", "readback", "none"],
        "tools" => &["per_action", "generic"],
        _ => return None,
    })
}

/// A table of a known shape, with an example.
fn table(name: &str) -> &'static str {
    match name {
        "RawParam" => "a table like { type = \"number\", min = 0.0 }",
        "RawLiveness" => "a table like { max_silence_s = 2.0 }",
        "RawCounter" => "a table like { holding = 0 }",
        "RawSignal" => "a table like { holding = 0, type = \"u16\" }",
        "RawWrite" => "a table like { coil = 0, value = \"true\" }",
        "RawToken" => "a [[server.token]] table with name, sha256 and scopes",
        "RawSimCan" => {
            "a table like { bus = \"can0\", dbc = \"node.dbc\", status = \"Status\", command = \"Command\" }"
        }
        "RawServer" => "a [server] table",
        "RawAction" => "a [[device.action]] table",
        "SimConfig" => "a table like { model = \"relay\" }",
        "FaultConfig" => "a table like { kind = \"stall\", after_ms = 500 }",
        _ => "a table",
    }
}

/// A typical value of the key, as it would be written in the file.
pub(super) fn example(leaf: &str, kind: Kind) -> Option<&'static str> {
    Some(match (leaf, kind) {
        ("poll_ms" | "timeout_floor_ms" | "cycle_ms", _) => "100",
        ("hold_ms" | "timeout_ms" | "after_ms", _) => "500",
        ("period_ms" | "ms", _) => "50",
        ("pull_in_ms", _) => "10",
        ("down_ms", _) => "1000",
        ("timeout_factor", _) => "3",
        ("queue_timeout_s", _) => "10",
        ("max_silence_s", _) => "2.0",
        ("confirm_ttl_s", _) => "120",
        ("default_wait_s", _) => "2",
        ("retain", _) => "\"30d\"",
        ("lease_s", _) => "5",
        ("otlp", _) => "\"http://127.0.0.1:4318\"",
        ("journal_key", _) => "\"${env:CLOSEDLOOP_JOURNAL_KEY}\"",
        ("heartbeat_s", _) => "1.0",
        ("coil" | "discrete_input" | "holding" | "input" | "bit", _) => "0",
        ("unit", Kind::Whole) => "1",
        ("unit", _) => "\"mm\"",
        ("qos", _) => "1",
        ("baud", _) => "19200",
        ("bitrate", _) => "500000",
        ("scale", _) => "0.01",
        ("name", _) => "\"move_to\"",
        ("model", _) => "\"relay\"",
        ("write" | "cancel", _) => "[{ coil = 0, value = \"true\" }]",
        ("scopes", _) => "[\"read\"]",
        ("confirm_by", _) => "[\"operator\"]",
        ("gateways", _) => "[\"cell_a\"]",
        ("true_values", _) => "[\"ON\", \"1\"]",
        ("false_values", _) => "[\"OFF\", \"0\"]",
        ("enum", _) => "[\"fast\", \"slow\"]",
        ("args", _) => "[\"params.speed\", 1]",
        ("faults", _) => "[{ kind = \"stall\" }]",
        ("travel_mm", _) => "[0.0, 300.0]",
        ("fail_when", _) => "{ MOTOR_STALL = \"fault\" }",
        ("params", _) => "{ target_mm = { type = \"number\", min = 0.0 } }",
        ("signals", Kind::Table) => "{ Enable = \"true\" }",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Verification;
    use crate::params::ParamType;
    use crate::plant::ToolMode;
    use closedloop_contract::{ValueType, WordOrder};

    fn names_parse<T: serde::de::DeserializeOwned>(leaf: &str, path: &[&str]) {
        for n in choices(leaf, path).unwrap() {
            let v = toml::Value::String(n.to_string());
            assert!(v.try_into::<T>().is_ok(), "{leaf}: {n}");
        }
    }

    #[test]
    fn listed_choices_are_the_enums_own_names() {
        names_parse::<ValueType>("type", &["type"]);
        names_parse::<ParamType>("type", &["params", "x", "type"]);
        names_parse::<WordOrder>("word_order", &[]);
        names_parse::<Verification>("verification", &[]);
        names_parse::<ToolMode>("tools", &[]);
    }

    #[test]
    fn found_values_are_read_back() {
        assert_eq!(Found::parse("string \"20\""), Found::Str("\"20\""));
        assert_eq!(Found::parse("integer `-5`"), Found::Literal("-5"));
        assert_eq!(Found::parse("floating point `2.5`"), Found::Literal("2.5"));
        assert_eq!(Found::parse("boolean `true`"), Found::Literal("true"));
        assert_eq!(Found::parse("sequence"), Found::List);
        assert_eq!(Found::parse("unit variant"), Found::Unknown);
    }

    #[test]
    fn messages_say_what_to_write() {
        let s = |found, expected, path: &[&str]| {
            must_be(path.join(".").as_str(), path, Found::parse(found), expected)
        };
        assert_eq!(
            s("string \"20\"", "u64", &["poll_ms"]),
            "poll_ms must be a whole number of milliseconds, like 20 (no quotes)"
        );
        assert_eq!(
            s("string \"fast\"", "u64", &["poll_ms"]),
            "poll_ms must be a whole number of milliseconds, like 100 (no quotes), not \"fast\""
        );
        assert_eq!(
            s("floating point `2.5`", "u64", &["hold_ms"]),
            "hold_ms must be a whole number of milliseconds, like 500, not 2.5"
        );
        assert_eq!(
            s("string \"yes\"", "a boolean", &["raw_access"]),
            "raw_access must be true or false (no quotes), not \"yes\""
        );
        assert_eq!(
            s("integer `3`", "a string", &["unit"]),
            "unit must be a string in quotes, like \"3\""
        );
        assert_eq!(
            s("unit variant", "string only", &["signals", "x", "type"]).as_str(),
            "signals.x.type must be one of \"bool\", \"u16\", \"i16\", \"u32\", \"i32\", \"u64\", \
             \"i64\", \"f32\", \"f64\" (in quotes)"
        );
        assert_eq!(
            s("integer `3`", "a sequence", &["write"]),
            "write must be a list in brackets, like [{ coil = 0, value = \"true\" }], not 3"
        );
    }
}
