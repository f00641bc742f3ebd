//! `closedloop bench` end to end: the bundled relays served by the real binary, every figure
//! printed beside its baseline (the bare rmcp server's, a plain loop's, closedloop's own ping for
//! the reads, physics for act-and-confirm), and an act-and-confirm latency that physics allows;
//! with several gateways on PostgreSQL (`CLOSEDLOOP_PG_URL`), commands through them and a
//! failover no faster than the lease allows.

mod common;

use std::process::Command;

/// The number in a table cell such as `12.50 ms` or `1.30 ×`.
fn number(cell: &str) -> f64 {
    cell.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number in {cell:?}"))
}

/// The cells of the table row whose figure starts with `figure`.
fn row<'a>(out: &'a str, figure: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.trim_start_matches("| ").starts_with(figure))
        .unwrap_or_else(|| panic!("no row {figure:?} in\n{out}"))
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn bench_prints_every_figure_beside_its_baseline() {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["bench", "--calls", "30", "--http", "127.0.0.1:0"])
        .output()
        .expect("closedloop bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The reads are set against closedloop's own ping, measured in the same rounds.
    for (figure, baseline) in [
        ("ping p50", "(bare rmcp)"),
        ("tools/list p50 (the same tools in both)", "(bare rmcp)"),
        ("tools/list p50, 106 tools", "(ping)"),
        ("bare rmcp's echo tool p50", "(bare rmcp ping)"),
        ("ping p50, vs a plain loop", "(plain loop)"),
        (
            "tools/list p50, vs a plain loop writing the same list",
            "(plain loop)",
        ),
        ("get_device_state p50", "(ping)"),
        ("list_devices p50", "(ping)"),
        ("get_command_status p50, finished", "(ping)"),
    ] {
        let cells = row(&stdout, figure);
        assert_eq!(cells.len(), 4, "{cells:?}");
        assert!(
            number(cells[1]) > 0.0 && number(cells[2]) > 0.0,
            "{cells:?}"
        );
        assert!(cells[2].ends_with(baseline), "{cells:?}");
        assert!(cells[3].ends_with('×'), "{cells:?}");
    }
    // Nothing can confirm a relay faster than it pulls in: a ratio below 1 would be a lie.
    for figure in ["act-and-confirm p50", "act-and-confirm p99"] {
        let cells = row(&stdout, figure);
        assert!(cells[2].ends_with("(physics)"), "{cells:?}");
        assert!(number(cells[3]) >= 1.0, "faster than physics: {cells:?}");
    }
    let throughput = row(&stdout, "act-and-confirm commands/s");
    assert!(number(throughput[1]) > 0.0, "{throughput:?}");
    // The engine alone: 64 relays pulling in within 1 ms, so no command confirms sooner.
    let engine = row(&stdout, "act-and-confirm commands/s, 64 relays at once");
    assert!(number(engine[1]) > 0.0, "{engine:?}");
    let latency = row(&stdout, "their latency p50 / p99");
    assert!(
        number(latency[1]) >= 1.0,
        "faster than physics: {latency:?}"
    );
    let per_fsync = row(&stdout, "journal writes per fsync");
    assert!(number(per_fsync[1]) >= 1.0, "{per_fsync:?}");
    let accept = row(&stdout, "durable accept p50 / p99 under 1000 commands/s");
    assert!(number(accept[1]) > 0.0, "{accept:?}");
    // The disk's own durable append: the floor of a durable accept.
    let disk = row(&stdout, "the disk alone: a 4 KiB append made durable");
    assert!(number(disk[1]) > 0.0, "{disk:?}");
    // Through MCP Streamable HTTP, 16 clients at once, every command confirmed.
    let http = row(&stdout, "act-and-confirm commands/s, 16 clients at once");
    assert!(number(http[1]) > 0.0, "{http:?}");
    let latency = row(&stdout, "their latency p50 / p99 over HTTP");
    assert!(
        number(latency[1]) >= 1.0,
        "faster than physics: {latency:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_measures_commands_through_three_gateways_and_the_failover_time() {
    let Some(db) = common::pg::Database::create("bench_gateways").await else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args([
            "bench",
            "--calls",
            "20",
            "--http",
            "127.0.0.1:0",
            "--gateways",
            "3",
        ])
        .args(["--journal", &db.url, "--failover", "2"])
        .output()
        .expect("closedloop bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let http = row(&stdout, "act-and-confirm commands/s, 16 clients at once");
    assert!(
        http[0].ends_with("3 gateways on one PostgreSQL"),
        "{http:?}"
    );
    assert!(number(http[1]) > 0.0, "{http:?}");
    // The survivor may take the device only once the dead owner's 1 s lease expired on the
    // database: at least the lease less one renewal period (a third of it) after the kill.
    let failover = row(&stdout, "owner killed (SIGKILL)");
    assert!(
        number(failover[1]) >= 600.0,
        "sooner than the lease allows: {failover:?}"
    );
    db.drop().await;
}

#[test]
fn bench_refuses_several_gateways_without_a_postgresql_journal() {
    let out = Command::new(env!("CARGO_BIN_EXE_closedloop"))
        .args(["bench", "--http", "127.0.0.1:0", "--gateways", "2"])
        .output()
        .expect("closedloop bench runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--gateways 2 needs --journal postgres://USER@HOST:PORT/DATABASE"),
        "{stderr}"
    );
}
