//! What a DBC file says about its messages beyond their layout: senders, receivers, comments,
//! value tables and cycle times.
//!
//! closedloop's own parser (`closedloop_can::Dbc`) keeps only what decoding and encoding need,
//! and it has already accepted the file before this runs, so this scan can be small: it reads
//! the statements that start a line (`BU_`, `BO_`, `SG_`, `CM_`, `VAL_`, `BA_`, `BA_DEF_DEF_`)
//! from a token stream and ignores everything else.

use std::collections::HashMap;

/// One token: a bare word, a quoted string, or a punctuation character, with its line.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Punct(char),
}

/// A signal's metadata, by its `SG_` name.
#[derive(Debug, Default, Clone)]
pub struct SignalMeta {
    /// The nodes that receive it (`Vector__XXX` left out).
    pub receivers: Vec<String>,
    /// Its `CM_ SG_` comment.
    pub comment: Option<String>,
    /// Its `VAL_` table: raw value and label.
    pub values: Vec<(i64, String)>,
}

/// A message's metadata, by its raw `BO_` id (bit 31 set for an extended id).
#[derive(Debug, Default, Clone)]
pub struct MessageMeta {
    /// The transmitting node, unless the file names none (`Vector__XXX`).
    pub sender: Option<String>,
    /// Its `CM_ BO_` comment.
    pub comment: Option<String>,
    /// `GenMsgCycleTime` in ms, from `BA_` or the attribute's `BA_DEF_DEF_` default.
    pub cycle_ms: Option<f64>,
    /// Its signals' metadata, by `SG_` name.
    pub signals: HashMap<String, SignalMeta>,
}

/// Everything the generator needs from the file that closedloop's parser does not keep.
#[derive(Debug, Default, Clone)]
pub struct Meta {
    /// The `BU_` nodes, in file order.
    pub nodes: Vec<String>,
    /// `CM_ BU_` comments, by node.
    pub node_comments: HashMap<String, String>,
    /// By raw `BO_` id.
    pub messages: HashMap<u64, MessageMeta>,
}

impl Meta {
    /// The metadata of a message closedloop accepted, by its id and format.
    pub fn message(&self, id: u32, extended: bool) -> Option<&MessageMeta> {
        let raw = u64::from(id) | if extended { 0x8000_0000 } else { 0 };
        self.messages.get(&raw)
    }
}

/// Splits the text into tokens, each with its 1-based line.
fn tokenize(text: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '"' => {
                let start = line;
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' if chars.peek() == Some(&'"') => s.push(chars.next().unwrap_or('"')),
                        c => {
                            line += usize::from(c == '\n');
                            s.push(c);
                        }
                    }
                }
                out.push((Tok::Str(s), start));
            }
            c if c.is_alphanumeric() || "_.+-".contains(c) => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if !(n.is_alphanumeric() || "_.+-".contains(n)) {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                out.push((Tok::Word(w), line));
            }
            c => out.push((Tok::Punct(c), line)),
        }
    }
    out
}

/// Reads the metadata of a DBC text that closedloop's parser accepted.
pub fn scan(text: &str) -> Meta {
    let toks = tokenize(text);
    let mut meta = Meta::default();
    let mut default_cycle = None;
    let mut current: Option<u64> = None;
    let mut i = 0;
    while i < toks.len() {
        let first_on_line = i == 0 || toks[i - 1].1 != toks[i].1;
        let (Tok::Word(w), line) = &toks[i] else {
            i += 1;
            continue;
        };
        if !first_on_line {
            i += 1;
            continue;
        }
        let rest = &toks[i + 1..];
        match w.as_str() {
            "BU_" => meta.nodes = same_line_words(rest, *line, true),
            "BO_" => current = message_line(rest, &mut meta),
            "SG_" => {
                if let Some(m) = current.and_then(|id| meta.messages.get_mut(&id)) {
                    signal_line(rest, *line, m);
                }
            }
            "CM_" => comment(rest, &mut meta),
            "VAL_" => value_table(rest, &mut meta),
            "BA_" => cycle_time(rest, &mut meta),
            "BA_DEF_DEF_" => {
                if let [(Tok::Str(n), _), (Tok::Word(v), _), ..] = rest
                    && n == "GenMsgCycleTime"
                {
                    default_cycle = v.parse().ok();
                }
            }
            _ => {}
        }
        i += 1;
    }
    for m in meta.messages.values_mut() {
        m.cycle_ms = m.cycle_ms.or(default_cycle).filter(|&c: &f64| c > 0.0);
    }
    meta
}

/// The words on `line` at the start of `rest` (skipping `:` and `,`), `Vector__XXX` left out.
fn same_line_words(rest: &[(Tok, usize)], line: usize, skip_colon: bool) -> Vec<String> {
    rest.iter()
        .take_while(|(_, l)| *l == line)
        .filter_map(|(t, _)| match t {
            Tok::Word(w) if w != "Vector__XXX" => Some(w.clone()),
            Tok::Punct(':') if skip_colon => None,
            _ => None,
        })
        .collect()
}

