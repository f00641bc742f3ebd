//! Reading a Markdown page's fenced blocks and the `<!-- marker -->` comments that name them, so
//! the tests that run a page (`first_plant.rs`, `first_board.rs`) read it one way: its blocks, its
//! tables (a calls table above all), and its abridged (`…`) output lines.

/// One fenced block: (the HTML comment just before it, if any; the info string; the body).
pub type Block = (Option<String>, String, String);

/// The fenced blocks of `page`, in order, each with the marker comment right before it (blank
/// lines between them allowed), so a test finds the blocks the page names for it.
pub fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut marker: Option<String> = None;
    let mut open: Option<Block> = None;
    for line in page.lines() {
        if let Some((m, info, body)) = open.as_mut() {
            if line.starts_with("```") {
                out.push((m.take(), std::mem::take(info), std::mem::take(body)));
                open = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if let Some(info) = line.strip_prefix("```") {
            open = Some((marker.take(), info.trim().to_string(), String::new()));
        } else if let Some(m) = line
            .strip_prefix("<!-- ")
            .and_then(|l| l.strip_suffix(" -->"))
        {
            marker = Some(m.to_string());
        } else if !line.trim().is_empty() {
            marker = None;
        }
    }
    out
}

/// The bodies of the blocks marked `<!-- m -->`, in page order: what a test runs or compares.
pub fn marked<'a>(blocks: &'a [Block], m: &str) -> Vec<&'a str> {
    blocks
        .iter()
        .filter(|(marker, _, _)| marker.as_deref() == Some(m))
        .map(|(_, _, body)| body.as_str())
        .collect()
}

/// The cells of the table right after `<!-- marker -->`, header and rule left out.
pub fn table(page: &str, marker: &str) -> Vec<Vec<String>> {
    page.split(&format!("<!-- {marker} -->"))
        .nth(1)
        .unwrap_or_else(|| panic!("a table marked {marker}"))
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|row| {
            let cells: Vec<String> = row.split('|').map(|c| c.trim().to_string()).collect();
            cells[1..cells.len() - 1].to_vec()
        })
        .collect()
}

/// The `code` spans of a cell, in order.
pub fn ticks(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// One row of a calls table: (tool, arguments, status, error code).
pub type Call = (String, serde_json::Value, String, String);

/// The rows of the calls table marked `<!-- marker -->` (a row is `| … | `tool {args}` |
/// `status` `CODE` … |`): the calls a test makes and what each must answer.
pub fn calls(page: &str, marker: &str) -> Vec<Call> {
    table(page, marker)
        .iter()
        .map(|c| {
            let call = c[1].trim_matches('`');
            let (tool, args) = call.split_once(' ').expect("`tool {args}`");
            let t = ticks(&c[2]);
            let code = t
                .get(1)
                .filter(|t| t.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                .cloned()
                .unwrap_or_default();
            (
                tool.to_string(),
                serde_json::from_str(args).unwrap(),
                t[0].clone(),
                code,
            )
        })
        .collect()
}

/// Whether `line` is what `want` shows, `…` standing for any text.
pub fn shows(line: &str, want: &str) -> bool {
    let pieces: Vec<&str> = want.split('…').collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return line == want;
    }
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for middle in &pieces[1..pieces.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// Each line of `want` is shown by a line of `got`, in order: printed output is what the page
/// shows, abridged (`…`) lines included.
pub fn shown_in_order(got: &str, want: &str) {
    let mut lines = got.lines();
    for w in want.lines() {
        assert!(
            lines.any(|l| shows(l, w)),
            "no line like {w:?} in order in:\n{got}"
        );
    }
}
