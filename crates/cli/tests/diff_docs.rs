//! docs/changing-a-plant.md's example runs as written: its two plant files, given to
//! `closedloop diff`, print exactly the output the page shows, and exit 1.

mod common;

use common::{closedloop, repo};

/// The fenced blocks of `lang` in `text`, in order.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        match (&mut cur, line) {
            (None, l) if l == format!("```{lang}") => cur = Some(String::new()),
            (Some(b), "```") => {
                out.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_changing_a_plant_example_prints_what_the_page_shows() {
    let page = std::fs::read_to_string(repo("docs/changing-a-plant.md")).unwrap();
    let plants = blocks(&page, "toml");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old.toml"), &plants[0]).unwrap();
    std::fs::write(dir.path().join("new.toml"), &plants[1]).unwrap();
    let console = blocks(&page, "console").remove(0);
    let shown = console
        .strip_prefix("$ closedloop diff old.toml new.toml\n")
        .and_then(|rest| rest.strip_suffix("$ echo $?\n1\n"))
        .expect("the first console block is the diff and its exit code");
    let out = closedloop()
        .current_dir(dir.path())
        .args(["diff", "old.toml", "new.toml"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
    assert_eq!(out.status.code(), Some(1));
}
