//! `docs/first-plant.md`'s first part (the stepper), run: its plant file (the ```toml blocks
//! marked `<!-- bench.toml -->`, joined) passes `closedloop check` with the output the page
//! shows; its deliberate mistake fails with exactly the message the page shows; the calls of its
//! table give the statuses and codes the table says, through `closedloop serve` and an MCP
//! client; and the `closedloop` command lines of its shell blocks succeed (`serve` lines are what
//! the client above started). The second part, an MQTT board, is `first_board.rs`'s.

mod common;

use common::page::{Block, blocks, calls, marked, shown_in_order};
use common::*;
use serde_json::Value;
use std::path::Path;

const WHOLE_PAGE: &str = include_str!("../../../docs/first-plant.md");

/// The heading the page's second part (an MQTT board, run by `first_board.rs`) starts with.
const PART_TWO: &str = "## 7. A relay board on MQTT";

/// The page's first part, the stepper: what this test runs.
fn page() -> &'static str {
    let at = WHOLE_PAGE
        .find(PART_TWO)
        .expect("the page has its MQTT part");
    &WHOLE_PAGE[..at]
}

/// The marker of the page's calls table.
const CALLS: &str = "calls";

#[test]
fn the_page_has_what_the_test_runs() {
    let b = blocks(page());
    assert_eq!(marked(&b, "bench.toml").len(), 4);
    assert_eq!(marked(&b, "mistake").len(), 1);
    assert_eq!(marked(&b, "mistake output").len(), 1);
    assert_eq!(marked(&b, "check output").len(), 1);
    assert_eq!(calls(page(), CALLS).len(), 5);
    // The client configuration is JSON of the shape clients read.
    let cfg: Value = serde_json::from_str(marked(&b, "client config")[0]).unwrap();
    assert_eq!(cfg["mcpServers"]["bench"]["args"][0], "serve");
    // The page never points outside the repository.
    assert!(!WHOLE_PAGE.contains("../shared"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_plant_walk_through_runs_as_written() {
    let b = blocks(page());
    let dir = tempfile::tempdir().unwrap();
    let plant = marked(&b, "bench.toml").join("\n");
    std::fs::write(dir.path().join("bench.toml"), &plant).unwrap();
    check_passes(&b, dir.path());
    the_mistake_fails(&b, &plant);
    let ids = the_calls_answer_as_the_table_says(dir.path()).await;
    the_shell_lines_run(&b, dir.path(), &ids);
}

/// Step 4: check passes and prints what the page shows (lines with … are abridged).
fn check_passes(b: &[Block], dir: &Path) {
    let out = closedloop()
        .current_dir(dir)
        .args(["check", "bench.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    shown_in_order(&stdout, marked(b, "check output")[0]);
}

/// The mistake: the position_mm line replaced by the page's wrong one fails as the page shows.
fn the_mistake_fails(b: &[Block], plant: &str) {
    let wrong_line = marked(b, "mistake")[0].trim_end();
    let wrong: String = plant
        .lines()
        .map(|l| {
            if l.starts_with("position_mm") {
                wrong_line
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(wrong, plant);
    let mistake_dir = tempfile::tempdir().unwrap();
    std::fs::write(mistake_dir.path().join("bench.toml"), wrong).unwrap();
    let out = closedloop()
        .current_dir(mistake_dir.path())
        .args(["check", "bench.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        marked(b, "mistake output")[0]
    );
}

/// Step 5: the calls of the table, through `closedloop serve` (stdio) and an MCP client: each
/// answers the table's status and code. Returns the commands' ids, in the table's order.
async fn the_calls_answer_as_the_table_says(dir: &Path) -> Vec<String> {
    std::fs::copy(dir.join("bench.toml"), dir.join("plant.toml")).unwrap();
    let c = connect(dir).await;
    let mut ids = Vec::new();
    for (tool, args, status, code) in calls(page(), CALLS) {
        let (got_status, got_code, r) = act(&c, &tool, args.clone()).await;
        assert_eq!(
            (got_status.as_str(), got_code.as_str()),
            (status.as_str(), code.as_str()),
            "{tool} {args}: {r}"
        );
        if code == "MOTOR_STALL" {
            assert_eq!(r["evidence"]["position_mm"]["value"], 70.0, "{r}");
        }
        if status == "completed" {
            assert_eq!(r["verified"], true, "{r}");
        }
        ids.push(r["command_id"].as_str().unwrap().to_string());
    }
    c.cancel().await.unwrap();
    ids
}

/// Step 6: every `closedloop` line of the page's shell blocks but `serve` (and the install line).
/// The served plant above is plant.toml; the page's lines name bench.toml, whose journal is the
/// same bench.db. `COMMAND_ID` is the second call's.
fn the_shell_lines_run(b: &[Block], dir: &Path, ids: &[String]) {
    let mut ran = 0;
    for (_, info, body) in b {
        if info != "sh" {
            continue;
        }
        for line in body.lines() {
            let line = line.split("  #").next().unwrap().trim();
            let Some(rest) = line.strip_prefix("closedloop ") else {
                continue;
            };
            if rest.starts_with("serve ") {
                continue;
            }
            let args: Vec<String> = rest
                .split_whitespace()
                .map(|w| {
                    if w == "COMMAND_ID" {
                        ids[1].clone()
                    } else {
                        w.to_string()
                    }
                })
                .collect();
            let out = closedloop().current_dir(dir).args(&args).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{line}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            match args[0].as_str() {
                "commands" => assert_eq!(text.lines().count(), 5, "{text}"),
                "trace" => assert!(text.contains("error  MOTOR_STALL"), "{text}"),
                _ => {}
            }
            ran += 1;
        }
    }
    assert_eq!(ran, 3, "check, commands and trace");
}
