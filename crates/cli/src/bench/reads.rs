//! The reads against `ping` on the same pipe: each round calls `ping`, then every read once, so
//! each read's figure and its baseline are taken under the same conditions. Measured one phase
//! after the other, a ping p50 taken while the machine was quiet was set against reads taken
//! while it was busy (or the other way round), and the ratio moved by a third between two runs
//! of the same binary.

use super::rpc::Rpc;
use super::stats::{Latencies, Progress};
use super::{Row, ratio_row};
use anyhow::Result;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The reads measured: the row's label and the call.
fn reads(device: &str, finished: Option<&str>) -> Vec<(&'static str, &'static str, Value)> {
    let mut reads = vec![
        (
            "get_device_state p50",
            "get_device_state",
            json!({"device": device}),
        ),
        (
            "list_devices p50, one page of 20",
            "list_devices",
            json!({}),
        ),
    ];
    if let Some(id) = finished {
        reads.push((
            "get_command_status p50, finished",
            "get_command_status",
            json!({"command_id": id}),
        ));
    }
    reads
}

/// `calls` rounds of `ping` and each read of `device` (and of the finished command, when there
/// is one); a row per read with the round's `ping` as its baseline.
pub(super) async fn measure(
    rpc: &mut Rpc,
    calls: usize,
    device: &str,
    finished: Option<&str>,
) -> Result<Vec<Row>> {
    let reads = reads(device, finished);
    let tools: Vec<(&str, Value)> = reads.iter().map(|(_, t, a)| (*t, a.clone())).collect();
    let label = "closedloop: ping and the reads, interleaved";
    let (ping, samples) = interleaved(rpc, label, calls, &tools).await?;
    Ok(reads
        .iter()
        .zip(samples)
        .map(|((label, _, _), s)| ratio_row(label, &s, &ping, "ping"))
        .collect())
}

/// `calls` rounds of `ping` and then each of `tools` (name, arguments) once: the pings'
/// latencies and each tool's.
pub(super) async fn interleaved(
    rpc: &mut Rpc,
    label: &str,
    calls: usize,
    tools: &[(&str, Value)],
) -> Result<(Latencies, Vec<Latencies>)> {
    let mut bar = Progress::new(label, calls);
    let mut ping = Vec::with_capacity(calls);
    let mut samples = vec![Vec::with_capacity(calls); tools.len()];
    let start = Instant::now();
    for i in 0..calls {
        ping.push(timed(rpc.round_trip("ping", Value::Null)).await?);
        for ((tool, args), s) in tools.iter().zip(&mut samples) {
            s.push(timed(rpc.tool_round_trip(tool, args.clone())).await?);
        }
        bar.set(i + 1);
    }
    bar.finish();
    let total = start.elapsed();
    let tools = samples.into_iter().map(|s| Latencies::new(s, total));
    Ok((Latencies::new(ping, total), tools.collect()))
}

/// How long `call` took to answer.
async fn timed(call: impl std::future::Future<Output = Result<()>>) -> Result<Duration> {
    let t = Instant::now();
    call.await?;
    Ok(t.elapsed())
}
