//! The plant file's text parsed one `[[device]]` (or `[[alarm]]`) at a time.
//!
//! The `toml` crate parses a whole document through a token list, an event list and a spanned
//! tree before it builds the table: for a hall of 8,000 relays (4 MB of text) that is 160 MB
//! at its peak, most of it freed at once, and the allocator's work on it grew faster than the
//! file (`closedloop bench --hall`). Parsed piece by piece, each piece's scaffolding is freed
//! before the next is read. The loader goes further ([`head_and_pieces`], [`piece`]): it
//! checks each device as soon as its piece is parsed and drops the piece's tree, so the tables
//! of a whole hall (40 MB of them for 8,000 relays) never exist at once.
//!
//! The pieces give the same table as the whole text or none at all: a piece that does not
//! parse, or one whose keys could mean something else in the whole document (a `[server]` after
//! the devices, a `device = [...]` written inline), sends the caller back to parsing the whole
//! text, which also gives a syntax error its true line.

use toml::{Table, Value};

/// The root arrays of tables a piece may start with.
const PIECES: [&str; 2] = ["device", "alarm"];

/// Parses `src` as the whole document would be parsed.
pub(crate) fn parse(src: &str) -> Result<Table, toml::de::Error> {
    if let Some(table) = assemble(src) {
        return Ok(table);
    }
    src.parse()
}

/// The text before the first piece, parsed, and the pieces still to parse; `None` when the
/// file has no piece or its head names `device` or `alarm` itself (only the whole text can say
/// what those mean). A loader that parses the pieces one at a time with [`piece`], and drops
/// each before the next, never holds the whole file's tree.
pub(crate) fn head_and_pieces(src: &str) -> Option<(Table, Vec<&str>)> {
    let pieces = split(src);
    if pieces.len() < 2 {
        return None;
    }
    let head: Table = pieces[0].parse().ok()?;
    if PIECES.iter().any(|p| head.contains_key(*p)) {
        return None;
    }
    Some((head, pieces[1..].to_vec()))
}

/// One piece parsed: the array it adds to (`device` or `alarm`) and its tables; `None` when
/// the piece does not parse on its own or holds more than its array, and the whole text must
/// be parsed instead.
pub(crate) fn piece(text: &str) -> Option<(&'static str, Vec<Value>)> {
    let name = header(text.lines().next().unwrap_or(""))?;
    let mut table: Table = text.parse().ok()?;
    let Some(Value::Array(items)) = table.remove(name) else {
        return None;
    };
    table.is_empty().then_some((name, items))
}

/// The pieces parsed and joined, or `None` when the whole text must be parsed instead.
fn assemble(src: &str) -> Option<Table> {
    let (mut doc, pieces) = head_and_pieces(src)?;
    for text in pieces {
        let (name, items) = piece(text)?;
        match doc.entry(name).or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(all) => all.extend(items),
            _ => return None,
        }
    }
    Some(doc)
}

/// The text before the first piece (empty when the file starts with one), then each piece
/// (from its header line to the next).
fn split(src: &str) -> Vec<&str> {
    let mut starts = vec![0];
    let mut scan = Scan::default();
    let mut at = 0;
    for line in src.split_inclusive('\n') {
        if scan.outside() && header(line).is_some() {
            starts.push(at);
        }
        scan.line(line);
        at += line.len();
    }
    starts.push(src.len());
    starts.windows(2).map(|w| &src[w[0]..w[1]]).collect()
}

/// The array a line such as `[[device]]  # pump` opens, if it is one of [`PIECES`].
fn header(line: &str) -> Option<&'static str> {
    let code = line.split('#').next().unwrap_or("").trim();
    let name = code.strip_prefix("[[")?.strip_suffix("]]")?.trim();
    PIECES.into_iter().find(|p| *p == name)
}

/// Where a scan of the text is: in code, or inside a string that runs over lines.
#[derive(Default)]
struct Scan {
    /// The closing quotes of the multi-line string the scan is in (`"""` or `'''`).
    open: Option<&'static str>,
}

impl Scan {
    /// Whether the next line starts outside any string.
    fn outside(&self) -> bool {
        self.open.is_none()
    }

    /// Moves the scan over one line.
    fn line(&mut self, line: &str) {
        let mut rest = line;
        loop {
            rest = match self.open {
                Some(close) => match closing(rest, close) {
                    Some(after) => {
                        self.open = None;
                        after
                    }
                    None => return,
                },
                None => match self.code(rest) {
                    Some(after) => after,
                    None => return,
                },
            };
        }
    }

    /// Skips code up to the next multi-line string's opening quotes, returning what follows
    /// them; `None` when the line ends first (a comment or a one-line string may end it).
    fn code<'a>(&mut self, text: &'a str) -> Option<&'a str> {
        let mut i = 0;
        let bytes = text.as_bytes();
        while i < bytes.len() {
            match bytes[i] {
                b'#' => return None,
                q @ (b'"' | b'\'') => {
                    let triple = if q == b'"' { "\"\"\"" } else { "'''" };
                    if bytes[i..].starts_with(triple.as_bytes()) {
                        self.open = Some(triple);
                        return Some(&text[i + 3..]);
                    }
                    i = one_line_end(bytes, i);
                }
                _ => i += 1,
            }
        }
        None
    }
}

/// Where the one-line string opening at `start` ends (past its closing quote, or the line's end).
fn one_line_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 2,
            b if b == quote => return i + 1,
            b'\n' => return i,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// What follows the closing quotes `close` in `text`, if they are in it (an escaped quote in a
/// basic string does not close it).
fn closing<'a>(text: &'a str, close: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && close == "\"\"\"" {
            i += 2;
        } else if bytes[i..].starts_with(close.as_bytes()) {
            return Some(&text[i + 3..]);
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests;
