//! `/metrics`: what the gateway is doing, in the Prometheus text format, for a monitoring system
//! to scrape.
//!
//! The crates record through the `metrics` facade; [`install`] puts a Prometheus recorder
//! behind it once per process, and [`render`] adds what is read at scrape time (each device's
//! liveness and the age of its last answer) before rendering. Served by the HTTP router at
//! `/metrics` (a `read` token, like every read), and over stdio at `serve --metrics ADDR`.
//!
//! Series (docs/observability.md has the full list):
//! - `closedloop_tool_calls_total{tool, outcome}` — `ok`, `error` (an `isError` result) or
//!   `protocol_error` (a JSON-RPC error); `closedloop_tool_call_duration_seconds{tool}`.
//! - `closedloop_commands_total{device, action, status, code}`,
//!   `closedloop_command_time_to_truth_seconds{device, action}` (the engine's).
//! - `closedloop_device_up{device}` (1 online, 0 offline or not yet answering),
//!   `closedloop_device_last_seen_age_seconds{device}`.
//! - `closedloop_device_poll_duration_seconds`, `closedloop_device_last_poll_seconds{device}`,
//!   `closedloop_device_polls_missed_total{device}`
//!   (the register links'), `closedloop_journal_write_duration_seconds`,
//!   `closedloop_journal_queue_depth`, `closedloop_journal_batch_writes` (the journal's),
//!   `closedloop_leases_held`, `closedloop_leases_taken_total`,
//!   `closedloop_lease_rounds_total{outcome}` (the lease keeper's).
//! - `closedloop_http_connections`, `closedloop_http_connections_refused_total{reason}`,
//!   `closedloop_http_requests_in_flight`, `closedloop_http_responses_total{status}`,
//!   `closedloop_http_auth_failures_total{outcome}`, `closedloop_http_share_spent_total`.
//!
//! Every family has its `# HELP` line and unit, and every histogram buckets that fit what it
//! measures: seconds for durations, counts for `closedloop_journal_batch_writes`
//! ([`families`]).

mod families;

use closedloop_engine::Engine;
use families::{FAMILIES, Kind};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use std::time::Duration;

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often recorded histogram samples are folded into their buckets when nobody scrapes.
const UPKEEP: Duration = Duration::from_secs(1);

/// Installs the Prometheus recorder for this process, once; `None` when another recorder was
/// installed first (a program embedding closedloop with metrics of its own).
pub fn install() -> Option<&'static PrometheusHandle> {
    RECORDER
        .get_or_init(|| match builder().install_recorder() {
            Ok(handle) => {
                families::describe();
                fold_every(handle.clone(), UPKEEP);
                Some(handle)
            }
            Err(e) => {
                tracing::warn!("metrics: not recording, another recorder is installed: {e}");
                None
            }
        })
        .as_ref()
}

/// The recorder's builder: each histogram with its own buckets (seconds unless said otherwise).
fn builder() -> PrometheusBuilder {
    let mut builder = PrometheusBuilder::new()
        .set_buckets(families::SECONDS)
        .expect("the buckets are not empty");
    for f in FAMILIES {
        if let Kind::Histogram(buckets) = f.kind {
            let name = Matcher::Full(f.name.to_string());
            builder = builder
                .set_buckets_for_metric(name, buckets)
                .expect("the buckets are not empty");
        }
    }
    builder
}

/// Folds recorded histogram samples into their buckets every `period`, on a thread of its own.
/// The recorder keeps every raw sample until then: with nobody scraping `/metrics`, a hall of
/// 8,000 devices polled every 100 ms grew by 80,000 samples a second, without bound.
fn fold_every(handle: PrometheusHandle, period: Duration) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(period);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("metrics: no upkeep thread ({e}); histograms fold only at a scrape");
    }
}

/// The exposition text: the devices' liveness and last poll read now, then everything recorded
/// so far.
pub fn render(engine: &Engine) -> Option<String> {
    let handle = install()?;
    for h in engine.health() {
        let device = || h.device.to_string();
        let up = matches!(h.liveness, closedloop_engine::Liveness::Online);
        metrics::gauge!("closedloop_device_up", "device" => device()).set(f64::from(u8::from(up)));
        if let Some(ms) = h.age_ms {
            metrics::gauge!("closedloop_device_last_seen_age_seconds", "device" => device())
                .set(ms as f64 / 1000.0);
        }
        metrics::gauge!("closedloop_device_unreadable_signals", "device" => device())
            .set(h.unreadable as f64);
        if let Some(took) = h.last_poll {
            metrics::gauge!("closedloop_device_last_poll_seconds", "device" => device())
                .set(took.as_secs_f64());
            metrics::counter!("closedloop_device_polls_missed_total", "device" => device())
                .absolute(h.polls_missed);
        }
    }
    // Histograms keep raw samples until upkeep folds them into buckets.
    handle.run_upkeep();
    Some(handle.render())
}

/// Records one tool call: its outcome and how long it took to answer.
pub(crate) fn tool_call(tool: &str, outcome: &'static str, took: Duration) {
    metrics::counter!("closedloop_tool_calls_total",
        "tool" => tool.to_string(), "outcome" => outcome)
    .increment(1);
    metrics::histogram!("closedloop_tool_call_duration_seconds", "tool" => tool.to_string())
        .record(took.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regression: the recorder kept every histogram sample raw until a scrape (rendering
    /// folds them too), so a gateway nobody scraped grew without bound. Only a thread of its
    /// own can fold them in between; it runs once the recorder is installed.
    #[test]
    fn histograms_are_folded_by_a_thread_of_their_own() {
        assert!(install().is_some(), "another recorder is installed");
        // A new thread names itself once it runs: until then it shows its parent's name.
        let mut names = Vec::new();
        for _ in 0..100 {
            names = thread_names();
            if names.iter().any(|n| n == "metrics-upkeep") {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no upkeep thread among {names:?}");
    }

    /// The names of this process's threads.
    fn thread_names() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|n| n.trim().to_string())
            .collect()
    }
}
