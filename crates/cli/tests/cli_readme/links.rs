//! The links of the README and of docs/: their targets, the anchors GitHub makes of a page's
//! headings, and which relative links do not resolve.

use crate::common::repo;

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading's text: lower case, spaces to `-`, every other character but
/// letters, digits, `-` and `_` dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown file's headings, as GitHub makes them: a repeated heading gets
/// `-1`, `-2`, … after its slug.
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut out = Vec::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of a Markdown file's inline links and images (`[text](target)`), with their
/// line numbers, outside fenced code.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in prose(text) {
        for part in line.split("](").skip(1) {
            let target = part.split(')').next().unwrap();
            let target = target.split_whitespace().next().unwrap_or("");
            out.push((n, target.to_string()));
        }
    }
    out
}

/// Every broken relative link of `file` (a path from the repository's root): a file that does
/// not exist, or an `#anchor` that no heading of the linked Markdown file makes.
pub fn broken_links(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo(file)).unwrap();
    let dir = std::path::Path::new(file).parent().unwrap();
    let mut broken = Vec::new();
    for (n, target) in links(&text) {
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            std::path::PathBuf::from(file)
        } else {
            dir.join(path)
        };
        let on_disk = repo(linked.to_str().unwrap());
        if !on_disk.exists() {
            broken.push(format!(
                "{file}:{n}: {target}: no file {}",
                linked.display()
            ));
            continue;
        }
        if let Some(anchor) = anchor {
            let page = std::fs::read_to_string(&on_disk).unwrap_or_default();
            if !anchors(&page).iter().any(|a| a == anchor) {
                broken.push(format!(
                    "{file}:{n}: {target}: no heading of {} makes #{anchor}",
                    linked.display()
                ));
            }
        }
    }
    broken
}

/// The Markdown pages whose links are checked: the README and every page of docs/.
pub fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(repo("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}
