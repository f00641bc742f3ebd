//! The reads against `ping` on the same pipe: each round calls `ping`, then every read once
//! (`tools/list` has rounds of its own, `baseline.rs`), so each figure and its baseline are
//! taken under the same conditions. Measured one phase after the other, a ping p50 taken while
//! the machine was quiet was set against reads taken while it was busy (or the other way
//! round), and the ratio moved by a third between two runs of the same binary.

use super::rpc::Rpc;
use super::stats::{Latencies, Progress};
use super::{Row, ratio_row};
use anyhow::Result;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A request timed in the rounds: its method and params.
pub(super) type Probe = (&'static str, Value);

/// `tools/list`.
pub(super) fn tools_list() -> Probe {
    ("tools/list", Value::Null)
}

/// A `tools/call` of `tool` with `arguments`.
pub(super) fn tool(tool: &str, arguments: Value) -> Probe {
    ("tools/call", json!({"name": tool, "arguments": arguments}))
}

/// The reads measured: the row's label and the call.
fn reads(device: &str, finished: Option<&str>, page: usize) -> Vec<(String, Probe)> {
    let mut reads = vec![
        (
            "get_device_state p50".to_string(),
            tool("get_device_state", json!({"device": device})),
        ),
        (
            format!("list_devices p50, one page of {page}"),
            tool("list_devices", json!({})),
        ),
    ];
    if let Some(id) = finished {
        reads.push((
            "get_command_status p50, finished".to_string(),
            tool("get_command_status", json!({"command_id": id})),
        ));
    }
    reads
}

/// `calls` rounds of `ping` and each read of `device` (and of the finished command, when there
/// is one); `page` is how many devices `list_devices` answers with. A row per read, its
/// baseline the ping of its rounds.
pub(super) async fn measure(
    rpc: &mut Rpc,
    calls: usize,
    device: &str,
    finished: Option<&str>,
    page: usize,
) -> Result<Vec<Row>> {
    let reads = reads(device, finished, page);
    let probes: Vec<Probe> = reads.iter().map(|(_, p)| p.clone()).collect();
    let label = "closedloop: ping and the reads, interleaved";
    let (ping, samples) = interleaved(rpc, label, calls, &probes).await?;
    Ok(reads
        .iter()
        .zip(samples)
        .map(|((label, _), s)| ratio_row(label, &s, &ping, "ping"))
        .collect())
}

/// `calls` rounds of `ping` and then each of `probes` once: the pings' latencies and each
/// probe's.
pub(super) async fn interleaved(
    rpc: &mut Rpc,
    label: &str,
    calls: usize,
    probes: &[Probe],
) -> Result<(Latencies, Vec<Latencies>)> {
    let mut bar = Progress::new(label, calls);
    let mut ping = Vec::with_capacity(calls);
    let mut samples = vec![Vec::with_capacity(calls); probes.len()];
    let start = Instant::now();
    for i in 0..calls {
        ping.push(timed(rpc.round_trip("ping", Value::Null)).await?);
        for ((method, params), s) in probes.iter().zip(&mut samples) {
            s.push(timed(rpc.round_trip(method, params.clone())).await?);
        }
        bar.set(i + 1);
    }
    bar.finish();
    let total = start.elapsed();
    let probes = samples.into_iter().map(|s| Latencies::new(s, total));
    Ok((Latencies::new(ping, total), probes.collect()))
}

/// How long `call` took to answer.
pub(super) async fn timed(call: impl std::future::Future<Output = Result<()>>) -> Result<Duration> {
    let t = Instant::now();
    call.await?;
    Ok(t.elapsed())
}
