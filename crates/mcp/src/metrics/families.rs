//! Every metric family `/metrics` may show, with its `# HELP` text and its histogram buckets:
//! a family recorded anywhere in the workspace and missing here would be scraped without a
//! `# HELP` line (the test below reads the sources for every `counter!`, `gauge!` and
//! `histogram!` and finds each here).

use metrics::Unit;

/// What kind of series a family is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Counter,
    Gauge,
    /// A histogram of this many seconds, or of this many things (`buckets`).
    Histogram(&'static [f64]),
}

/// One family: its name, kind, unit and `# HELP` text.
#[derive(Debug)]
pub(super) struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
}

/// Buckets of the duration histograms, in seconds: from a fast read to a slow answer.
pub(super) const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
/// Buckets of a command's time to truth, in seconds: from a relay's 20 ms to a move of an hour
/// (`expect_s` may be far longer than any tool call).
const COMMAND_SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0,
];
/// Buckets of the journal's writes per transaction: a count, 1 to the writer's 512 at most.
const WRITES: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

const fn family(name: &'static str, kind: Kind, unit: Unit, help: &'static str) -> Family {
    Family {
        name,
        kind,
        unit,
        help,
    }
}

use Kind::{Counter, Gauge, Histogram};
use Unit::{Count, Seconds};

/// Every family, in the order of docs/observability.md.
#[rustfmt::skip]
pub(super) const FAMILIES: &[Family] = &[
    family("closedloop_commands_total", Counter, Count,
        "Commands that ended, by final status and error code (empty for completed and sent); rejected calls included."),
    family("closedloop_command_time_to_truth_seconds", Histogram(COMMAND_SECONDS), Seconds,
        "Seconds from the device's acknowledgement of a command's write to its final status."),
    family("closedloop_tool_calls_total", Counter, Count,
        "MCP tool calls by tool and outcome: ok, error (an isError result) or protocol_error."),
    family("closedloop_tool_call_duration_seconds", Histogram(SECONDS), Seconds,
        "Seconds a tool call took to answer, wait_s included."),
    family("closedloop_device_up", Gauge, Count,
        "1 when the device answered within its max_silence_s, else 0 (offline, or no answer yet)."),
    family("closedloop_device_last_seen_age_seconds", Gauge, Seconds,
        "Seconds since the device last answered."),
    family("closedloop_device_unreadable_signals", Gauge, Count,
        "How many of the device's signals' last reads failed."),
    family("closedloop_device_poll_duration_seconds", Histogram(SECONDS), Seconds,
        "Seconds one poll cycle of a polled device took, every polled device together."),
    family("closedloop_device_last_poll_seconds", Gauge, Seconds,
        "Seconds the device's last poll cycle took."),
    family("closedloop_device_polls_missed_total", Counter, Count,
        "Poll ticks at which the device's previous cycle still ran, so none was issued: its reads come less often than its poll_ms."),
    family("closedloop_journal_write_duration_seconds", Histogram(SECONDS), Seconds,
        "Seconds from handing a journal write to the writer to its commit."),
    family("closedloop_journal_queue_depth", Gauge, Count,
        "Journal writes handed over and not committed yet."),
    family("closedloop_journal_batch_writes", Histogram(WRITES), Count,
        "Writes per journal transaction (a count, not seconds): group commit makes one serve many."),
    family("closedloop_leases_held", Gauge, Count,
        "Device leases this gateway holds (gateways sharing one PostgreSQL journal)."),
    family("closedloop_leases_taken_total", Counter, Count,
        "Device leases this gateway took: at start, and at each takeover."),
    family("closedloop_lease_rounds_total", Counter, Count,
        "Lease keeper rounds by outcome: ok, failed or abandoned."),
    family("closedloop_http_connections", Gauge, Count,
        "HTTP connections open."),
    family("closedloop_http_connections_refused_total", Counter, Count,
        "HTTP connections closed at accept, by reason: full or per_peer."),
    family("closedloop_http_auth_failures_total", Counter, Count,
        "Requests with a token that matches none (invalid) or held back after too many wrong guesses (held_back)."),
    family("closedloop_http_share_spent_total", Counter, Count,
        "Requests refused 503 because their token already held its share of the requests in flight."),
    family("closedloop_http_requests_in_flight", Gauge, Count,
        "HTTP requests being handled."),
    family("closedloop_http_responses_total", Counter, Count,
        "HTTP answers by status."),
    family("closedloop_otlp_spans_exported_total", Counter, Count,
        "Command spans sent to the OTLP collector."),
    family("closedloop_otlp_export_failures_total", Counter, Count,
        "OTLP exports that failed (the collector was down or refused them)."),
];

/// Tells the installed recorder every family's help text and unit.
pub(super) fn describe() {
    for f in FAMILIES {
        let (name, unit, help) = (f.name, Some(f.unit), f.help);
        metrics::with_recorder(|r| match f.kind {
            Counter => r.describe_counter(name.into(), unit, help.into()),
            Gauge => r.describe_gauge(name.into(), unit, help.into()),
            Histogram(_) => r.describe_histogram(name.into(), unit, help.into()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The metric names recorded in `src`: the first argument of each `counter!`, `gauge!` and
    /// `histogram!`, a string or a constant of the same file.
    fn recorded(src: &str) -> Vec<String> {
        let mut names = Vec::new();
        for mac in ["counter!(", "gauge!(", "histogram!("] {
            for (at, _) in src.match_indices(&format!("metrics::{mac}")) {
                let rest = &src[at + "metrics::".len() + mac.len()..];
                let arg = rest.split([',', ')']).next().unwrap_or("").trim();
                let name = match arg.strip_prefix('"') {
                    Some(s) => s.trim_end_matches('"').to_string(),
                    None => constant(src, arg).unwrap_or_else(|| panic!("{arg}: no constant")),
                };
                names.push(name);
            }
        }
        names
    }

    /// The value of `const NAME: &str = "..."` in `src`.
    fn constant(src: &str, name: &str) -> Option<String> {
        let decl = format!("const {name}: &str = \"");
        let at = src.find(&decl)? + decl.len();
        Some(src[at..].split('"').next()?.to_string())
    }

    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let skip = ["target", "tests", "benches", "examples"];
            if path.is_dir()
                && path
                    .file_name()
                    .is_some_and(|n| !skip.iter().any(|s| n == *s))
            {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }

    #[test]
    fn every_family_recorded_in_the_workspace_has_help() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        sources(&crates, &mut files);
        let mut seen = 0;
        for (path, text) in &files {
            for name in recorded(text) {
                seen += 1;
                assert!(
                    FAMILIES.iter().any(|f| f.name == name),
                    "{path} records {name}, which has no # HELP in families.rs"
                );
            }
        }
        assert!(
            seen >= 20,
            "only {seen} metric uses found: is the scan broken?"
        );
    }

    #[test]
    fn counts_have_count_buckets_and_durations_seconds() {
        for f in FAMILIES {
            let Histogram(buckets) = f.kind else { continue };
            assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{}", f.name);
            match f.unit {
                Unit::Seconds => assert!(f.name.ends_with("_seconds"), "{}", f.name),
                Unit::Count => {
                    let whole = buckets.iter().all(|b| b.fract() == 0.0 && *b >= 1.0);
                    assert!(whole && !f.name.ends_with("_seconds"), "{}", f.name);
                }
                other => panic!("{}: unit {other:?}", f.name),
            }
        }
    }
}
