//! Reading a Markdown page's fenced blocks and the `<!-- marker -->` comments that name them, so
//! the tests that run a page (`first_plant.rs`, `first_board.rs`) read it one way.

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
