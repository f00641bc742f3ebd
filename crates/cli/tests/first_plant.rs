//! `docs/first-plant.md`'s first part (the stepper), run: its plant file (the ```toml blocks
//! marked `<!-- bench.toml -->`, joined) passes `closedloop check` with the output the page
//! shows; its deliberate mistake fails with exactly the message the page shows; the calls of its
//! table give the statuses and codes the table says, through `closedloop serve` and an MCP
//! client; and the `closedloop` command lines of its shell blocks succeed (`serve` lines are what
//! the client above started). The second part, an MQTT board, is `first_board.rs`'s.

mod common;

use common::page::{blocks, marked};
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

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

fn closedloop(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_closedloop"));
    c.current_dir(dir);
    c
}

/// The table after `<!-- calls -->`: (tool, arguments, status, error code).
fn calls(page: &str) -> Vec<(String, Value, String, String)> {
    let table = page
        .split("<!-- calls -->")
        .nth(1)
        .expect("a calls table")
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with('|'));
    let mut out = Vec::new();
    for row in table.skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let call = cells[2].trim_matches('`');
        let (tool, args) = call.split_once(' ').expect("`tool {args}`");
        let ticks: Vec<&str> = cells[3].split('`').skip(1).step_by(2).collect();
        let status = ticks[0].to_string();
        let code = ticks
            .get(1)
            .filter(|t| t.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(|t| t.to_string())
            .unwrap_or_default();
        out.push((
            tool.to_string(),
            serde_json::from_str(args).unwrap(),
            status,
            code,
        ));
    }
    out
}

#[test]
fn the_page_has_what_the_test_runs() {
    let b = blocks(page());
    assert_eq!(marked(&b, "bench.toml").len(), 4);
    assert_eq!(marked(&b, "mistake").len(), 1);
    assert_eq!(marked(&b, "mistake output").len(), 1);
    assert_eq!(marked(&b, "check output").len(), 1);
    assert_eq!(calls(page()).len(), 5);
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

    // 4. check passes and prints what the page shows (lines with … are abridged).
    let out = closedloop(dir.path())
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
    let mut printed = stdout.lines();
    for want in marked(&b, "check output")[0].lines() {
        if want.contains('…') {
            let (head, _) = want.split_once('…').unwrap();
            if !head.trim().is_empty() {
                assert!(
                    printed.any(|l| l.starts_with(head)),
                    "no line starting {head:?} in order in:\n{stdout}"
                );
            }
            continue;
        }
        assert!(
            printed.any(|l| l == want),
            "no line {want:?} in order in:\n{stdout}"
        );
    }

    // The mistake: the position_mm line replaced by the page's wrong one.
    let wrong_line = marked(&b, "mistake")[0].trim_end();
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
    let out = closedloop(mistake_dir.path())
        .args(["check", "bench.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        marked(&b, "mistake output")[0]
    );

    // 5. The calls of the table, through `closedloop serve` (stdio) and an MCP client.
    std::fs::copy(dir.path().join("bench.toml"), dir.path().join("plant.toml")).unwrap();
    let c = connect(dir.path()).await;
    let mut ids = Vec::new();
    for (tool, args, status, code) in calls(page()) {
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

    // 6. Every `closedloop` line of the page's shell blocks but `serve` (and the install line).
    // The served plant above is plant.toml; the page's lines name bench.toml, whose journal is
    // the same bench.db.
    let mut ran = 0;
    for (_, info, body) in &b {
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
            let out = closedloop(dir.path()).args(&args).output().unwrap();
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