/// `BO_ <id> <name>: <size> <sender>`: records the message, returns its id.
fn message_line(rest: &[(Tok, usize)], meta: &mut Meta) -> Option<u64> {
    let [
        (Tok::Word(id), _),
        _,
        (Tok::Punct(':'), _),
        _,
        (Tok::Word(sender), _),
        ..,
    ] = rest
    else {
        return None;
    };
    let id: u64 = id.parse().ok()?;
    let m = meta.messages.entry(id).or_default();
    m.sender = (sender != "Vector__XXX").then(|| sender.clone());
    Some(id)
}

/// `SG_ <name> [mux] : ... "<unit>" <receivers>`: records the receivers.
fn signal_line(rest: &[(Tok, usize)], line: usize, m: &mut MessageMeta) {
    let Some((Tok::Word(name), _)) = rest.first() else {
        return;
    };
    let Some(unit) = rest
        .iter()
        .take_while(|(_, l)| *l == line)
        .position(|(t, _)| matches!(t, Tok::Str(_)))
    else {
        return;
    };
    let receivers = same_line_words(&rest[unit + 1..], line, false);
    m.signals.entry(name.clone()).or_default().receivers = receivers;
}

/// `CM_ BU_ <node> "..."`, `CM_ BO_ <id> "..."`, `CM_ SG_ <id> <signal> "..."`.
fn comment(rest: &[(Tok, usize)], meta: &mut Meta) {
    match rest {
        [
            (Tok::Word(k), _),
            (Tok::Word(node), _),
            (Tok::Str(c), _),
            ..,
        ] if k == "BU_" => {
            meta.node_comments.insert(node.clone(), c.clone());
        }
        [(Tok::Word(k), _), (Tok::Word(id), _), (Tok::Str(c), _), ..] if k == "BO_" => {
            if let Ok(id) = id.parse() {
                meta.messages.entry(id).or_default().comment = Some(c.clone());
            }
        }
        [
            (Tok::Word(k), _),
            (Tok::Word(id), _),
            (Tok::Word(s), _),
            (Tok::Str(c), _),
            ..,
        ] if k == "SG_" => {
            if let Ok(id) = id.parse() {
                let m = meta.messages.entry(id).or_default();
                m.signals.entry(s.clone()).or_default().comment = Some(c.clone());
            }
        }
        _ => {}
    }
}

/// `VAL_ <id> <signal> <n> "label" ... ;`.
fn value_table(rest: &[(Tok, usize)], meta: &mut Meta) {
    let [(Tok::Word(id), _), (Tok::Word(s), _), tail @ ..] = rest else {
        return;
    };
    let Ok(id) = id.parse() else { return };
    let mut values = Vec::new();
    for pair in tail.chunks(2) {
        match pair {
            [(Tok::Word(n), _), (Tok::Str(label), _)] => {
                if let Ok(n) = n.parse() {
                    values.push((n, label.clone()));
                }
            }
            _ => break,
        }
    }
    let m = meta.messages.entry(id).or_default();
    m.signals.entry(s.clone()).or_default().values = values;
}

/// `BA_ "GenMsgCycleTime" BO_ <id> <ms>;`.
fn cycle_time(rest: &[(Tok, usize)], meta: &mut Meta) {
    if let [
        (Tok::Str(n), _),
        (Tok::Word(k), _),
        (Tok::Word(id), _),
        (Tok::Word(v), _),
        ..,
    ] = rest
        && n == "GenMsgCycleTime"
        && k == "BO_"
        && let (Ok(id), Ok(v)) = (id.parse(), v.parse())
    {
        meta.messages.entry(id).or_default().cycle_ms = Some(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_senders_receivers_comments_values_and_cycle_times() {
        let text = "BU_: Gw Lamp\nBO_ 256 LampCmd: 1 Gw\n SG_ On : 0|1@1+ (1,0) [0|1] \"\" Lamp,Gw\n\
            BA_DEF_DEF_ \"GenMsgCycleTime\" 100;\nBA_ \"GenMsgCycleTime\" BO_ 256 20;\n\
            CM_ SG_ 256 On \"1 is on,\nsays \\\"x\\\"\";\nVAL_ 256 On 0 \"off\" 1 \"on\" ;\n";
        let meta = scan(text);
        assert_eq!(meta.nodes, ["Gw", "Lamp"]);
        let m = meta.message(256, false).unwrap();
        assert_eq!(m.sender.as_deref(), Some("Gw"));
        assert_eq!(m.cycle_ms, Some(20.0));
        let s = &m.signals["On"];
        assert_eq!(s.receivers, ["Lamp", "Gw"]);
        assert_eq!(s.comment.as_deref(), Some("1 is on,\nsays \"x\""));
        assert_eq!(s.values, [(0, "off".to_string()), (1, "on".to_string())]);
    }
}
